package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// Role is what a person may do.
type Role string

// The roles of the spec.
const (
	RoleAdmin    Role = "admin"
	RoleApprover Role = "approver"
)

// ErrExists is an insert of a name that is taken.
var ErrExists = errors.New("already exists")

// User is a person who logs in to the dashboard.
type User struct {
	V            int       `json:"v"`
	Name         string    `json:"name"`
	Role         Role      `json:"role"`
	PasswordHash []byte    `json:"password_hash"`   // bcrypt
	Owner        string    `json:"owner,omitempty"` // the routing owner this person works as ("mine")
	CreatedAt    time.Time `json:"created_at"`
}

// CreateUser adds u, and the audit entries given, in one transaction;
// ErrExists when the name is taken.
func (s *Store) CreateUser(ctx context.Context, u User, audit ...AuditEntry) error {
	err := s.update(ctx, func(tx *Tx) error {
		b := tx.bucket(bucketUsers)
		if b.Get([]byte(u.Name)) != nil {
			return ErrExists
		}
		u.V = recordVersion
		if err := putJSON(b, []byte(u.Name), u); err != nil {
			return err
		}
		return writeAudits(tx, audit)
	})
	if err != nil {
		return fmt.Errorf("store: create user %s: %w", u.Name, err)
	}
	return nil
}

// User returns one user.
func (s *Store) User(name string) (User, error) {
	var u User
	err := s.view(func(tx *Tx) error { return getJSON(tx.bucket(bucketUsers), []byte(name), &u) })
	if err != nil {
		return User{}, fmt.Errorf("store: user %s: %w", name, err)
	}
	return u, nil
}

// Users lists every user by name.
func (s *Store) Users() ([]User, error) {
	out := []User{}
	err := s.view(func(tx *Tx) error {
		return tx.bucket(bucketUsers).ForEach(func(k, v []byte) error {
			var u User
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("user %s: %w", k, err)
			}
			out = append(out, u)
			return nil
		})
	})
	return out, err
}

// Session is one logged-in browser, keyed by the SHA-256 of its cookie
// value: a copied database holds no usable session.
type Session struct {
	V         int       `json:"v"`
	User      string    `json:"user"`
	Role      Role      `json:"role"`
	CSRF      string    `json:"csrf"`
	From      string    `json:"from"`
	CreatedAt time.Time `json:"created_at"`
	LastSeen  time.Time `json:"last_seen"`
}

// CreateSession stores a session under the hash of its secret.
func (s *Store) CreateSession(ctx context.Context, hash []byte, sess Session) error {
	sess.V = recordVersion
	return s.update(ctx, func(tx *Tx) error { return putJSON(tx.bucket(bucketSessions), hash, sess) })
}

// Session finds a session by the hash of its secret.
func (s *Store) Session(hash []byte) (Session, error) {
	var sess Session
	err := s.view(func(tx *Tx) error { return getJSON(tx.bucket(bucketSessions), hash, &sess) })
	return sess, err
}

// TouchSession records activity, so the idle expiry moves.
func (s *Store) TouchSession(ctx context.Context, hash []byte, now time.Time) error {
	return s.update(ctx, func(tx *Tx) error {
		var sess Session
		if err := getJSON(tx.bucket(bucketSessions), hash, &sess); err != nil {
			return err
		}
		sess.LastSeen = now
		return putJSON(tx.bucket(bucketSessions), hash, sess)
	})
}

// DeleteSession ends a session (logout, expiry).
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	return s.update(ctx, func(tx *Tx) error { return tx.bucket(bucketSessions).Delete(hash) })
}

// AuditEntry is one human action: who, what, when, from where.
type AuditEntry struct {
	V      int       `json:"v"`
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	From   string    `json:"from,omitempty"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// writeAudit appends e inside the transaction of the action it describes.
func writeAudit(tx *Tx, e AuditEntry) error {
	e.V = recordVersion
	if e.ID == "" {
		e.ID = ulid.MustNew(ulid.Timestamp(e.At), ulid.DefaultEntropy()).String()
	}
	return putJSON(tx.bucket(bucketAudit), []byte(e.ID), e)
}

func writeAudits(tx *Tx, es []AuditEntry) error {
	for _, e := range es {
		if err := writeAudit(tx, e); err != nil {
			return err
		}
	}
	return nil
}

// Audit records an action that has no record of its own (a login, a token created).
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	return s.update(ctx, func(tx *Tx) error { return writeAudit(tx, e) })
}

// AuditLog lists the newest limit entries, newest first.
func (s *Store) AuditLog(limit int) ([]AuditEntry, error) {
	out := []AuditEntry{}
	err := s.view(func(tx *Tx) error {
		c := tx.bucket(bucketAudit).Cursor()
		for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
			var e AuditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("audit entry %s: %w", k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// Audit appends e inside the transaction of the action it describes.
func (tx *Tx) Audit(e AuditEntry) error { return writeAudit(tx, e) }
