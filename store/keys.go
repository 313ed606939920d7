package store

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// The idempotency-key API's record. Its rules (claims, leases, takeovers,
// effect_pending, completion, reconciliation) live in package keys, which
// writes this record through the Tx operations of keys_tx.go.

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
	// ExpiresAt is when a completed key may be forgotten (PruneKeys).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Takeovers []Takeover `json:"takeovers,omitempty"`
	Note      string     `json:"note,omitempty"`
}

// Expired reports whether k is a completed key whose retention ended by
// now: such a record is garbage, whether or not PruneKeys has swept it yet.
func (k *IdemKey) Expired(now time.Time) bool {
	return k.State == KeyCompleted && k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
}

// Keys lists keys in a state (all states when empty), by key, at most limit.
func (s *Store) Keys(state KeyState, limit int) ([]IdemKey, error) {
	out := []IdemKey{}
	err := s.view(func(tx *Tx) error {
		c := tx.bucket(keysTable.bucket).Cursor()
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

// PruneKeys deletes the keys that expired by now (IdemKey.Expired), at
// most chunk per transaction so the write lock is held briefly; it returns
// how many it deleted. It is a sweep over records: when a completed key
// expires is decided when it completes (package keys sets ExpiresAt).
func (s *Store) PruneKeys(ctx context.Context, now time.Time, chunk int) (int, error) {
	total := 0
	for {
		n := 0
		err := s.update(ctx, func(tx *Tx) error {
			n = 0
			b := tx.bucket(keysTable.bucket)
			var dead [][]byte
			_ = b.ForEach(func(k, v []byte) error {
				if len(dead) >= chunk {
					return nil
				}
				var ik IdemKey
				if json.Unmarshal(v, &ik) == nil && ik.Expired(now) {
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
