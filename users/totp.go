package users

import (
	"context"
	"errors"
	"time"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// Issuer names handoff in authenticator apps.
const Issuer = "handoff"

// StartTOTP keeps a new secret as the person's pending one and returns it
// with its otpauth URI, to be shown this once.
func (a *Accounts) StartTOTP(ctx context.Context, name string, audit store.AuditEntry) (secret, uri string, err error) {
	secret, uri, err = password.NewTOTP(Issuer, name)
	if err != nil {
		return "", "", err
	}
	_, err = a.update(ctx, name, func(_ *store.Tx, u *store.User) error {
		if u.TOTP != nil {
			return conflict("a second factor is already on; turn it off first to enrol another")
		}
		u.PendingTOTP = a.opts.Sealer.Seal(secret, u.Name)
		return nil
	}, &audit)
	if err != nil {
		return "", "", err
	}
	return secret, uri, nil
}

// ConfirmTOTP turns the second factor on when code is right for the
// pending secret at now, and returns the recovery codes, to be shown once.
func (a *Accounts) ConfirmTOTP(ctx context.Context, name, code string, now time.Time, audit store.AuditEntry) ([]string, error) {
	codes, hashes := password.RecoveryCodes()
	_, err := a.update(ctx, name, func(_ *store.Tx, u *store.User) error {
		if u.PendingTOTP == "" {
			return conflict("no enrolment is under way; start it again")
		}
		secret, err := a.opts.Sealer.Open(u.PendingTOTP, u.Name)
		if err != nil {
			return &Conflict{errors.New(err.Error() + "; start the enrolment again")}
		}
		step, ok := password.CheckTOTP(secret, code, now, 0)
		if !ok {
			return invalid("that code is not the one the authenticator shows now; start the enrolment again if the secret was not added")
		}
		u.TOTP = &store.TOTP{Secret: a.opts.Sealer.Seal(secret, u.Name), LastStep: step, Recovery: hashes, EnrolledAt: now}
		u.PendingTOTP = ""
		return nil
	}, &audit)
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// RemoveOwnTOTP turns the person's second factor off after their current
// password; an admin keeps theirs where the configuration requires one.
func (a *Accounts) RemoveOwnTOTP(ctx context.Context, name, current string, audit store.AuditEntry) error {
	checked, err := a.CheckPassword(name, current)
	if err != nil {
		return err
	}
	_, err = a.update(ctx, name, func(_ *store.Tx, u *store.User) error {
		if err := samePassword(u, checked); err != nil {
			return err
		}
		if a.opts.RequireTOTPForAdmins && u.Role == store.RoleAdmin {
			return conflict("admins must keep a second factor here (auth.require_totp_for_admins); if it is lost, another admin can reset it")
		}
		u.TOTP, u.PendingTOTP = nil, ""
		return nil
	}, &audit)
	return err
}

// ResetTOTP is an admin turning a lost second factor off, so the person
// can log in with the password and enrol again; every session of theirs
// ends with it.
func (a *Accounts) ResetTOTP(ctx context.Context, name string, audit store.AuditEntry) error {
	return a.reset(ctx, name, func(u *store.User) error {
		u.TOTP, u.PendingTOTP = nil, ""
		return nil
	}, audit)
}
