package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// A push token is the one-time secret behind a push notification's
// buttons (ntfy's http actions POST it back): it allows one decision of
// one draft by one person until it expires. Only its SHA-256 is kept:
//
//	push_tokens   SHA-256(token) -> PushToken JSON
//
// It is spent in the transaction of the decision it allows (gone if the
// decision is made, kept if the transaction fails), and an expired one is
// deleted by the sweep (SweepPushTokens). The bucket is created by the
// first token written (a file without one has none; reads find nothing),
// so no migration and no schema version.
var bucketPushTokens = []byte("push_tokens")

// PushToken is what a push token allows.
type PushToken struct {
	V         int       `json:"v"`
	Surface   string    `json:"surface"` // "ntfy"
	Draft     string    `json:"draft"`
	User      string    `json:"user"` // the person the push went to, who decides
	CreatedAt time.Time `json:"created_at"`
	Expires   time.Time `json:"expires"`
}

// ExpiredTokenError is a push token spent after its expiry.
type ExpiredTokenError struct{ Expired time.Time }

func (e *ExpiredTokenError) Error() string {
	return fmt.Sprintf("this button expired at %s", e.Expired.UTC().Format("15:04 UTC"))
}

func (tx *Tx) pushTokens(write bool) (engine.Bucket, error) {
	if b := tx.bucket(bucketPushTokens); b != nil || !write {
		return b, nil
	}
	b, err := tx.tx.CreateBucketIfNotExists(bucketPushTokens)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", bucketPushTokens, err)
	}
	return b, nil
}

// PutPushToken stores t under hash (the token's SHA-256, 32 bytes).
func (tx *Tx) PutPushToken(hash []byte, t PushToken) error {
	if len(hash) != 32 || t.Draft == "" || t.User == "" || t.Expires.IsZero() {
		return errors.New("push token: a token needs its 32-byte hash, a draft, a person and an expiry")
	}
	b, err := tx.pushTokens(true)
	if err != nil {
		return err
	}
	t.V = recordVersion
	return putJSON(b, hash, t)
}

// PushToken reads the token whose hash is hash; ErrNotFound when there is
// none (never made, spent, or swept).
func (tx *Tx) PushToken(hash []byte) (PushToken, error) {
	b, _ := tx.pushTokens(false)
	if b == nil {
		return PushToken{}, ErrNotFound
	}
	var t PushToken
	if err := getJSON(b, hash, &t); err != nil {
		if errors.Is(err, ErrNotFound) {
			return PushToken{}, err
		}
		return PushToken{}, unreadableOf("push token", hash, err)
	}
	return t, nil
}

// SpendPushToken deletes the token whose hash is hash and returns what it
// allowed: ErrNotFound when it is not there (spent already), an
// *ExpiredTokenError (and the token deleted) past its expiry.
func (tx *Tx) SpendPushToken(hash []byte, now time.Time) (PushToken, error) {
	t, err := tx.PushToken(hash)
	if err != nil && !tx.Skip(err) {
		return PushToken{}, err
	}
	b, _ := tx.pushTokens(false)
	if b == nil {
		return PushToken{}, ErrNotFound
	}
	if err := b.Delete(hash); err != nil {
		return PushToken{}, err
	}
	if err != nil { // unreadable: deleted, and spent on nothing
		return PushToken{}, ErrNotFound
	}
	if !now.Before(t.Expires) {
		return PushToken{}, &ExpiredTokenError{Expired: t.Expires}
	}
	return t, nil
}

// SweepPushTokens deletes up to limit tokens expired at now (and any that
// cannot be read) in one write transaction and returns how many. The
// bucket holds the live pushes' tokens only, so the walk is short.
func (s *Store) SweepPushTokens(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *Tx) error {
		n = 0
		b, _ := tx.pushTokens(false)
		if b == nil {
			return nil
		}
		var gone [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(gone) < limit; k, v = c.Next() {
			var t PushToken
			if err := decode(v, &t); err != nil || !now.Before(t.Expires) {
				gone = append(gone, append([]byte(nil), k...))
			}
		}
		for _, k := range gone {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	return n, err
}

// PushTokensOf lists the tokens (live or expired, not yet swept) of draft
// on surface: a push retried after a partial failure skips the people
// whose push went out already.
func (tx *Tx) PushTokensOf(surface, draft string) ([]PushToken, error) {
	b, _ := tx.pushTokens(false)
	if b == nil {
		return nil, nil
	}
	var out []PushToken
	err := b.ForEach(func(k, v []byte) error {
		var t PushToken
		if err := decode(v, &t); err != nil {
			tx.skip(unreadableOf("push token", k, err), nil)
			return nil
		}
		if t.Surface == surface && t.Draft == draft {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}
