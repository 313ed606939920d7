package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// ErrDisabled is a login, session or token of a disabled user.
var ErrDisabled = errors.New("the account is disabled")

// Session lifetimes: an idle session ends after SessionIdle, any session
// after SessionMax, and a session waiting for its second factor after
// SessionPending. The dashboard refuses an expired session at once; the
// periodic sweep (SweepSessions) deletes it.
const (
	SessionIdle    = 12 * time.Hour
	SessionMax     = 7 * 24 * time.Hour
	SessionPending = 5 * time.Minute
)

// User is a person who logs in to the dashboard.
type User struct {
	V    int    `json:"v"`
	Name string `json:"name"`
	// ID is minted when the person is created and never reused: a token
	// belongs to it (Token.UserID), so a new person given a removed one's
	// name gets none of their tokens. Migration 8 gave every person
	// created before it one.
	ID           string `json:"id,omitempty"`
	Role         Role   `json:"role"`
	PasswordHash []byte `json:"password_hash"`   // bcrypt
	Owner        string `json:"owner,omitempty"` // the routing owner this person works as ("mine")
	// Email is the person's address, optional: an approval surface maps a
	// person it sees (a Slack member's profile, a mail's sender) to this
	// account by it.
	Email     string    `json:"email,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Clients limits an approver to the channels of these clients (ids of
	// config clients); empty: every client. Admins see every client.
	Clients []string `json:"clients,omitempty"`
	// Disabled users cannot log in; their sessions were deleted when they
	// were disabled and their tokens are refused (ActiveUser).
	Disabled bool `json:"disabled,omitempty"`
	// TOTP is the second factor, once enrolled; PendingTOTP is a secret
	// offered for enrolment and not yet confirmed with a code.
	TOTP        *TOTP  `json:"totp,omitempty"`
	PendingTOTP string `json:"pending_totp,omitempty"`
}

// TOTP is a person's second factor. The secret is shown once, at
// enrolment, and never rendered again.
type TOTP struct {
	Secret     string    `json:"secret"`    // base32, as in the otpauth URI
	LastStep   int64     `json:"last_step"` // the newest 30-second step a code was accepted for: no code works twice
	Recovery   [][]byte  `json:"recovery"`  // SHA-256 of each unused recovery code
	EnrolledAt time.Time `json:"enrolled_at"`
	// Failures counts wrong codes in a row, the last at FailedAt: the
	// dashboard stops taking codes for a while after a few.
	Failures int       `json:"failures,omitempty"`
	FailedAt time.Time `json:"failed_at,omitzero"`
}

// CreateUser adds u, and the audit entries given, in one transaction;
// ErrExists when the name is taken. A u without an ID gets a new one.
func (s *Store) CreateUser(ctx context.Context, u User, audit ...AuditEntry) error {
	if u.ID == "" {
		u.ID = NewUserID()
	}
	err := s.update(ctx, func(tx *Tx) error { return createUser(tx, u, audit) })
	if err != nil {
		return fmt.Errorf("store: create user %s: %w", u.Name, err)
	}
	return nil
}

// CreateFirstUser creates u only while the store has no user at all, in
// one transaction with the check: made is false when someone was there
// first.
func (s *Store) CreateFirstUser(ctx context.Context, u User, audit ...AuditEntry) (made bool, err error) {
	if u.ID == "" {
		u.ID = NewUserID()
	}
	err = s.update(ctx, func(tx *Tx) error {
		made = false
		if k, _ := tx.bucket(bucketUsers).Cursor().First(); k != nil {
			return nil
		}
		made = true
		return createUser(tx, u, audit)
	})
	if err != nil {
		return false, fmt.Errorf("store: create first user %s: %w", u.Name, err)
	}
	return made, nil
}

// NewUserID mints a person's ID (a ULID).
func NewUserID() string { return ulid.Make().String() }

func createUser(tx *Tx, u User, audit []AuditEntry) error {
	if u.ID == "" {
		// Tokens are bound to it: a person without one would share the
		// empty ID with every other such person.
		return fmt.Errorf("create user %s: a person needs an ID (NewUserID)", u.Name)
	}
	b := tx.bucket(bucketUsers)
	if b.Get([]byte(u.Name)) != nil {
		return ErrExists
	}
	u.V = recordVersion
	if err := putJSON(b, []byte(u.Name), u); err != nil {
		return err
	}
	return writeAudits(tx, audit)
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

// ActiveUser returns a user who may act now: ErrNotFound for a name that
// is not (or no longer) a user, ErrDisabled for a disabled one. A bearer
// token's owner is checked with it on every request, so removing or
// disabling a person stops their tokens at once.
func (s *Store) ActiveUser(name string) (User, error) {
	u, err := s.User(name)
	if err != nil {
		return User{}, err
	}
	if u.Disabled {
		return User{}, fmt.Errorf("store: user %s: %w", name, ErrDisabled)
	}
	return u, nil
}

// Users lists every user by name.
func (s *Store) Users() ([]User, error) {
	out := []User{}
	err := s.view(func(tx *Tx) error {
		return tx.bucket(bucketUsers).ForEach(func(k, v []byte) error {
			var u User
			if err := decode(v, &u); err != nil {
				// Stepped over, and known to the store (the overview's
				// banner, handoff_unreadable_records): one bad record
				// never takes the page of the others down.
				tx.skip(unreadableOf("user", k, err), nil)
				return nil
			}
			out = append(out, u)
			return nil
		})
	})
	return out, err
}

// User reads one person inside the transaction, a copy the caller may
// change (its second factor included); ErrNotFound when there is none.
func (tx *Tx) User(name string) (User, error) {
	var u User
	if err := getJSON(tx.bucket(bucketUsers), []byte(name), &u); err != nil {
		return User{}, err
	}
	u.TOTP = cloneTOTP(u.TOTP)
	return u, nil
}

// PutUser stores u over the person of its name, who must exist; the ID
// stays the one stored, since tokens are bound to it.
func (tx *Tx) PutUser(u User) error {
	b := tx.bucket(bucketUsers)
	var before User
	if err := getJSON(b, []byte(u.Name), &before); err != nil {
		return err
	}
	u.ID, u.V = before.ID, recordVersion
	return putJSON(b, []byte(u.Name), u)
}

// DeleteUser deletes the person's record (only: their sessions and tokens
// are the caller's, in the same transaction); ErrNotFound when absent.
func (tx *Tx) DeleteUser(name string) error {
	b := tx.bucket(bucketUsers)
	if b.Get([]byte(name)) == nil {
		return ErrNotFound
	}
	return b.Delete([]byte(name))
}

// Users lists every person inside the transaction, by name; a record that
// cannot be read is an error here, since the rules that read every person
// (the last enabled admin) must not decide on a partial list.
func (tx *Tx) Users() ([]User, error) {
	var out []User
	err := tx.bucket(bucketUsers).ForEach(func(k, v []byte) error {
		var u User
		if err := decode(v, &u); err != nil {
			return fmt.Errorf("user %s: %w", k, err)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

func cloneTOTP(t *TOTP) *TOTP {
	if t == nil {
		return nil
	}
	c := *t
	c.Recovery = slices.Clone(t.Recovery)
	return &c
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
	// Pending is a session whose password was right and whose second
	// factor is still to come: it opens nothing but the code form, for
	// SessionPending, and Attempts counts the codes tried there.
	Pending  bool `json:"pending,omitempty"`
	Attempts int  `json:"attempts,omitempty"`
	// SteppedUpAt is when the person last gave their password (and code)
	// again on this session, for the actions that cannot be undone
	// (users/stepup.go); zero: never.
	SteppedUpAt time.Time `json:"stepped_up_at,omitzero"`
}

// Expired reports whether the session has ended at now: idle too long,
// too old, or a second factor not given in time.
func (sess Session) Expired(now time.Time) bool {
	if sess.Pending {
		return now.Sub(sess.CreatedAt) > SessionPending
	}
	return now.Sub(sess.LastSeen) > SessionIdle || now.Sub(sess.CreatedAt) > SessionMax
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

// SessionUser finds a session and its user in one read, so a session
// never outlives its user's removal or disabling: ErrNotFound when either
// is gone, ErrDisabled when the user is disabled.
func (s *Store) SessionUser(hash []byte) (Session, User, error) {
	var (
		sess Session
		u    User
	)
	err := s.view(func(tx *Tx) error {
		if err := getJSON(tx.bucket(bucketSessions), hash, &sess); err != nil {
			return err
		}
		if err := getJSON(tx.bucket(bucketUsers), []byte(sess.User), &u); err != nil {
			return err
		}
		if u.Disabled {
			return ErrDisabled
		}
		return nil
	})
	if err != nil {
		return Session{}, User{}, err
	}
	return sess, u, nil
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

// EndSessions deletes every session of user except the one whose hash is
// except (nil: all of them) and says how many ended. Sessions are few (one
// per browser), so it reads them all rather than keep an index.
func (tx *Tx) EndSessions(user string, except []byte) (int, error) {
	var doomed [][]byte
	err := tx.bucket(bucketSessions).ForEach(func(k, v []byte) error {
		var sess Session
		if err := json.Unmarshal(v, &sess); err != nil {
			return fmt.Errorf("session: %w", err)
		}
		if sess.User == user && !bytes.Equal(k, except) {
			doomed = append(doomed, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	b := tx.bucket(bucketSessions)
	for _, k := range doomed {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// SweepSessions deletes every session that has expired at now (and any
// left by a user since removed), and says how many.
func (s *Store) SweepSessions(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.update(ctx, func(tx *Tx) error {
		n = 0
		users := tx.bucket(bucketUsers)
		var doomed [][]byte
		err := tx.bucket(bucketSessions).ForEach(func(k, v []byte) error {
			var sess Session
			if json.Unmarshal(v, &sess) != nil || sess.Expired(now) || users.Get([]byte(sess.User)) == nil {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := tx.bucket(bucketSessions).Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: sweep sessions: %w", err)
	}
	return n, nil
}

// UpdateSession runs change on one session and its user inside a write
// transaction, with the audit entries given, then stores both again, or
// deletes the session when change says not to keep it. It serves the
// second factor of a login (a code used, a pending session made whole);
// the user's role and state are not change's to alter (package users
// changes those). ErrNotFound when the session or user is gone,
// ErrDisabled for a disabled user.
func (s *Store) UpdateSession(ctx context.Context, hash []byte, change func(sess *Session, u *User) (keep bool, err error), audit ...AuditEntry) error {
	return s.update(ctx, func(tx *Tx) error {
		var (
			sess Session
			u    User
		)
		if err := getJSON(tx.bucket(bucketSessions), hash, &sess); err != nil {
			return err
		}
		if err := getJSON(tx.bucket(bucketUsers), []byte(sess.User), &u); err != nil {
			return err
		}
		if u.Disabled {
			return ErrDisabled
		}
		id, role, disabled := u.ID, u.Role, u.Disabled
		keep, err := change(&sess, &u)
		if err != nil {
			return err
		}
		u.Name, u.ID, u.Role, u.Disabled, u.V = sess.User, id, role, disabled, recordVersion
		if err := putJSON(tx.bucket(bucketUsers), []byte(u.Name), u); err != nil {
			return err
		}
		if keep {
			sess.V = recordVersion
			err = putJSON(tx.bucket(bucketSessions), hash, sess)
		} else {
			err = tx.bucket(bucketSessions).Delete(hash)
		}
		if err != nil {
			return err
		}
		return writeAudits(tx, audit)
	})
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
			if err := decode(v, &e); err != nil {
				tx.skip(unreadableOf("audit entry", k, err), nil) // as Users does
				continue
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// Audit appends e inside the transaction of the action it describes.
func (tx *Tx) Audit(e AuditEntry) error { return writeAudit(tx, e) }

// SessionCount counts the sessions of user, leaving out the one whose hash
// is except.
func (s *Store) SessionCount(user string, except []byte) (int, error) {
	n := 0
	err := s.view(func(tx *Tx) error {
		return tx.bucket(bucketSessions).ForEach(func(k, v []byte) error {
			var sess Session
			if err := json.Unmarshal(v, &sess); err != nil {
				return fmt.Errorf("session: %w", err)
			}
			if sess.User == user && !sess.Pending && !bytes.Equal(k, except) {
				n++
			}
			return nil
		})
	})
	return n, err
}
