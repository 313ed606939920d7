package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// t0 is the fixed clock every test starts from.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// openStore opens a store on a real bbolt file, checked and closed at cleanup.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, "")
}

// together runs n goroutines released at once (testkit.Together).
func together(n int, fn func(i int)) { testkit.Together(n, fn) }

func claimed(t *testing.T, st *store.Store, key, hash string, now time.Time, lease time.Duration) (store.IdemKey, Outcome) {
	t.Helper()
	k, outcome, err := Claim(context.Background(), st, key, hash, now, lease)
	if err != nil {
		t.Fatalf("Claim(%s): %v", key, err)
	}
	return k, outcome
}

func stored(t *testing.T, st *store.Store, key string) store.IdemKey {
	t.Helper()
	var k store.IdemKey
	err := st.View(func(tx *store.Tx) (err error) { k, err = tx.IdemKey(key); return err })
	if err != nil {
		t.Fatalf("Key(%s): %v", key, err)
	}
	return k
}

// A step moves a key, as a test's preparation or as the move under test.
type step func(st *store.Store, key string, now time.Time) (store.IdemKey, error)

func pending(lease time.Duration) step {
	return func(st *store.Store, key string, now time.Time) (store.IdemKey, error) {
		return EffectPending(context.Background(), st, key, By{}, lease, now)
	}
}

func completed(result string, keep time.Duration) step {
	return func(st *store.Store, key string, now time.Time) (store.IdemKey, error) {
		return Complete(context.Background(), st, key, By{}, json.RawMessage(result), keep, now)
	}
}

func released(st *store.Store, key string, now time.Time) (store.IdemKey, error) {
	return Release(context.Background(), st, key, By{}, now)
}

func must(t *testing.T, st *store.Store, key string, s step, now time.Time) store.IdemKey {
	t.Helper()
	k, err := s(st, key, now)
	if err != nil {
		t.Fatalf("move %s: %v", key, err)
	}
	return k
}

// TestConcurrentFirstClaims: of many first claims at once, exactly one
// gets the key; the others are told it is held.
func TestConcurrentFirstClaims(t *testing.T) {
	st := openStore(t)
	const n = 50
	outcomes := make([]Outcome, n)
	errs := make([]error, n)
	together(n, func(i int) {
		_, outcomes[i], errs[i] = Claim(context.Background(), st, "order-1", "h", t0, time.Minute)
	})
	created := 0
	for i := range n {
		var busy *BusyError
		switch {
		case errs[i] == nil && outcomes[i] == Created:
			created++
		case errors.As(errs[i], &busy):
		default:
			t.Errorf("claim %d: %s, %v; want created or a BusyError", i, outcomes[i], errs[i])
		}
	}
	if created != 1 {
		t.Errorf("%d claims were first, want exactly 1", created)
	}
}

// TestConcurrentTakeovers: once a lease has expired, of many claims at
// once exactly one takes the key over, and the claim id it was given is
// the one stored.
func TestConcurrentTakeovers(t *testing.T) {
	st := openStore(t)
	first, _ := claimed(t, st, "sync-1", "h", t0, time.Minute)
	const n = 50
	keys := make([]store.IdemKey, n)
	outcomes := make([]Outcome, n)
	errs := make([]error, n)
	together(n, func(i int) {
		keys[i], outcomes[i], errs[i] = Claim(context.Background(), st, "sync-1", "h", t0.Add(time.Minute), time.Minute)
	})
	var winner store.IdemKey
	took := 0
	for i := range n {
		var busy *BusyError
		switch {
		case errs[i] == nil && outcomes[i] == TakenOver:
			took++
			winner = keys[i]
		case errors.As(errs[i], &busy):
		default:
			t.Errorf("claim %d: %s, %v; want taken over or a BusyError", i, outcomes[i], errs[i])
		}
	}
	if took != 1 {
		t.Fatalf("%d claims took the key over, want exactly 1", took)
	}
	got := stored(t, st, "sync-1")
	if got.Claim != winner.Claim || got.Claim == first.Claim || len(got.Takeovers) != 1 {
		t.Errorf("stored %+v; want held by the winner's claim %s after one takeover", got, winner.Claim)
	}
}

// TestClaimsBesideFailingNeighbours: a claim whose commit round is rolled
// back and run again (a neighbour failed) reports what was committed, not
// what its first run decided: the claim id it returns is the stored one.
func TestClaimsBesideFailingNeighbours(t *testing.T) {
	st := openStore(t)
	const n = 40
	boom := errors.New("a neighbour fails")
	got := make([]store.IdemKey, n)
	errs := make([]error, n)
	together(2*n, func(i int) {
		if i >= n {
			if err := st.Update(context.Background(), func(tx *store.Tx) error { return boom }); !errors.Is(err, boom) {
				t.Errorf("failing neighbour: %v", err)
			}
			return
		}
		got[i], _, errs[i] = Claim(context.Background(), st, fmt.Sprint("k-", i), "h", t0, time.Minute)
	})
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if s := stored(t, st, got[i].Key); s.Claim != got[i].Claim {
			t.Errorf("%s: Claim returned claim %s, the store holds %s", got[i].Key, got[i].Claim, s.Claim)
		}
	}
}

// TestClaimOutcomes walks one key through every claim decision.
func TestClaimOutcomes(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	lease := time.Minute
	k, outcome := claimed(t, st, "k", "h1", t0, lease)
	if outcome != Created || k.State != store.KeyStarted || k.Claim == "" || !k.LeaseUntil.Equal(t0.Add(lease)) || !k.CreatedAt.Equal(t0) {
		t.Fatalf("first claim: %s %+v", outcome, k)
	}
	var mismatch *MismatchError
	if _, _, err := Claim(ctx, st, "k", "h2", t0, lease); !errors.As(err, &mismatch) || mismatch.Key != "k" {
		t.Errorf("another body: %v, want a MismatchError", err)
	}
	var busy *BusyError
	if _, _, err := Claim(ctx, st, "k", "h1", t0.Add(lease-time.Nanosecond), lease); !errors.As(err, &busy) || !busy.Until.Equal(t0.Add(lease)) || busy.State != store.KeyStarted {
		t.Errorf("while held: %v, want a BusyError until %s", err, t0.Add(lease))
	}
	// The holder died before any effect: the next claim takes it over.
	later := t0.Add(lease)
	k, outcome = claimed(t, st, "k", "h1", later, lease)
	if outcome != TakenOver || len(k.Takeovers) != 1 || k.Takeovers[0].PreviousState != store.KeyStarted || !k.Takeovers[0].ExpiredLease.Equal(t0.Add(lease)) || !k.LeaseUntil.Equal(later.Add(lease)) {
		t.Fatalf("after the lease: %s %+v, want a recorded takeover", outcome, k)
	}
	if got := stored(t, st, "k"); len(got.Takeovers) != 1 {
		t.Errorf("the takeover was not stored: %+v", got)
	}
	// Effect pending, then the holder dies: nobody can know; a person must say.
	must(t, st, "k", pending(lease), later)
	var unsure *UnsureError
	if _, _, err := Claim(ctx, st, "k", "h1", later.Add(2*lease), lease); !errors.As(err, &unsure) || unsure.Note == "" {
		t.Fatalf("after an expired effect: %v, want an UnsureError with a note", err)
	}
	// The refusal is an answer: the move to needs_reconciliation committed.
	if got := stored(t, st, "k"); got.State != store.KeyNeedsReconciliation || len(got.Takeovers) != 2 || got.Note == "" {
		t.Fatalf("after an expired effect: %+v, want needs_reconciliation stored", got)
	}
	if _, _, err := Claim(ctx, st, "k", "h1", later.Add(3*lease), lease); !errors.As(err, &unsure) {
		t.Errorf("claim while it needs reconciliation: %v, want an UnsureError", err)
	}
	// Released as not done: the next claim starts afresh.
	if k := must(t, st, "k", released, later.Add(3*lease)); k.Note == "" || k.State != "" {
		t.Errorf("release: %+v, want no state and a note", k)
	}
	if err := st.View(func(tx *store.Tx) error { _, err := tx.IdemKey("k"); return err }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("released key: %v, want ErrNotFound", err)
	}
	if _, outcome := claimed(t, st, "k", "h1", later.Add(3*lease), lease); outcome != Created {
		t.Errorf("claim after release: %s, want created", outcome)
	}
}

// TestMoves: every move from every state it may or may not start from; a
// refused move changes nothing.
func TestMoves(t *testing.T) {
	keep := time.Hour
	tests := []struct {
		name    string
		prepare []step // applied after the claim
		move    step
		want    store.KeyState // "" with ok: released
		ok      bool
	}{
		{"effect pending on started", nil, pending(time.Minute), store.KeyEffectPending, true},
		{"complete started", nil, completed(`{"id":1}`, keep), store.KeyCompleted, true},
		{"complete effect pending", []step{pending(0)}, completed(`{"id":1}`, keep), store.KeyCompleted, true},
		{"complete twice, same result", []step{completed(`{"id":1}`, keep)}, completed(`{"id":1}`, keep), store.KeyCompleted, true},
		{"complete twice, other result", []step{completed(`{"id":1}`, keep)}, completed(`{"id":2}`, keep), "", false},
		{"effect pending on completed", []step{completed(`{"id":1}`, keep)}, pending(0), "", false},
		{"effect pending twice", []step{pending(0)}, pending(0), "", false},
		{"release started", nil, released, "", false},
		{"release completed", []step{completed(`{"id":1}`, keep)}, released, "", false},
		{"release effect pending", []step{pending(0)}, released, "", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			key := fmt.Sprint("key-", i)
			claimed(t, st, key, "h", t0, time.Minute)
			for _, p := range tt.prepare {
				must(t, st, key, p, t0)
			}
			before := stored(t, st, key)
			k, err := tt.move(st, key, t0.Add(time.Second))
			var state *StateError
			switch {
			case !tt.ok && !errors.As(err, &state):
				t.Fatalf("got %+v, %v; want a StateError", k, err)
			case !tt.ok:
				var after store.IdemKey
				if err := st.View(func(tx *store.Tx) (err error) { after, err = tx.IdemKey(key); return err }); err != nil || !reflect.DeepEqual(after, before) {
					t.Errorf("a refused move changed the key: %+v -> %+v (%v)", before, after, err)
				}
			case err != nil:
				t.Fatalf("move: %v", err)
			case k.State != tt.want:
				t.Errorf("state %q, want %q", k.State, tt.want)
			}
		})
	}
	st := openStore(t)
	for name, s := range map[string]step{"effect pending": pending(0), "complete": completed(`1`, keep), "release": released} {
		if _, err := s(st, "never", t0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s on an unknown key: %v, want ErrNotFound", name, err)
		}
	}
}

// TestCompletedKeysExpire: a completed key serves its result for keep,
// then counts as absent even before the sweep removes it.
func TestCompletedKeysExpire(t *testing.T) {
	st := openStore(t)
	keep := 72 * time.Hour
	claimed(t, st, "k", "h", t0, time.Minute)
	k := must(t, st, "k", completed(`1`, keep), t0)
	if k.CompletedAt == nil || !k.CompletedAt.Equal(t0) || k.ExpiresAt == nil || !k.ExpiresAt.Equal(t0.Add(keep)) {
		t.Fatalf("completed: %+v, want completed at t0 and expiring keep later", k)
	}
	if k, outcome := claimed(t, st, "k", "h", t0.Add(keep-time.Second), time.Minute); outcome != Done || string(k.Result) != "1" {
		t.Errorf("before expiry: %s %s, want done with the result", outcome, k.Result)
	}
	k, outcome := claimed(t, st, "k", "other-body", t0.Add(keep), time.Minute)
	if outcome != Created || k.State != store.KeyStarted || k.Result != nil || k.ExpiresAt != nil || !k.CreatedAt.Equal(t0.Add(keep)) {
		t.Errorf("after expiry: %s %+v, want a fresh claim (an expired key counts as absent)", outcome, k)
	}
}

// TestMovesAuditInTheirTransaction: a move writes its audit entry with it;
// a refused move writes none.
func TestMovesAuditInTheirTransaction(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	claimed(t, st, "k-audit", "h", t0, time.Minute)
	who := By{Audit: store.AuditEntry{At: t0, Who: "zapier", From: "10.0.0.9"}}
	if _, err := Complete(ctx, st, "k-audit", who, []byte(`{"ok":1}`), time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := EffectPending(ctx, st, "k-audit", who, time.Minute, t0); err == nil {
		t.Fatal("effect-pending on a completed key was accepted")
	}
	claimed(t, st, "k-gone", "h", t0, time.Minute)
	must(t, st, "k-gone", pending(time.Minute), t0)
	if _, err := Release(ctx, st, "k-gone", who, t0); err != nil {
		t.Fatal(err)
	}
	log, err := st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, e := range log {
		if e.Who != "zapier" || e.From != "10.0.0.9" {
			t.Errorf("audit entry %+v, want zapier from 10.0.0.9", e)
		}
		actions[e.Target] = e.Action
	}
	want := map[string]string{"k-audit": "key completed", "k-gone": "key released (reconciled as not done)"}
	if len(log) != 2 || !reflect.DeepEqual(actions, want) {
		t.Errorf("audit log %+v; want exactly %v", log, want)
	}
}

// TestLostClaimCannotMove: a holder whose lease expired and whose key was
// taken over cannot move the key any more; the new holder can, and a move
// that names no claim (the API before claims had ids) still works.
func TestLostClaimCannotMove(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	old, outcome := claimed(t, st, "k-lost", "h", t0, time.Minute)
	if outcome != Created || old.Claim == "" || old.Lease != time.Minute {
		t.Fatalf("first claim = %s %+v, want created with a claim id and its lease", outcome, old)
	}
	cur, outcome := claimed(t, st, "k-lost", "h", t0.Add(2*time.Minute), time.Hour)
	if outcome != TakenOver || cur.Claim == "" || cur.Claim == old.Claim || cur.Lease != time.Hour {
		t.Fatalf("takeover = %s %+v, want a new claim id and the new lease", outcome, cur)
	}
	at := t0.Add(3 * time.Minute)
	stale := By{Claim: old.Claim}
	for name, move := range map[string]func() error{
		"effect pending": func() error { _, err := EffectPending(ctx, st, "k-lost", stale, time.Minute, at); return err },
		"complete":       func() error { _, err := Complete(ctx, st, "k-lost", stale, []byte(`{}`), time.Hour, at); return err },
	} {
		var lost *LostClaimError
		if err := move(); !errors.As(err, &lost) || lost.Holder != cur.Claim || lost.Claim != old.Claim {
			t.Errorf("%s by the lost claim = %v, want a LostClaimError naming both claims", name, err)
		}
	}
	if k := stored(t, st, "k-lost"); k.State != store.KeyStarted || k.Claim != cur.Claim {
		t.Fatalf("after the refused moves: %+v; want started and held by %s", k, cur.Claim)
	}
	k, err := EffectPending(ctx, st, "k-lost", By{Claim: cur.Claim}, time.Minute, at)
	if err != nil || !k.LeaseUntil.Equal(at.Add(time.Hour)) {
		t.Errorf("effect_pending by the holder = %+v, %v; want the lease extended by the claim's own hour", k, err)
	}
	if k := must(t, st, "k-lost", completed(`{}`, time.Hour), at); k.State != store.KeyCompleted {
		t.Errorf("complete without a claim = %s, want completed", k.State)
	}
}

// TestRefusalsRead pins the sentences the API answers with.
func TestRefusalsRead(t *testing.T) {
	until := time.Date(2026, 11, 29, 12, 5, 0, 0, time.UTC)
	tests := []struct {
		err  error
		want string
	}{
		{&MismatchError{Key: "k"}, `key "k" was first claimed with a different body; use a new key for a different request`},
		{&BusyError{Key: "k", State: store.KeyStarted, Until: until}, `key "k" is held by another claim (started) until 2026-11-29T12:05:00Z; try again after that`},
		{&UnsureError{Key: "k", Note: "why"}, `key "k" needs reconciliation: why`},
		{&LostClaimError{Key: "k", Holder: "B", Claim: "A"}, "key k is held by claim B; this needs it to be claim A (that claim lost the key: its lease expired and another claim took it over)"},
		{&StateError{Key: "k", State: store.KeyCompleted, Want: "started"}, "key k is completed; this needs it to be started"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%T: %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestCompleteTwiceWrittenDifferently: the result is a caller's JSON, and
// the store keeps it as json.Marshal writes it (compact, < > & escaped).
// Completing again with the same result, spaced or with & in it, is the
// same completion, not a conflict; the result reads back as it answered.
func TestCompleteTwiceWrittenDifferently(t *testing.T) {
	st := openStore(t)
	result := "{\n  \"note\": \"fish & chips <sent>\",\r\n  \"ok\": true\n}"
	claimed(t, st, "k", "h", t0, time.Minute)
	first := must(t, st, "k", completed(result, time.Hour), t0)
	again := must(t, st, "k", completed(result, time.Hour), t0.Add(time.Second))
	if !reflect.DeepEqual(again, first) {
		t.Errorf("the second completion answered %+v, want the first, %+v", again, first)
	}
	if k := stored(t, st, "k"); !reflect.DeepEqual(k, first) {
		t.Errorf("stored %s, answered %s", k.Result, first.Result)
	}
	if _, err := completed(`{"ok":false}`, time.Hour)(st, "k", t0); err == nil {
		t.Error("completing with another result was accepted")
	}
}
