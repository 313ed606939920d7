package store

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"
)

// The first admin is made in the browser through a one-time setup link:
// meta "setup" holds the SHA-256 of the link's secret and when it expires,
// never the secret itself.
var keySetup = []byte("setup")

// ErrSetupUsed refuses a setup link that was used, replaced or has expired,
// or any link once a person exists.
var ErrSetupUsed = errors.New("this setup link was already used or has expired; restart handoff with no users for a new one, or use \"handoff user add\"")

// setupLink is the stored half of a setup link.
type setupLink struct {
	V         int       `json:"v"`
	Hash      []byte    `json:"hash"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CreateSetupLink stores the hash of a new setup link's secret, replacing
// any earlier link, while the database has no users: false when it has
// some, and nothing is stored.
func (s *Store) CreateSetupLink(ctx context.Context, hash []byte, expires time.Time) (bool, error) {
	var made bool
	err := s.update(ctx, func(tx *Tx) error {
		made = false
		if k, _ := tx.bucket(bucketUsers).Cursor().First(); k != nil {
			return nil
		}
		made = true
		return putJSON(tx.bucket(bucketMeta), keySetup, setupLink{V: recordVersion, Hash: hash, ExpiresAt: expires})
	})
	if err != nil {
		return false, fmt.Errorf("store: create the setup link: %w", err)
	}
	return made, nil
}

// SetupLinkValid reports whether hash is the live setup link at now (for
// showing its form; UseSetupLink decides).
func (s *Store) SetupLinkValid(hash []byte, now time.Time) bool {
	return s.view(func(tx *Tx) error { return checkSetup(tx, hash, now) }) == nil
}

// UseSetupLink creates the first admin u with the setup link whose secret
// hashes to hash, and deletes the link, in one transaction with the audit
// entries given: a link works once, before it expires, and only while
// there are no users. ErrSetupUsed otherwise.
func (s *Store) UseSetupLink(ctx context.Context, hash []byte, now time.Time, u User, audit ...AuditEntry) error {
	if u.ID == "" {
		u.ID = NewUserID()
	}
	err := s.update(ctx, func(tx *Tx) error {
		if err := checkSetup(tx, hash, now); err != nil {
			return err
		}
		if err := tx.bucket(bucketMeta).Delete(keySetup); err != nil {
			return err
		}
		return createUser(tx, u, audit)
	})
	if err != nil {
		return fmt.Errorf("store: use the setup link: %w", err)
	}
	return nil
}

func checkSetup(tx *Tx, hash []byte, now time.Time) error {
	var l setupLink
	if err := getJSON(tx.bucket(bucketMeta), keySetup, &l); err != nil {
		if errors.Is(err, ErrNotFound) {
			return ErrSetupUsed
		}
		return err
	}
	if subtle.ConstantTimeCompare(l.Hash, hash) != 1 || !now.Before(l.ExpiresAt) {
		return ErrSetupUsed
	}
	if k, _ := tx.bucket(bucketUsers).Cursor().First(); k != nil {
		return ErrSetupUsed
	}
	return nil
}
