package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// The key API's rules are tested in package keys. These tests and fixtures
// are about the record: its Tx operations, the list, the expiry sweep.

// ClaimCreated and KeyTransition are fixtures for the retention tests,
// which build keys in given states: claim stores a started key, move sets
// a state as the rules would leave it. They apply no rule.
const ClaimCreated = "created"

// KeyTransition is the state move sets (fixture).
type KeyTransition struct {
	To     KeyState
	Result json.RawMessage
	Lease  time.Duration // effect_pending: held this long
	Keep   time.Duration // completed: expires this long after now
}

// claim stores a started key unless one is stored ("created" then, "" if not).
func claim(t *testing.T, st *Store, key, hash string, now time.Time, lease time.Duration) (IdemKey, string) {
	t.Helper()
	var (
		k       IdemKey
		outcome string
	)
	err := st.Update(context.Background(), func(tx *Tx) error {
		var err error
		k, outcome = IdemKey{}, ""
		if k, err = tx.IdemKey(key); !errors.Is(err, ErrNotFound) {
			return err
		}
		k = IdemKey{Key: key, State: KeyStarted, RequestHash: hash, Claim: "claim-" + key, Lease: lease,
			LeaseUntil: now.Add(lease), CreatedAt: now, UpdatedAt: now}
		outcome = ClaimCreated
		return tx.PutIdemKey(nil, &k)
	})
	if err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	return k, outcome
}

// move sets the stored key's state as tr says.
func move(t *testing.T, st *Store, key string, tr KeyTransition, now time.Time) IdemKey {
	t.Helper()
	var k IdemKey
	err := st.Update(context.Background(), func(tx *Tx) error {
		var err error
		if k, err = tx.IdemKey(key); err != nil {
			return err
		}
		old := k
		k.State, k.UpdatedAt = tr.To, now
		switch tr.To {
		case KeyEffectPending:
			k.LeaseUntil = now.Add(tr.Lease)
		case KeyCompleted:
			exp := now.Add(tr.Keep)
			k.Result, k.CompletedAt, k.ExpiresAt = tr.Result, &now, &exp
		}
		return tx.PutIdemKey(&old, &k)
	})
	if err != nil {
		t.Fatalf("move %s to %s: %v", key, tr.To, err)
	}
	return k
}

// TestIdemKeyRecord: the Tx operations read, insert, replace and delete
// a key, stamping its version; an insert over a stored key is refused.
func TestIdemKeyRecord(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	k := IdemKey{Key: "k-1", State: KeyStarted, RequestHash: "h", Claim: "c1", LeaseUntil: t0.Add(time.Minute), CreatedAt: t0, UpdatedAt: t0}
	if err := st.Update(ctx, func(tx *Tx) error { return tx.PutIdemKey(nil, &k) }); err != nil {
		t.Fatal(err)
	}
	var got IdemKey
	err := st.View(func(tx *Tx) (err error) { got, err = tx.IdemKey("k-1"); return err })
	if err != nil || got.V != recordVersion || !reflect.DeepEqual(got, k) {
		t.Fatalf("IdemKey = %+v, %v; want %+v with version %d", got, err, k, recordVersion)
	}
	again := k
	if err := st.Update(ctx, func(tx *Tx) error { return tx.PutIdemKey(nil, &again) }); err == nil {
		t.Error("a second insert under the same key was accepted")
	}
	err = st.Update(ctx, func(tx *Tx) error {
		old, err := tx.IdemKey("k-1")
		if err != nil {
			return err
		}
		k := old
		k.State, k.Result = KeyCompleted, json.RawMessage(`{"id":1}`)
		return tx.PutIdemKey(&old, &k)
	})
	_ = st.View(func(tx *Tx) error { got, _ = tx.IdemKey("k-1"); return nil })
	if err != nil || got.State != KeyCompleted || string(got.Result) != `{"id":1}` {
		t.Fatalf("after a put over it: %+v, %v", got, err)
	}
	err = st.Update(ctx, func(tx *Tx) error {
		k, err := tx.IdemKey("k-1")
		if err != nil {
			return err
		}
		return tx.DeleteIdemKey(&k)
	})
	if gerr := st.View(func(tx *Tx) error { _, err := tx.IdemKey("k-1"); return err }); err != nil || !errors.Is(gerr, ErrNotFound) {
		t.Errorf("after delete: %v, %v; want ErrNotFound", err, gerr)
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.IdemKey("never"); return err }); !errors.Is(err, ErrNotFound) {
		t.Errorf("IdemKey(never) = %v, want ErrNotFound", err)
	}
}

// TestPruneAndListKeys: the sweep deletes only completed keys past their
// expiry, chunk by chunk; Keys lists by key, filtered by state.
func TestPruneAndListKeys(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	keep := 72 * time.Hour
	for _, key := range []string{"old", "older"} {
		claim(t, st, key, "h", t0, time.Minute)
		move(t, st, key, KeyTransition{To: KeyCompleted, Result: json.RawMessage(`1`), Keep: keep}, t0)
	}
	claim(t, st, "young", "h", t0, time.Minute)
	move(t, st, "young", KeyTransition{To: KeyCompleted, Result: json.RawMessage(`2`), Keep: keep}, t0.Add(time.Hour))
	claim(t, st, "open", "h", t0, time.Minute) // started, never completed: never pruned
	claim(t, st, "pending", "h", t0, time.Minute)
	move(t, st, "pending", KeyTransition{To: KeyEffectPending, Lease: time.Minute}, t0)

	if n, err := st.PruneKeys(ctx, t0.Add(keep-time.Nanosecond), 1); err != nil || n != 0 {
		t.Errorf("PruneKeys before expiry = %d, %v; want 0", n, err)
	}
	// A chunk of 1 takes one transaction per key.
	if n, err := st.PruneKeys(ctx, t0.Add(keep), 1); err != nil || n != 2 {
		t.Fatalf("PruneKeys = %d, %v; want 2 (only the expired completed keys)", n, err)
	}
	for _, key := range []string{"old", "older"} {
		if err := st.View(func(tx *Tx) error { _, err := tx.IdemKey(key); return err }); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want pruned", key, err)
		}
	}
	all, err := st.Keys("", 100)
	var names []string
	for _, k := range all {
		names = append(names, k.Key)
	}
	if want := []string{"open", "pending", "young"}; err != nil || !reflect.DeepEqual(names, want) {
		t.Errorf("Keys = %v, %v; want %v", names, err, want)
	}
	if started, err := st.Keys(KeyStarted, 100); err != nil || len(started) != 1 || started[0].Key != "open" {
		t.Errorf("started keys: %+v, %v; want only open", started, err)
	}
	if some, err := st.Keys("", 2); err != nil || len(some) != 2 {
		t.Errorf("Keys with limit 2: %d, %v", len(some), err)
	}
}
