package users

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// Step-up: what cannot be undone (a restore, an erase, an export handed
// out, a token made, a second factor enrolled or removed, a password
// changed) asks a session for its person's password again, and their
// second factor's code when they have one, so a stolen session cookie is
// not enough for it. A step-up is kept on the server-side session
// (store.Session.SteppedUpAt) and covers such actions for StepUpFor.
// A login is not one: the cookie of a session just started could be the
// stolen one as well.
const StepUpFor = 5 * time.Minute

// ErrStepUpCode refuses a step-up of a person with a second factor whose
// code was missing or wrong.
var ErrStepUpCode = errors.New("this account has a second factor: enter the current code from your authenticator (or a recovery code) with the password")

// StepUpRefused is a step-up whose password was right and whose code was
// not taken: Err is ErrStepUpCode, ErrCodeLocked, or why the second
// factor's secret could not be read.
type StepUpRefused struct{ Err error }

func (e *StepUpRefused) Error() string { return e.Err.Error() }
func (e *StepUpRefused) Unwrap() error { return e.Err }

// SteppedUp reports whether sess stepped up within StepUpFor of now.
func SteppedUp(sess *store.Session, now time.Time) bool {
	at := sess.SteppedUpAt
	return !at.IsZero() && now.Sub(at) < StepUpFor
}

// StepUp checks pw and, for a person with a second factor, code (an
// authenticator code newer than the last one taken, or an unused recovery
// code), and records the step-up at now on the session whose key is hash;
// every try is audited. Guesses count against the login's limits (the
// same name and address), so a stolen session cannot try passwords here
// any faster than at a login, and wrong codes count towards the account's
// code lockout. Refusals: *TooMany, ErrWrongPassword, a *Conflict (the
// password changed meanwhile), a *StepUpRefused, and store.ErrNotFound or
// store.ErrDisabled when the session has ended.
func (a *Accounts) StepUp(ctx context.Context, name string, hash []byte, pw, code, from string, now time.Time) error {
	addr := AddrKey(from)
	if retry, ok := a.logins.Reserve(name, addr, now); !ok {
		return &TooMany{Why: "too many wrong passwords", Retry: retry}
	}
	u, err := a.st.User(name)
	if err != nil {
		return err
	}
	if !password.Check(u.PasswordHash, pw) {
		_ = a.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: name, From: from, Action: "step-up failed", Detail: "wrong password"})
		return ErrWrongPassword
	}
	a.logins.Release(name, addr, now)
	checked := u.PasswordHash
	var failure error
	how := "password"
	err = a.st.UpdateSession(ctx, hash, func(sess *store.Session, u *store.User) (bool, error) {
		failure, how = nil, "password"
		if !bytes.Equal(u.PasswordHash, checked) {
			return true, conflict("the password changed meanwhile; reload the page and try again")
		}
		if t := u.TOTP; t != nil {
			switch ok, what, err := a.spendCode(u, code, now.UTC()); {
			case err != nil:
				failure = err
				return true, nil
			case !ok:
				failure = ErrStepUpCode
				return true, nil
			default:
				how += " and " + what
			}
		}
		sess.SteppedUpAt = now.UTC()
		return true, nil
	})
	if err != nil {
		return err
	}
	if failure != nil {
		_ = a.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: name, From: from, Action: "step-up failed", Detail: failure.Error()})
		return &StepUpRefused{failure}
	}
	_ = a.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: name, From: from, Action: "step-up", Detail: "with " + how})
	return nil
}
