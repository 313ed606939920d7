package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func claim(t *testing.T, st *Store, key, hash string, now time.Time, lease time.Duration) (IdemKey, string) {
	t.Helper()
	k, outcome, err := st.ClaimKey(context.Background(), key, hash, now, lease)
	if err != nil {
		t.Fatalf("ClaimKey(%s): %v", key, err)
	}
	return k, outcome
}

func move(t *testing.T, st *Store, key string, tr KeyTransition, now time.Time) IdemKey {
	t.Helper()
	k, err := st.MoveKey(context.Background(), key, tr, now)
	if err != nil {
		t.Fatalf("MoveKey(%s, %+v): %v", key, tr, err)
	}
	return k
}

func TestClaimKeyConcurrentFirstClaims(t *testing.T) {
	st := openTest(t)
	const n = 50
	outcomes := make([]string, n)
	errs := make([]error, n)
	together(n, func(i int) {
		_, outcomes[i], errs[i] = st.ClaimKey(context.Background(), "order-1", "h", t0, time.Minute)
	})
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		switch outcomes[i] {
		case ClaimCreated:
			created++
		case ClaimBusy:
		default:
			t.Errorf("claim %d: outcome %s, want created or busy", i, outcomes[i])
		}
	}
	if created != 1 {
		t.Errorf("%d claims were first, want exactly 1", created)
	}
}

func TestClaimKeyOutcomes(t *testing.T) {
	st := openTest(t)
	lease := time.Minute
	k, outcome := claim(t, st, "k", "h1", t0, lease)
	if outcome != ClaimCreated || k.State != KeyStarted || !k.LeaseUntil.Equal(t0.Add(lease)) || !k.CreatedAt.Equal(t0) {
		t.Fatalf("first claim: %s %+v", outcome, k)
	}
	if _, outcome := claim(t, st, "k", "h2", t0, lease); outcome != ClaimMismatch {
		t.Errorf("another body: %s, want mismatch", outcome)
	}
	if _, outcome := claim(t, st, "k", "h1", t0.Add(lease-time.Nanosecond), lease); outcome != ClaimBusy {
		t.Errorf("while held: %s, want busy", outcome)
	}
	// The holder died before any effect: the next claim takes it over.
	later := t0.Add(lease)
	k, outcome = claim(t, st, "k", "h1", later, lease)
	if outcome != ClaimTakeover || len(k.Takeovers) != 1 || k.Takeovers[0].PreviousState != KeyStarted || !k.Takeovers[0].ExpiredLease.Equal(t0.Add(lease)) || !k.LeaseUntil.Equal(later.Add(lease)) {
		t.Fatalf("after the lease: %s %+v, want a recorded takeover", outcome, k)
	}
	if got, _ := st.Key("k"); len(got.Takeovers) != 1 {
		t.Errorf("the takeover was not stored: %+v", got)
	}
	// Effect pending, then the holder dies: nobody can know; a person must say.
	move(t, st, "k", KeyTransition{To: KeyEffectPending, Lease: lease}, later)
	k, outcome = claim(t, st, "k", "h1", later.Add(2*lease), lease)
	if outcome != ClaimUnsure || k.State != KeyNeedsReconciliation || len(k.Takeovers) != 2 || k.Note == "" {
		t.Fatalf("after an expired effect: %s %+v, want needs_reconciliation", outcome, k)
	}
	if _, outcome := claim(t, st, "k", "h1", later.Add(3*lease), lease); outcome != ClaimUnsure {
		t.Errorf("claim while it needs reconciliation: %s, want unsure", outcome)
	}
	// Released as not done: the next claim starts afresh.
	if k := move(t, st, "k", KeyTransition{Reset: true}, later.Add(3*lease)); k.Note == "" {
		t.Errorf("release says nothing: %+v", k)
	}
	if _, err := st.Key("k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("released key: %v, want ErrNotFound", err)
	}
	if _, outcome := claim(t, st, "k", "h1", later.Add(3*lease), lease); outcome != ClaimCreated {
		t.Errorf("claim after release: %s, want created", outcome)
	}
}

func TestMoveKeyTransitions(t *testing.T) {
	result := json.RawMessage(`{"id":1}`)
	other := json.RawMessage(`{"id":2}`)
	keep := time.Hour
	tests := []struct {
		name    string
		prepare []KeyTransition // applied after the claim
		move    KeyTransition
		want    KeyState // "" with ok: released
		ok      bool
	}{
		{"effect pending on started", nil, KeyTransition{To: KeyEffectPending, Lease: time.Minute}, KeyEffectPending, true},
		{"complete started", nil, KeyTransition{To: KeyCompleted, Result: result, Keep: keep}, KeyCompleted, true},
		{"complete effect pending", []KeyTransition{{To: KeyEffectPending}}, KeyTransition{To: KeyCompleted, Result: result, Keep: keep}, KeyCompleted, true},
		{"complete twice, same result", []KeyTransition{{To: KeyCompleted, Result: result, Keep: keep}}, KeyTransition{To: KeyCompleted, Result: result, Keep: keep}, KeyCompleted, true},
		{"complete twice, other result", []KeyTransition{{To: KeyCompleted, Result: result, Keep: keep}}, KeyTransition{To: KeyCompleted, Result: other, Keep: keep}, "", false},
		{"effect pending on completed", []KeyTransition{{To: KeyCompleted, Result: result, Keep: keep}}, KeyTransition{To: KeyEffectPending}, "", false},
		{"effect pending twice", []KeyTransition{{To: KeyEffectPending}}, KeyTransition{To: KeyEffectPending}, "", false},
		{"release started", nil, KeyTransition{Reset: true}, "", false},
		{"release completed", []KeyTransition{{To: KeyCompleted, Result: result, Keep: keep}}, KeyTransition{Reset: true}, "", false},
		{"release effect pending", []KeyTransition{{To: KeyEffectPending}}, KeyTransition{Reset: true}, "", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openTest(t)
			key := fmt.Sprint("key-", i)
			claim(t, st, key, "h", t0, time.Minute)
			for _, p := range tt.prepare {
				move(t, st, key, p, t0)
			}
			before, err := st.Key(key)
			if err != nil {
				t.Fatal(err)
			}
			k, err := st.MoveKey(context.Background(), key, tt.move, t0.Add(time.Second))
			var state *StateError
			switch {
			case !tt.ok && !errors.As(err, &state):
				t.Fatalf("got %+v, %v; want a StateError", k, err)
			case !tt.ok:
				if after, err := st.Key(key); err != nil || !reflect.DeepEqual(after, before) {
					t.Errorf("a refused move changed the key: %+v -> %+v (%v)", before, after, err)
				}
			case err != nil:
				t.Fatalf("MoveKey: %v", err)
			case k.State != tt.want:
				t.Errorf("state %q, want %q", k.State, tt.want)
			}
		})
	}
	st := openTest(t)
	if _, err := st.MoveKey(context.Background(), "never", KeyTransition{To: KeyEffectPending}, t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("moving an unknown key: %v, want ErrNotFound", err)
	}
}

func TestCompletedKeysExpire(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	keep := 72 * time.Hour
	for _, key := range []string{"old", "reclaimed"} {
		claim(t, st, key, "h", t0, time.Minute)
		move(t, st, key, KeyTransition{To: KeyCompleted, Result: json.RawMessage(`1`), Keep: keep}, t0)
	}
	claim(t, st, "young", "h", t0.Add(time.Hour), time.Minute)
	move(t, st, "young", KeyTransition{To: KeyCompleted, Result: json.RawMessage(`2`), Keep: keep}, t0.Add(time.Hour))
	claim(t, st, "open", "h", t0, time.Minute) // started, never completed: never pruned

	// Just before expiry the result is served; at expiry the key is absent.
	if k, outcome := claim(t, st, "reclaimed", "h", t0.Add(keep-time.Second), time.Minute); outcome != ClaimDone || string(k.Result) != "1" {
		t.Errorf("before expiry: %s %s, want done with the result", outcome, k.Result)
	}
	if _, outcome := claim(t, st, "reclaimed", "other-body", t0.Add(keep), time.Minute); outcome != ClaimCreated {
		t.Errorf("after expiry: %s, want created (an expired key counts as absent)", outcome)
	}
	n, err := st.PruneKeys(ctx, t0.Add(keep), 1)
	if err != nil || n != 1 {
		t.Fatalf("PruneKeys = %d, %v; want 1 (only the expired completed key)", n, err)
	}
	if _, err := st.Key("old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("old: %v, want pruned", err)
	}
	for _, key := range []string{"young", "open", "reclaimed"} {
		if _, err := st.Key(key); err != nil {
			t.Errorf("%s: %v, want kept", key, err)
		}
	}
	all, err := st.Keys("", 100)
	if err != nil || len(all) != 3 {
		t.Errorf("Keys = %d keys, %v; want 3", len(all), err)
	}
	started, _ := st.Keys(KeyStarted, 100)
	if len(started) != 2 {
		t.Errorf("started keys: %d, want 2 (open and reclaimed)", len(started))
	}
}

// TestMoveKeyAuditsInItsTransaction: a move writes its audit entry with it;
// a refused move writes none.
func TestMoveKeyAuditsInItsTransaction(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	if _, _, err := st.ClaimKey(ctx, "k-audit", "h", t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	who := AuditEntry{At: t0, Who: "zapier", From: "10.0.0.9"}
	if _, err := st.MoveKey(ctx, "k-audit", KeyTransition{To: KeyCompleted, Result: []byte(`{"ok":1}`), Keep: time.Hour, Audit: who}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MoveKey(ctx, "k-audit", KeyTransition{To: KeyEffectPending, Audit: who}, t0); err == nil {
		t.Fatal("effect-pending on a completed key was accepted")
	}
	log, err := st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "key completed" || log[0].Target != "k-audit" || log[0].Who != "zapier" || log[0].From != "10.0.0.9" {
		t.Errorf("audit log %+v; want one entry: zapier completed k-audit from 10.0.0.9", log)
	}
}

// TestMoveKeyRefusesALostClaim: a holder whose lease expired and whose key
// was taken over cannot move the key any more; the new holder can, and a
// move that names no claim (the API before claims had ids) still works.
func TestMoveKeyRefusesALostClaim(t *testing.T) {
	st := openTest(t)
	old, outcome := claim(t, st, "k-lost", "h", t0, time.Minute)
	if outcome != ClaimCreated || old.Claim == "" || old.Lease != time.Minute {
		t.Fatalf("first claim = %s %+v, want created with a claim id and its lease", outcome, old)
	}
	cur, outcome := claim(t, st, "k-lost", "h", t0.Add(2*time.Minute), time.Hour)
	if outcome != ClaimTakeover || cur.Claim == "" || cur.Claim == old.Claim || cur.Lease != time.Hour {
		t.Fatalf("takeover = %s %+v, want a new claim id and the new lease", outcome, cur)
	}
	at := t0.Add(3 * time.Minute)
	for _, tr := range []KeyTransition{
		{To: KeyEffectPending, Claim: old.Claim},
		{To: KeyCompleted, Result: []byte(`{}`), Keep: time.Hour, Claim: old.Claim},
	} {
		var state *StateError
		if _, err := st.MoveKey(context.Background(), "k-lost", tr, at); !errors.As(err, &state) {
			t.Errorf("move to %s by the lost claim = %v, want a StateError", tr.To, err)
		}
	}
	if k, err := st.Key("k-lost"); err != nil || k.State != KeyStarted || k.Claim != cur.Claim {
		t.Fatalf("after the refused moves: %+v, %v; want started and held by %s", k, err, cur.Claim)
	}
	k := move(t, st, "k-lost", KeyTransition{To: KeyEffectPending, Lease: time.Minute, Claim: cur.Claim}, at)
	if !k.LeaseUntil.Equal(at.Add(time.Hour)) {
		t.Errorf("effect_pending lease until %s, want %s: extended by the claim's own lease", k.LeaseUntil, at.Add(time.Hour))
	}
	if k := move(t, st, "k-lost", KeyTransition{To: KeyCompleted, Result: []byte(`{}`), Keep: time.Hour}, at); k.State != KeyCompleted {
		t.Errorf("complete without a claim = %s, want completed", k.State)
	}
}
