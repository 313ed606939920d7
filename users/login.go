package users

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// ErrLoginFailed refuses a login and never says which part was wrong.
var ErrLoginFailed = errors.New("the name or password is wrong")

// ErrAccountDisabled refuses the login of a disabled person; it is said
// only to someone who knows the password.
var ErrAccountDisabled = errors.New("this account is disabled; ask an admin to enable it")

// Wrong codes: a pending session takes MaxCodeTries, and a person's
// codes stop being taken for codeLockout after maxCodeFailures wrong ones
// in a row, over any number of logins and step-ups, so knowing the
// password does not buy unlimited guesses at six digits.
const (
	MaxCodeTries    = 5
	maxCodeFailures = 10
	codeLockout     = 15 * time.Minute
)

// The refusals of a second factor's code at login. ErrCodeWrong leaves
// the pending session for another try; the others have ended it.
var (
	ErrCodeWrong   = errors.New("that code is wrong; enter the current code from your authenticator, or a recovery code")
	ErrCodeTries   = errors.New("too many wrong codes; log in again")
	ErrCodeLocked  = errors.New("too many wrong codes for this account; wait 15 minutes and try again")
	ErrCodeExpired = errors.New("the login took too long or was already used; log in again")
)

// CodeRefused is a second factor's code at login that was not taken: Err
// is one of the ErrCode sentences, or why the secret could not be read.
type CodeRefused struct{ Err error }

func (e *CodeRefused) Error() string { return e.Err.Error() }
func (e *CodeRefused) Unwrap() error { return e.Err }

// Login checks a name and password from the address from at now and
// starts a session, returning its secret. Every attempt is counted
// against the limits (Guard) before the comparison, so parallel guesses
// cannot all pass; a success takes its own count back. A person with a
// second factor gets a pending session instead, and a *CodeNeeded that
// carries its secret. Refusals: *TooMany, ErrLoginFailed (audited, within
// the guard's budget), ErrAccountDisabled (audited).
func (a *Accounts) Login(ctx context.Context, name, pw, from string, now time.Time) (string, error) {
	addr := AddrKey(from)
	if retry, ok := a.logins.Reserve(name, addr, now); !ok {
		return "", &TooMany{Why: "too many failed logins", Retry: retry}
	}
	// A name that is not a user is checked against no hash, which costs
	// as much as a real one, so timing does not tell which names exist.
	u, err := a.st.User(name)
	var hash []byte
	if err == nil {
		hash = u.PasswordHash
	}
	if !password.Check(hash, pw) || err != nil {
		who := name
		if err != nil {
			// Not a user: maybe a password typed into the name field. Keep
			// only a fingerprint of it, never the text.
			who = fmt.Sprintf("unknown name (sha256 %x…)", HashSecret(name)[:4])
		}
		a.auditLoginFailed(ctx, now, name, from, who)
		return "", ErrLoginFailed
	}
	a.logins.Release(name, addr, now)
	if u.Disabled {
		_ = a.st.Audit(ctx, store.AuditEntry{At: now, Who: u.Name, From: from, Action: "login refused", Detail: "the account is disabled"})
		return "", ErrAccountDisabled
	}
	return a.StartSession(ctx, u, from, now, "")
}

// auditLoginFailed writes the audit entry about a failed login, when it
// gets one (Guard.auditFailure): one per name and address per
// LoginWindow, saying how many failures came since the pair's last entry.
func (a *Accounts) auditLoginFailed(ctx context.Context, now time.Time, name, from, who string) {
	write, more, last := a.logins.auditFailure(name, AddrKey(from), now)
	if !write {
		return
	}
	detail := fmt.Sprintf("further failures of this name from this address in the next %s are counted in its next entry, not each written", LoginWindow)
	if more > 0 {
		detail = fmt.Sprintf("%d more failed since the last entry about this name and address; ", more) + detail
	}
	if last {
		detail += fmt.Sprintf("; this is the %dth entry about failed logins in %s, so no more are written until it ends", AuditPerWindow, LoginWindow)
	}
	_ = a.st.Audit(ctx, store.AuditEntry{At: now, Who: who, From: from, Action: "login failed", Detail: detail})
}

// LoginCode takes the second factor's code for the pending session whose
// key is hash: the current TOTP code, not used before, or an unused
// recovery code, makes it a whole session, and the code is spent in the
// same transaction; wrong codes are counted there too, and every try is
// audited. Refusals are a *CodeRefused: ErrCodeWrong (or, when the
// secret cannot be read, a sentence saying a recovery code still works)
// keeps the pending session; ErrCodeTries, ErrCodeLocked and
// ErrCodeExpired have ended it.
func (a *Accounts) LoginCode(ctx context.Context, hash []byte, code, from string, now time.Time) error {
	var failure error
	var user, how string
	err := a.st.UpdateSession(ctx, hash, func(sess *store.Session, u *store.User) (bool, error) {
		failure, user, how = nil, u.Name, ""
		if !sess.Pending || sess.Expired(now) || u.TOTP == nil {
			failure = ErrCodeExpired
			return false, nil
		}
		ok, what, err := a.spendCode(u, code, now)
		switch {
		case errors.Is(err, ErrCodeLocked):
			failure = ErrCodeLocked
			return false, nil
		case !ok:
			sess.Attempts++
			failure = ErrCodeWrong
			if err != nil {
				// The secret cannot be read here: say so, and that a
				// recovery code still works.
				failure = errors.New(err.Error() + "; a recovery code still logs you in")
			}
			if sess.Attempts >= MaxCodeTries {
				failure = ErrCodeTries
				return false, nil
			}
			return true, nil
		}
		how = what
		sess.Pending, sess.CreatedAt, sess.LastSeen, sess.Attempts = false, now, now, 0
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDisabled) {
		failure, err = ErrCodeExpired, nil
	}
	if err != nil {
		return err
	}
	if failure != nil {
		_ = a.st.Audit(ctx, store.AuditEntry{At: now, Who: user, From: from, Action: "login failed", Detail: "second factor: " + failure.Error()})
		return &CodeRefused{failure}
	}
	_ = a.st.Audit(ctx, store.AuditEntry{At: now, Who: user, From: from, Action: "login", Detail: "with " + how})
	return nil
}

// spendCode checks code against u's second factor inside the caller's
// write: an authenticator code newer than the last one taken, or an unused
// recovery code, which it spends; a wrong one counts towards the lockout.
// what names the kind of code taken. It also seals a secret stored plain,
// when the server has a key (the "next write" of sealing). A secret this
// server cannot open (sealed, and no key or another key) leaves the
// recovery codes working, and err says why the code was not checked.
func (a *Accounts) spendCode(u *store.User, code string, now time.Time) (ok bool, what string, err error) {
	t := u.TOTP
	if t.Failures >= maxCodeFailures && now.Sub(t.FailedAt) < codeLockout {
		return false, "", ErrCodeLocked
	}
	sealer := a.opts.Sealer
	secret, openErr := sealer.Open(t.Secret, u.Name)
	if openErr == nil {
		t.Secret = sealer.Seal(secret, u.Name)
		if step, ok := password.CheckTOTP(secret, strings.TrimSpace(code), now, t.LastStep); ok {
			t.LastStep, t.Failures = step, 0
			return true, "authenticator code", nil
		}
	}
	if rest, ok := password.UseRecovery(t.Recovery, strings.TrimSpace(code)); ok {
		t.Recovery, t.Failures = rest, 0
		return true, "recovery code (" + strconv.Itoa(len(rest)) + " left)", nil
	}
	t.Failures, t.FailedAt = t.Failures+1, now
	return false, "", openErr
}
