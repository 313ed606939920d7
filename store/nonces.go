package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A nonce is a one-time value a sender signs with each request (Mailgun's
// token), remembered once a request spent it so that a second request
// carrying it can be told apart. It lives in meta:
//
//	"nonce:" scope 0x00 signedAt(8) SHA-256(value) → spentNonce
//
// sorted by the signed time within its scope, so that the ones past the
// scope's tolerance (which its signature check refuses anyway) are swept
// from the front of the range by the next spend. A nonce that carries no
// signed time (Nonce.Unsigned: Telegram's update_id) is found by its value
// through
//
//	"noncev:" scope 0x00 SHA-256(value) → firstSpent(8)
//
// and its entry above is keyed by the time it was first spent, so a copy
// sent again later still finds it, and the sweep still runs from the front.
const (
	noncePrefix      = "nonce:"
	nonceValuePrefix = "noncev:"
)

// sweepNonces bounds the expired nonces one spend deletes, so that a spend
// after a long quiet spell stays a small write; the next ones finish.
const sweepNonces = 256

// spentNonce is what a spent nonce remembers: the fingerprint of the
// request that spent it.
type spentNonce struct {
	V       int    `json:"v"`
	Request []byte `json:"request"`
}

// Nonce is one nonce to spend: Scope names where it is valid (a channel),
// Value is the nonce, SignedAt the time signed with it, Keep how long
// after SignedAt a repeat is still possible (the signature's tolerance),
// and Request the fingerprint of the request spending it. Unsigned marks
// a value sent with no signed time (a resend carries the same value and
// nothing else stable): SignedAt is ignored, the nonce is found by value
// and kept Keep after it was first spent.
type Nonce struct {
	Scope    string
	Value    string
	SignedAt time.Time
	Keep     time.Duration
	Request  []byte
	Unsigned bool
}

func nonceScope(scope string) []byte {
	return []byte(noncePrefix + scope + "\x00")
}

func nonceKey(n Nonce) []byte {
	k := nonceScope(n.Scope)
	k = binary.BigEndian.AppendUint64(k, uint64(n.SignedAt.UnixNano()))
	h := sha256.Sum256([]byte(n.Value))
	return append(k, h[:]...)
}

// SpendNonce spends n at now in one write transaction: it returns nil when
// the nonce was unspent (it is recorded as spent by n.Request), else the
// fingerprint of the request that spent it first, for the caller to judge
// (the same request sent again is a retry; another one a replay). In the
// same transaction it deletes up to sweepNonces of the scope's nonces
// signed more than n.Keep before now.
func (s *Store) SpendNonce(ctx context.Context, n Nonce, now time.Time) ([]byte, error) {
	var first []byte
	err := s.update(ctx, func(tx *Tx) error {
		first = nil
		meta := tx.bucket(bucketMeta)
		key := nonceKey(n)
		var vkey []byte
		if n.Unsigned {
			vkey = nonceValueKey(n.Scope, sha256.Sum256([]byte(n.Value)))
			at := now
			if v := meta.Get(vkey); len(v) == 8 {
				at = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			}
			n.SignedAt = at
			key = nonceKey(n)
		}
		var old spentNonce
		switch err := getJSON(meta, key, &old); {
		case err == nil:
			first = old.Request
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if err := sweepNoncesTx(tx, n.Scope, now.Add(-n.Keep)); err != nil {
			return err
		}
		if vkey != nil {
			if err := meta.Put(vkey, binary.BigEndian.AppendUint64(nil, uint64(n.SignedAt.UnixNano()))); err != nil {
				return err
			}
		}
		return putJSON(meta, key, spentNonce{V: recordVersion, Request: n.Request})
	})
	if err != nil {
		return nil, fmt.Errorf("store: spend a nonce of %s: %w", n.Scope, err)
	}
	return first, nil
}

// sweepNoncesTx deletes up to sweepNonces of scope's nonces signed before
// cutoff.
func sweepNoncesTx(tx *Tx, scope string, cutoff time.Time) error {
	prefix := nonceScope(scope)
	end := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(cutoff.UnixNano()))
	meta := tx.bucket(bucketMeta)
	var old [][]byte
	c := meta.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) < 0 && len(old) < sweepNonces; k, _ = c.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		if err := meta.Delete(k); err != nil {
			return err
		}
		// An unsigned nonce's value key goes with it (a no-op for a signed one).
		var sum [sha256.Size]byte
		copy(sum[:], k[len(k)-sha256.Size:])
		if err := meta.Delete(nonceValueKey(scope, sum)); err != nil {
			return err
		}
	}
	return nil
}

func nonceValueKey(scope string, sum [sha256.Size]byte) []byte {
	return append([]byte(nonceValuePrefix+scope+"\x00"), sum[:]...)
}
