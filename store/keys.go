package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// KeyState is where an idempotency key of the key API is.
type KeyState string

// The idempotency record states of the spec.
const (
	KeyStarted             KeyState = "started"
	KeyEffectPending       KeyState = "effect_pending"
	KeyCompleted           KeyState = "completed"
	KeyNeedsReconciliation KeyState = "needs_reconciliation"
)

// Takeover records a claim that took a key over after its lease expired.
type Takeover struct {
	At            time.Time `json:"at"`
	ExpiredLease  time.Time `json:"expired_lease"`
	PreviousState KeyState  `json:"previous_state"`
}

// IdemKey is one idempotency key claimed by another workflow (n8n, Make, a script).
type IdemKey struct {
	V           int      `json:"v"`
	Key         string   `json:"key"`
	State       KeyState `json:"state"`
	RequestHash string   `json:"request_hash"`
	// Claim names the claim that holds the key: a new id at every claim
	// and takeover, so a holder whose lease expired and was taken over
	// cannot move the new holder's key.
	Claim string `json:"claim,omitempty"`
	// Lease is how long the holder asked to hold it; effect_pending
	// extends the lease by as much.
	Lease       time.Duration   `json:"lease_ns,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	LeaseUntil  time.Time       `json:"lease_until"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	CompletedAt *time.Time      `json:"completed_at,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	Takeovers   []Takeover      `json:"takeovers,omitempty"`
	Note        string          `json:"note,omitempty"`
}

// Claim outcomes.
const (
	ClaimCreated  = "created"    // first claim: go ahead
	ClaimTakeover = "taken_over" // the previous claim's lease expired before any effect: go ahead
	ClaimDone     = "done"       // completed earlier: here is the result
	ClaimBusy     = "busy"       // another claim holds it
	ClaimMismatch = "mismatch"   // same key, different body
	ClaimUnsure   = "unsure"     // an effect may have happened: needs reconciliation
)

// ClaimKey claims key for a request whose body hashes to hash, in one
// transaction. An expired completed key counts as absent.
func (s *Store) ClaimKey(ctx context.Context, key, hash string, now time.Time, lease time.Duration) (IdemKey, string, error) {
	var (
		out     IdemKey
		outcome string
	)
	err := s.update(ctx, func(tx *Tx) error {
		b := tx.bucket(bucketKeys)
		var k IdemKey
		err := getJSON(b, []byte(key), &k)
		if err == ErrNotFound || (err == nil && k.State == KeyCompleted && k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
			k = IdemKey{V: recordVersion, Key: key, State: KeyStarted, RequestHash: hash, Claim: ulid.Make().String(), Lease: lease,
				LeaseUntil: now.Add(lease), CreatedAt: now, UpdatedAt: now}
			out, outcome = k, ClaimCreated
			return putJSON(b, []byte(key), k)
		}
		if err != nil {
			return err
		}
		out = k
		switch {
		case k.RequestHash != hash:
			outcome = ClaimMismatch
		case k.State == KeyCompleted:
			outcome = ClaimDone
		case k.State == KeyNeedsReconciliation:
			outcome = ClaimUnsure
		case now.Before(k.LeaseUntil):
			outcome = ClaimBusy
		case k.State == KeyStarted:
			// The holder died before it said an effect was under way: safe to take over.
			k.Takeovers = append(k.Takeovers, Takeover{At: now, ExpiredLease: k.LeaseUntil, PreviousState: k.State})
			k.Claim, k.Lease = ulid.Make().String(), lease
			k.LeaseUntil, k.UpdatedAt = now.Add(lease), now
			out, outcome = k, ClaimTakeover
			return putJSON(b, []byte(key), k)
		default: // effect_pending and its holder is gone: the effect may have happened
			k.Takeovers = append(k.Takeovers, Takeover{At: now, ExpiredLease: k.LeaseUntil, PreviousState: k.State})
			k.State, k.UpdatedAt = KeyNeedsReconciliation, now
			k.Note = "the claim expired while its effect was pending: the effect may have happened"
			out, outcome = k, ClaimUnsure
			return putJSON(b, []byte(key), k)
		}
		return nil
	})
	if err != nil {
		return IdemKey{}, "", fmt.Errorf("store: claim key %s: %w", key, err)
	}
	return out, outcome, nil
}

// KeyTransition is a move of an idempotency key requested through the API.
type KeyTransition struct {
	To     KeyState        // effect_pending, completed, or "" with Reset
	Result json.RawMessage // for completed
	Reset  bool            // reconcile as "not done": forget the key so it can be claimed afresh
	Lease  time.Duration   // effect_pending extends the lease by this much when the claim named none
	// Claim, when set, must be the key's current claim (IdemKey.Claim) for
	// effect_pending and completed: a holder that lost the key to a
	// takeover is refused. A person's reconciliation names none.
	Claim string
	Keep  time.Duration // completed keys live this long (retention.keys)
	// Audit, when its Who is set, is written in the move's transaction;
	// its Action is filled in from the move.
	Audit AuditEntry
}

// MoveKey applies t to key in one transaction, refusing impossible moves
// with a *StateError. Completing twice with the same result is not an error.
func (s *Store) MoveKey(ctx context.Context, key string, t KeyTransition, now time.Time) (IdemKey, error) {
	var out IdemKey
	err := s.update(ctx, func(tx *Tx) error {
		b := tx.bucket(bucketKeys)
		var k IdemKey
		if err := getJSON(b, []byte(key), &k); err != nil {
			return err
		}
		refuse := func(want string) error {
			return &StateError{What: "key " + key, State: string(k.State), Want: want}
		}
		if t.Claim != "" && t.Claim != k.Claim && !t.Reset {
			return &StateError{What: "key " + key, State: "held by claim " + k.Claim,
				Want: "claim " + t.Claim + " (that claim lost the key: its lease expired and another claim took it over)"}
		}
		switch {
		case t.Reset:
			if k.State != KeyNeedsReconciliation && k.State != KeyEffectPending {
				return refuse("needs_reconciliation or effect_pending to be reconciled")
			}
			out = k
			out.State, out.Note = "", "reconciled as not done: the key was released"
			if err := auditKey(tx, t.Audit, "key released (reconciled as not done)", key); err != nil {
				return err
			}
			return b.Delete([]byte(key))
		case t.To == KeyEffectPending:
			if k.State != KeyStarted {
				return refuse("started")
			}
			lease := t.Lease
			if k.Lease > 0 {
				lease = k.Lease
			}
			k.State, k.LeaseUntil = KeyEffectPending, now.Add(lease)
		case t.To == KeyCompleted:
			switch k.State {
			case KeyCompleted:
				if !bytes.Equal(k.Result, t.Result) {
					return refuse("not completed with a different result")
				}
				out = k
				return nil
			case KeyStarted, KeyEffectPending, KeyNeedsReconciliation:
			default:
				return refuse("started, effect_pending or needs_reconciliation")
			}
			exp := now.Add(t.Keep)
			k.State, k.Result, k.CompletedAt, k.ExpiresAt, k.Note = KeyCompleted, t.Result, &now, &exp, ""
		default:
			return fmt.Errorf("unknown key transition to %q", t.To)
		}
		k.UpdatedAt = now
		out = k
		if err := auditKey(tx, t.Audit, "key "+string(k.State), key); err != nil {
			return err
		}
		return putJSON(b, []byte(key), k)
	})
	if err != nil {
		return IdemKey{}, fmt.Errorf("store: key %s: %w", key, err)
	}
	return out, nil
}

// Key returns one idempotency key.
func (s *Store) Key(key string) (IdemKey, error) {
	var k IdemKey
	err := s.view(func(tx *Tx) error { return getJSON(tx.bucket(bucketKeys), []byte(key), &k) })
	if err != nil {
		return IdemKey{}, fmt.Errorf("store: key %s: %w", key, err)
	}
	return k, nil
}

// Keys lists keys in a state (all states when empty), by key, at most limit.
func (s *Store) Keys(state KeyState, limit int) ([]IdemKey, error) {
	out := []IdemKey{}
	err := s.view(func(tx *Tx) error {
		c := tx.bucket(bucketKeys).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var ik IdemKey
			if err := json.Unmarshal(v, &ik); err != nil {
				return err
			}
			if state == "" || ik.State == state {
				out = append(out, ik)
			}
		}
		return nil
	})
	return out, err
}

// PruneKeys deletes completed keys that expired by now, at most chunk per
// transaction so the write lock is held briefly; it returns how many it deleted.
func (s *Store) PruneKeys(ctx context.Context, now time.Time, chunk int) (int, error) {
	total := 0
	for {
		n := 0
		err := s.update(ctx, func(tx *Tx) error {
			n = 0
			b := tx.bucket(bucketKeys)
			var dead [][]byte
			_ = b.ForEach(func(k, v []byte) error {
				if len(dead) >= chunk {
					return nil
				}
				var ik IdemKey
				if json.Unmarshal(v, &ik) == nil && ik.State == KeyCompleted && ik.ExpiresAt != nil && !now.Before(*ik.ExpiresAt) {
					dead = append(dead, bytes.Clone(k))
				}
				return nil
			})
			for _, k := range dead {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			n = len(dead)
			return nil
		})
		total += n
		if err != nil || n < chunk {
			return total, err
		}
	}
}

// auditKey writes a key move's audit entry when the caller gave one.
func auditKey(tx *Tx, e AuditEntry, action, key string) error {
	if e.Who == "" {
		return nil
	}
	e.Action, e.Target = action, key
	return writeAudit(tx, e)
}
