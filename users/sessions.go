package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"time"

	"github.com/handoff/handoff/store"
)

// Session lifetimes: an idle session ends after SessionIdle, any session
// after SessionMax, a pending one (its second factor still to come) after
// store.SessionPending.
const (
	SessionIdle = store.SessionIdle
	SessionMax  = store.SessionMax
	// touchEvery is how often at most a session's LastSeen is written.
	touchEvery = time.Minute
)

// ErrNoSession is a session secret that opens nothing now: unknown,
// ended, expired, still waiting for its second factor, or its person
// disabled or removed.
var ErrNoSession = errors.New("no session")

// NewSecret returns 32 random bytes, URL-safe: the secret of a session,
// a token or a setup link, shown or set once.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashSecret is what the store keeps of a secret, and looks it up by:
// its SHA-256, so a copied database holds no usable session or token.
func HashSecret(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// CodeNeeded is a right password of a person with a second factor: the
// session it started is pending until LoginCode makes it whole. Secret
// is the pending session's, for its cookie.
type CodeNeeded struct{ Secret string }

func (e *CodeNeeded) Error() string { return "the second factor is needed" }

// StartSession starts a session for u from the address from, whose
// password was just proven (Login, or the setup link that created u), and
// audits the login with detail. It returns the session's secret; a person
// with a second factor gets a pending session instead, and a *CodeNeeded
// that carries its secret.
func (a *Accounts) StartSession(ctx context.Context, u store.User, from string, now time.Time, detail string) (string, error) {
	secret := NewSecret()
	sess := store.Session{User: u.Name, Role: u.Role, CSRF: NewSecret(), From: from, CreatedAt: now, LastSeen: now, Pending: u.TOTP != nil}
	if err := a.st.CreateSession(ctx, HashSecret(secret), sess); err != nil {
		return "", err
	}
	if sess.Pending {
		return "", &CodeNeeded{Secret: secret}
	}
	_ = a.st.Audit(ctx, store.AuditEntry{At: now, Who: u.Name, From: from, Action: "login", Detail: detail})
	return secret, nil
}

// Session finds the whole session of secret at now and its person, read
// in one transaction, so not a request after a disabling or a removal
// gets through; hash is the session's key. An expired session is ended
// here; a live one's LastSeen moves (at most once a minute). ErrNoSession
// when it opens nothing.
func (a *Accounts) Session(ctx context.Context, secret string, now time.Time) (sess store.Session, u store.User, hash []byte, err error) {
	if secret == "" {
		return store.Session{}, store.User{}, nil, ErrNoSession
	}
	hash = HashSecret(secret)
	sess, u, err = a.st.SessionUser(hash)
	if err != nil || sess.Pending {
		return store.Session{}, store.User{}, nil, ErrNoSession
	}
	if sess.Expired(now) {
		_ = a.st.DeleteSession(ctx, hash)
		return store.Session{}, store.User{}, nil, ErrNoSession
	}
	if now.Sub(sess.LastSeen) > touchEvery {
		_ = a.st.TouchSession(ctx, hash, now)
	}
	return sess, u, hash, nil
}

// PendingSession is the key of secret's session when it is pending (its
// second factor still to come) and has not expired at now.
func (a *Accounts) PendingSession(secret string, now time.Time) ([]byte, bool) {
	if secret == "" {
		return nil, false
	}
	hash := HashSecret(secret)
	sess, _, err := a.st.SessionUser(hash)
	if err != nil || !sess.Pending || sess.Expired(now) {
		return nil, false
	}
	return hash, true
}

// Logout ends the session whose key is hash (nil: none, a token's
// request) and audits it.
func (a *Accounts) Logout(ctx context.Context, name string, hash []byte, from string, now time.Time) error {
	if hash != nil {
		if err := a.st.DeleteSession(ctx, hash); err != nil {
			return err
		}
	}
	_ = a.st.Audit(ctx, store.AuditEntry{At: now, Who: name, From: from, Action: "logout"})
	return nil
}

// EndOtherSessions ends every session of the person but keep's, with the
// audit entry, and says how many ended.
func (a *Accounts) EndOtherSessions(ctx context.Context, name string, keep []byte, audit store.AuditEntry) (int, error) {
	var n int
	err := a.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		if n, err = endSessions(tx, name, keep); err != nil {
			return err
		}
		return writeAudit(tx, audit)
	})
	return n, err
}

// endSessions ends every session of the person but keep's (nil: every
// one), inside a change's transaction. It is the one place of the rule
// that a reset of a password or a second factor, a disabling and a
// removal end the person's sessions, and a change of one's own password
// ends the others.
func endSessions(tx *store.Tx, name string, keep []byte) (int, error) {
	return tx.EndSessions(name, keep)
}
