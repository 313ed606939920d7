// Package keys owns the rules of the idempotency-key API, which other
// workflows (n8n, Make, scripts) use to run their own side effects once:
// claim a key with the request body's hash, say effect_pending before the
// effect, complete it with the effect's result.
//
// One state machine, here and nowhere else:
//
//	(absent) --claim--> started --effect-pending--> effect_pending
//	started, effect_pending, needs_reconciliation --complete--> completed
//	started, lease expired --claim--> started (taken over, new claim id)
//	effect_pending, lease expired --claim--> needs_reconciliation
//	effect_pending, needs_reconciliation --release--> (absent)
//	completed, retention over --> counts as absent (store.PruneKeys sweeps it)
//
// Each operation is one check-then-write inside one store.Update. A refusal
// (a different body, a key held by another claim, a claim that lost the
// key, an impossible move) is a typed error returned once the transaction
// is over; inside it a refusal is an output, not an error, so it never
// costs the neighbours in its commit round a re-run.
package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
)

// Outcome is how a claim was granted.
type Outcome string

// The claims that succeed; the others are errors (MismatchError,
// BusyError, UnsureError).
const (
	Created   Outcome = "created"    // first claim: go ahead
	TakenOver Outcome = "taken_over" // the previous claim's lease expired before any effect: go ahead
	Done      Outcome = "done"       // completed earlier: use the stored result, do nothing
)

const (
	// unsureNote is the note of a key whose effect may have happened.
	unsureNote = "the claim expired while its effect was pending: the effect may have happened"
	// releasedNote is the note of the record Release returns.
	releasedNote = "reconciled as not done: the key was released"
)

// Claim claims key for a request whose body hashes to hash, to be held for
// lease. A completed key whose retention is over counts as absent. It
// refuses with *MismatchError (another body), *BusyError (another claim
// holds it) or *UnsureError (an effect may have happened; a claim that
// finds an effect_pending key past its lease moves it to
// needs_reconciliation, and that move is committed).
func Claim(ctx context.Context, st *store.Store, key, hash string, now time.Time, lease time.Duration) (store.IdemKey, Outcome, error) {
	k, outcome, err := run(ctx, st, func(tx *store.Tx) (store.IdemKey, Outcome, error) {
		return claim(tx, key, hash, now, lease)
	})
	if err != nil {
		return store.IdemKey{}, "", fmt.Errorf("keys: claim %s: %w", key, err)
	}
	return k, outcome, nil
}

// By is who moves a key.
type By struct {
	// Claim, when set, must be the key's current claim (IdemKey.Claim) for
	// EffectPending and Complete: a holder that lost the key to a takeover
	// gets *LostClaimError. Empty: unchecked, as the spec's routes name no
	// claim; a person's reconciliation names none.
	Claim string
	// Audit, when its Who is set, is written in the move's transaction,
	// its Action and Target filled in from the move.
	Audit store.AuditEntry
}

// EffectPending records that the holder is about to call the outside
// world: started -> effect_pending, held for the claim's own lease (lease
// when the key's record names none). A key never claimed (or released, or
// pruned) is store.ErrNotFound; an impossible move, *StateError.
func EffectPending(ctx context.Context, st *store.Store, key string, by By, lease time.Duration, now time.Time) (store.IdemKey, error) {
	return move(ctx, st, "effect-pending", key, func(tx *store.Tx) (store.IdemKey, error) {
		return effectPending(tx, key, by, lease, now)
	})
}

// Complete records the effect's result: started, effect_pending or
// needs_reconciliation -> completed, kept for keep. Completing again with
// the same result answers the stored key; with another, *StateError.
func Complete(ctx context.Context, st *store.Store, key string, by By, result json.RawMessage, keep time.Duration, now time.Time) (store.IdemKey, error) {
	return move(ctx, st, "complete", key, func(tx *store.Tx) (store.IdemKey, error) {
		return complete(tx, key, by, result, keep, now)
	})
}

// Release is a person's verdict that the effect did not happen: an
// effect_pending or needs_reconciliation key is forgotten, so its next
// claim starts afresh. It returns the key as it was, with State "" and a
// note. by.Claim is not checked: the holder is gone.
func Release(ctx context.Context, st *store.Store, key string, by By, now time.Time) (store.IdemKey, error) {
	return move(ctx, st, "release", key, func(tx *store.Tx) (store.IdemKey, error) {
		return release(tx, key, by)
	})
}

// run runs rule in one Update. A refusal is an answer, not a failure: fn
// returns nil, so that it costs the neighbours in its commit round no
// re-run and what the rule wrote before refusing commits (a claim that
// moves an expired effect_pending key to needs_reconciliation). The
// refusal is returned once the transaction is over. fn sets every output
// afresh, as Update may run it twice.
func run(ctx context.Context, st *store.Store, rule func(*store.Tx) (store.IdemKey, Outcome, error)) (store.IdemKey, Outcome, error) {
	var (
		k       store.IdemKey
		outcome Outcome
		refusal error
	)
	err := st.Update(ctx, func(tx *store.Tx) error {
		var err error
		k, outcome, err = rule(tx)
		refusal = nil
		if refused(err) {
			refusal, err = err, nil
		}
		return err
	})
	if err == nil {
		err = refusal
	}
	if err != nil {
		return store.IdemKey{}, "", err
	}
	return k, outcome, nil
}

// move is run for a move, wrapping its error.
func move(ctx context.Context, st *store.Store, what, key string, rule func(*store.Tx) (store.IdemKey, error)) (store.IdemKey, error) {
	k, _, err := run(ctx, st, func(tx *store.Tx) (store.IdemKey, Outcome, error) {
		k, err := rule(tx)
		return k, "", err
	})
	if err != nil {
		return store.IdemKey{}, fmt.Errorf("keys: %s %s: %w", what, key, err)
	}
	return k, nil
}

func claim(tx *store.Tx, key, hash string, now time.Time, lease time.Duration) (store.IdemKey, Outcome, error) {
	k, err := tx.IdemKey(key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return start(tx, nil, key, hash, now, lease)
	case err != nil:
		return store.IdemKey{}, "", err
	case k.Expired(now):
		old := k
		return start(tx, &old, key, hash, now, lease)
	case k.RequestHash != hash:
		return store.IdemKey{}, "", &MismatchError{Key: key}
	case k.State == store.KeyCompleted:
		return k, Done, nil
	case k.State == store.KeyNeedsReconciliation:
		return store.IdemKey{}, "", &UnsureError{Key: key, Note: k.Note}
	case now.Before(k.LeaseUntil):
		return store.IdemKey{}, "", &BusyError{Key: key, State: k.State, Until: k.LeaseUntil}
	}
	old := k
	k.Takeovers = append(k.Takeovers, store.Takeover{At: now, ExpiredLease: k.LeaseUntil, PreviousState: k.State})
	k.UpdatedAt = now
	if k.State == store.KeyStarted {
		// The holder died before it said an effect was under way: safe to take over.
		k.Claim, k.Lease, k.LeaseUntil = ulid.Make().String(), lease, now.Add(lease)
		if err := tx.PutIdemKey(&old, &k); err != nil {
			return store.IdemKey{}, "", err
		}
		return k, TakenOver, nil
	}
	// effect_pending and its holder is gone: the effect may have happened.
	k.State, k.Note = store.KeyNeedsReconciliation, unsureNote
	if err := tx.PutIdemKey(&old, &k); err != nil {
		return store.IdemKey{}, "", err
	}
	return store.IdemKey{}, "", &UnsureError{Key: key, Note: k.Note}
}

// start writes a fresh claim over old (nil: nothing is stored; else an
// expired completed key).
func start(tx *store.Tx, old *store.IdemKey, key, hash string, now time.Time, lease time.Duration) (store.IdemKey, Outcome, error) {
	k := store.IdemKey{Key: key, State: store.KeyStarted, RequestHash: hash, Claim: ulid.Make().String(), Lease: lease,
		LeaseUntil: now.Add(lease), CreatedAt: now, UpdatedAt: now}
	if err := tx.PutIdemKey(old, &k); err != nil {
		return store.IdemKey{}, "", err
	}
	return k, Created, nil
}

// held reads key for a move by claim: store.ErrNotFound when it was never
// claimed, *LostClaimError when claim is set and is not the key's.
func held(tx *store.Tx, key, claim string) (store.IdemKey, error) {
	k, err := tx.IdemKey(key)
	if err != nil {
		return store.IdemKey{}, err
	}
	if claim != "" && claim != k.Claim {
		return store.IdemKey{}, &LostClaimError{Key: key, Holder: k.Claim, Claim: claim}
	}
	return k, nil
}

func effectPending(tx *store.Tx, key string, by By, lease time.Duration, now time.Time) (store.IdemKey, error) {
	k, err := held(tx, key, by.Claim)
	if err != nil {
		return store.IdemKey{}, err
	}
	if k.State != store.KeyStarted {
		return store.IdemKey{}, &StateError{Key: key, State: k.State, Want: "started"}
	}
	if k.Lease > 0 {
		lease = k.Lease
	}
	old := k
	k.State, k.LeaseUntil, k.UpdatedAt = store.KeyEffectPending, now.Add(lease), now
	if err := write(tx, &old, &k, by); err != nil {
		return store.IdemKey{}, err
	}
	return k, nil
}

func complete(tx *store.Tx, key string, by By, result json.RawMessage, keep time.Duration, now time.Time) (store.IdemKey, error) {
	// As the store keeps and returns it, so that the same result written
	// with other spacing or escapes is the same completion.
	result = store.CanonicalJSON(result)
	k, err := held(tx, key, by.Claim)
	if err != nil {
		return store.IdemKey{}, err
	}
	switch k.State {
	case store.KeyCompleted:
		if !bytes.Equal(k.Result, result) {
			return store.IdemKey{}, &StateError{Key: key, State: k.State, Want: "not completed with a different result"}
		}
		return k, nil // completing twice alike is an answer: nothing moves, nothing is audited
	case store.KeyStarted, store.KeyEffectPending, store.KeyNeedsReconciliation:
	default:
		return store.IdemKey{}, &StateError{Key: key, State: k.State, Want: "started, effect_pending or needs_reconciliation"}
	}
	old := k
	exp := now.Add(keep)
	k.State, k.Result, k.CompletedAt, k.ExpiresAt, k.Note, k.UpdatedAt = store.KeyCompleted, result, &now, &exp, "", now
	if err := write(tx, &old, &k, by); err != nil {
		return store.IdemKey{}, err
	}
	return k, nil
}

func release(tx *store.Tx, key string, by By) (store.IdemKey, error) {
	k, err := held(tx, key, "")
	if err != nil {
		return store.IdemKey{}, err
	}
	if k.State != store.KeyNeedsReconciliation && k.State != store.KeyEffectPending {
		return store.IdemKey{}, &StateError{Key: key, State: k.State, Want: "needs_reconciliation or effect_pending to be reconciled"}
	}
	if err := audit(tx, by, "key released (reconciled as not done)", key); err != nil {
		return store.IdemKey{}, err
	}
	if err := tx.DeleteIdemKey(&k); err != nil {
		return store.IdemKey{}, err
	}
	k.State, k.Note = "", releasedNote
	return k, nil
}

// write stores k over old with the move's audit entry ("key completed").
func write(tx *store.Tx, old, k *store.IdemKey, by By) error {
	if err := audit(tx, by, "key "+string(k.State), k.Key); err != nil {
		return err
	}
	return tx.PutIdemKey(old, k)
}

// audit writes a move's audit entry when the caller gave one.
func audit(tx *store.Tx, by By, action, key string) error {
	if by.Audit.Who == "" {
		return nil
	}
	e := by.Audit
	e.Action, e.Target = action, key
	return tx.Audit(e)
}
