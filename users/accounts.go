package users

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// Accounts runs the account changes on one store.
type Accounts struct {
	st   *store.Store
	opts Options
	// logins limits guesses at passwords (Login, a step-up, any other
	// secret a caller checks under them: Logins); bearerFails refused
	// bearer tokens per address, and bearerAudit the audit entries about
	// them over all addresses. They live in memory, for the process.
	logins      *Guard
	bearerFails *limiter
	bearerAudit *auditBudget
	apiToken    []byte // the hash of Options.APIToken; nil: none
}

// Options are what the configuration says of accounts.
type Options struct {
	// Sealer seals second-factor secrets at rest (nil: kept as they are).
	Sealer *password.Sealer
	// Words are refused as a password's base besides the product's own
	// and the person's: the clients' ids and names.
	Words []string
	// CheckClients refuses, in a sentence, a list of clients no client
	// has (the config's check; CheckClientIDs without one).
	CheckClients func(ids []string) error
	// RequireTOTPForAdmins keeps an admin's second factor on
	// (auth.require_totp_for_admins).
	RequireTOTPForAdmins bool
	// APIToken is the HANDOFF_API_TOKEN: a bearer token that acts as an
	// admin with no person behind it ("" : none).
	APIToken string
}

// New returns the account rules over st.
func New(st *store.Store, o Options) *Accounts {
	if o.CheckClients == nil {
		o.CheckClients = CheckClientIDs
	}
	a := &Accounts{st: st, opts: o, logins: NewGuard(), bearerFails: newLimiter(BearerPerAddr, BearerWindow),
		bearerAudit: &auditBudget{max: AuditPerWindow, window: BearerWindow}}
	if o.APIToken != "" {
		a.apiToken = HashSecret(o.APIToken)
	}
	return a
}

// Logins is the guard of guesses at passwords, for a secret checked
// elsewhere under the same limits and for the admins' unlock panel.
func (a *Accounts) Logins() *Guard { return a.logins }

// Rule is the rule a new password of a person meets: zxcvbn's score for
// their role, and none built on the product's name, the clients' words or
// the person's own name, owner and clients.
func (a *Accounts) Rule(admin bool, name, owner string, clients ...string) password.Rule {
	words := append([]string{name, owner}, clients...)
	return password.RuleFor(admin, append(words, a.opts.Words...)...)
}

// MustEnrol reports whether u must enrol a second factor before using the
// dashboard.
func (a *Accounts) MustEnrol(u store.User) bool {
	return a.opts.RequireTOTPForAdmins && u.Role == store.RoleAdmin && u.TOTP == nil
}

// update changes one person in one write transaction: change, then the
// rules every change keeps (the last enabled admin stays one; a person
// disabled now has every session ended), then the audit entry.
// The audit entry is read after change, which may complete it.
func (a *Accounts) update(ctx context.Context, name string, change func(tx *store.Tx, u *store.User) error, audit *store.AuditEntry) (store.User, error) {
	var out store.User
	err := a.st.Update(ctx, func(tx *store.Tx) error {
		u, err := tx.User(name) // a copy of its own, second factor included
		if err != nil {
			return err
		}
		wasAdmin, wasDisabled := enabledAdmin(u), u.Disabled
		if err := change(tx, &u); err != nil {
			return err
		}
		if wasAdmin && !enabledAdmin(u) {
			if err := keepAnAdmin(tx, name); err != nil {
				return err
			}
		}
		after := u
		if after.Disabled && !wasDisabled {
			if _, err := endSessions(tx, name, nil); err != nil {
				return err
			}
		}
		if err := tx.PutUser(after); err != nil {
			return err
		}
		out = after
		return writeAudit(tx, *audit)
	})
	if err != nil {
		return store.User{}, fmt.Errorf("user %s: %w", name, err)
	}
	return out, nil
}

// reset is an admin's reset of a person's password or second factor:
// update, and every session of theirs ends with it, so whoever held the
// old one is logged out.
func (a *Accounts) reset(ctx context.Context, name string, change func(u *store.User) error, audit store.AuditEntry) error {
	_, err := a.update(ctx, name, func(tx *store.Tx, u *store.User) error {
		if err := change(u); err != nil {
			return err
		}
		_, err := endSessions(tx, u.Name, nil)
		return err
	}, &audit)
	return err
}

// Person is a new account as typed.
type Person struct {
	Name    string
	Role    store.Role
	Owner   string
	Clients []string
	// Password is the one chosen; empty, one is generated.
	Password string
}

// Add creates the person with the audit entry, in one transaction. It
// returns the password it generated, if it did, to be shown once.
func (a *Accounts) Add(ctx context.Context, p Person, now time.Time, audit store.AuditEntry) (generated string, err error) {
	switch {
	case !ValidName(p.Name):
		return "", ErrName
	case p.Role != store.RoleAdmin && p.Role != store.RoleApprover:
		_, err := ParseRole(string(p.Role))
		return "", err
	case len(p.Owner) > MaxOwner:
		return "", invalid(fmt.Sprintf("the owner is at most %d characters", MaxOwner))
	}
	if err := a.opts.CheckClients(p.Clients); err != nil {
		return "", asInvalid(err)
	}
	pw := p.Password
	if pw == "" {
		pw = password.Generate()
		generated = pw
	}
	hash, err := a.Rule(p.Role == store.RoleAdmin, p.Name, p.Owner, p.Clients...).Hash(pw)
	if err != nil {
		return "", &Invalid{err}
	}
	u := store.User{Name: p.Name, Role: p.Role, Owner: p.Owner, Clients: p.Clients, PasswordHash: hash, CreatedAt: now}
	if err := a.st.CreateUser(ctx, u, audit); err != nil {
		return "", err
	}
	return generated, nil
}

// asInvalid makes a plain sentence about what was typed an *Invalid.
func asInvalid(err error) error {
	var in *Invalid
	if errors.As(err, &in) {
		return err
	}
	return &Invalid{err}
}

// ResetPassword sets an admin's choice of password for the person (empty:
// one is generated and returned) and ends every session of theirs; with
// resetTOTP it turns their second factor off too. The password meets the
// rule of the role read before it was hashed, and the write refuses a role
// that changed meanwhile.
func (a *Accounts) ResetPassword(ctx context.Context, name, pw string, resetTOTP bool, audit store.AuditEntry) (generated string, err error) {
	target, err := a.st.User(name)
	if err != nil {
		return "", err
	}
	if pw == "" {
		pw = password.Generate()
		generated = pw
	}
	hash, err := a.Rule(target.Role == store.RoleAdmin, name, target.Owner, target.Clients...).Hash(pw)
	if err != nil {
		return "", &Invalid{err}
	}
	err = a.reset(ctx, name, func(u *store.User) error {
		if u.Role != target.Role {
			return conflict("their role changed meanwhile; reload the page and try again")
		}
		u.PasswordHash = hash
		if resetTOTP {
			u.TOTP, u.PendingTOTP = nil, ""
		}
		return nil
	}, audit)
	if err != nil {
		return "", err
	}
	return generated, nil
}

// CheckPassword compares a person's current password, as a change of
// their own account asks for it; it returns the hash it matched, for the
// write to check it is still the one (ErrWrongPassword when it is not).
func (a *Accounts) CheckPassword(name, current string) ([]byte, error) {
	u, err := a.st.User(name)
	if err != nil {
		return nil, err
	}
	if !password.Check(u.PasswordHash, current) {
		return nil, ErrWrongPassword
	}
	return u.PasswordHash, nil
}

// samePassword refuses a write when the password changed since it was checked.
func samePassword(u *store.User, checked []byte) error {
	if !bytes.Equal(u.PasswordHash, checked) {
		return conflict("the password changed meanwhile; reload the page and try again")
	}
	return nil
}

// ChangeOwnPassword replaces the person's password after their current
// one, and ends every other session of theirs (all but keep), in one
// transaction.
func (a *Accounts) ChangeOwnPassword(ctx context.Context, name string, keep []byte, current, next string, audit store.AuditEntry) error {
	u, err := a.st.User(name)
	if err != nil {
		return err
	}
	if !password.Check(u.PasswordHash, current) {
		return ErrWrongPassword
	}
	checked := u.PasswordHash
	hash, err := a.Rule(u.Role == store.RoleAdmin, u.Name, u.Owner, u.Clients...).Hash(next)
	if err != nil {
		return &Invalid{err}
	}
	_, err = a.update(ctx, name, func(tx *store.Tx, now *store.User) error {
		if err := samePassword(now, checked); err != nil {
			return err
		}
		if now.Role != u.Role {
			return conflict("your role changed meanwhile; reload the page and try again")
		}
		now.PasswordHash = hash
		_, err := endSessions(tx, name, keep)
		return err
	}, &audit)
	return err
}

// SetDisabled disables the person (their sessions end and their tokens
// stop working at once) or enables them again.
func (a *Accounts) SetDisabled(ctx context.Context, name string, disabled bool, audit store.AuditEntry) error {
	_, err := a.update(ctx, name, func(_ *store.Tx, u *store.User) error {
		u.Disabled = disabled
		return nil
	}, &audit)
	return err
}

// Change sets the person's role, owner and clients. An admin made an
// approver loses every token (a token acts for an admin): revoked, not
// paused, so making them admin again brings none back. The audit entry's
// detail names the tokens revoked, and so does the answer.
func (a *Accounts) Change(ctx context.Context, name string, role store.Role, owner string, clients []string, now time.Time, audit store.AuditEntry) ([]store.Token, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return nil, err
	}
	if len(owner) > MaxOwner {
		return nil, invalid(fmt.Sprintf("the owner is at most %d characters", MaxOwner))
	}
	if err := a.opts.CheckClients(clients); err != nil {
		return nil, asInvalid(err)
	}
	var revoked []store.Token
	detail := audit.Detail
	_, err := a.update(ctx, name, func(tx *store.Tx, u *store.User) error {
		revoked = nil
		if u.Role == store.RoleAdmin && role != store.RoleAdmin {
			var err error
			if revoked, err = tx.RevokeTokensOf(*u, now); err != nil {
				return err
			}
		}
		u.Role, u.Owner, u.Clients = role, owner, clients
		audit.Detail = detail
		if len(revoked) > 0 {
			audit.Detail += "; tokens revoked: " + TokenNames(revoked)
		}
		return nil
	}, &audit)
	if err != nil {
		return nil, err
	}
	return revoked, nil
}

// Remove deletes the person, every session of theirs and the browsers
// they turned notifications on in, and revokes every live token of theirs
// at now, in one transaction; the audit trail stays. It says which tokens
// it revoked.
func (a *Accounts) Remove(ctx context.Context, name string, now time.Time, audit store.AuditEntry) ([]store.Token, error) {
	var revoked []store.Token
	err := a.st.Update(ctx, func(tx *store.Tx) error {
		revoked = nil
		u, err := tx.User(name)
		if err != nil {
			return err
		}
		if enabledAdmin(u) {
			if err := keepAnAdmin(tx, name); err != nil {
				return err
			}
		}
		if _, err := endSessions(tx, name, nil); err != nil {
			return err
		}
		if revoked, err = tx.RevokeTokensOf(u, now); err != nil {
			return err
		}
		if _, err := tx.DeleteWebPushSubscriptionsOf(name); err != nil {
			return err
		}
		if err := tx.DeleteUser(name); err != nil {
			return err
		}
		return writeAudit(tx, audit)
	})
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", name, err)
	}
	return revoked, nil
}

// TokenNames names tokens for a sentence, in the order given.
func TokenNames(ts []store.Token) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// writeAudit writes the change's audit entry; a change without one (a
// test's, a fixture's) writes none.
func writeAudit(tx *store.Tx, e store.AuditEntry) error {
	if e.Action == "" {
		return nil
	}
	return tx.Audit(e)
}
