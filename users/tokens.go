package users

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
)

// Caller is who a request acts as: a person, or an API token acting for
// the admin who made it.
type Caller struct {
	Name    string
	Role    store.Role
	Owner   string   // the routing owner of a person ("mine")
	Clients []string // the clients it is limited to; empty: every client
	// Scope is what a token may do; empty for a person, whose role
	// decides (ScopeOf).
	Scope store.Scope
}

// ScopeOf is what c may do: a token's scope, or a person's role as one.
func (c Caller) ScopeOf() store.Scope {
	switch {
	case c.Scope != "":
		return c.Scope
	case c.Role == store.RoleAdmin:
		return store.ScopeAdmin
	}
	return store.ScopeApprove
}

// May reports whether c's scope covers need; "" needs only a caller. An
// admin may do all, approve covers read, any other scope only itself.
func (c Caller) May(need store.Scope) bool {
	switch have := c.ScopeOf(); {
	case need == "", have == store.ScopeAdmin, have == need:
		return true
	case have == store.ScopeApprove:
		return need == store.ScopeRead
	}
	return false
}

// TokenRefused is a bearer token that opens nothing, and why, in the
// sentence the caller is told.
type TokenRefused struct{ Why string }

func (e *TokenRefused) Error() string { return e.Why }

// Bearer authenticates a bearer token's secret from the address from at
// now: the APIToken (an admin), or a token an admin made; "" is a header
// that carried none. Every presented token counts against its address
// before it is looked up (a success, or the store failing, takes its
// count back), so past BearerPerAddr refusals in BearerWindow an address
// gets *TooMany without its tokens being checked; the refusals
// (*TokenRefused) are audited, twice per address per window at most.
func (a *Accounts) Bearer(ctx context.Context, secret, from string, now time.Time) (Caller, error) {
	key := AddrKey(from)
	n, retry, allowed := a.bearerFails.reserve(key, now)
	if !allowed {
		return Caller{}, &TooMany{Why: "too many refused tokens from this address", Retry: retry}
	}
	c, who, err := a.checkBearer(secret)
	var refused *TokenRefused
	if err == nil || !errors.As(err, &refused) {
		a.bearerFails.release(key, now)
		return c, err
	}
	switch n {
	case 1:
		a.auditBearer(ctx, now, from, who, "token refused", fmt.Sprintf("%s; further refusals from this address in the next %s are counted, not each written here", refused.Why, BearerWindow))
	case BearerPerAddr:
		a.auditBearer(ctx, now, from, who, "tokens limited", fmt.Sprintf("%d refused tokens from this address within %s: it gets 429 until the oldest is %s old", n, BearerWindow, BearerWindow))
	}
	return Caller{}, err
}

// checkBearer looks a bearer token's secret up. who names the caller for
// the audit log when it is refused: the token, or a fingerprint of it.
func (a *Accounts) checkBearer(secret string) (c Caller, who string, err error) {
	if secret == "" {
		return Caller{}, "malformed Authorization header", &TokenRefused{`the Authorization header must be "Bearer <token>"`}
	}
	hash := HashSecret(secret)
	if a.apiToken != nil && subtle.ConstantTimeCompare(hash, a.apiToken) == 1 {
		return Caller{Name: "api-token", Role: store.RoleAdmin, Scope: store.ScopeAdmin}, "", nil
	}
	unknown := fmt.Sprintf("unknown token (sha256 %x…)", hash[:4])
	t, err := a.st.TokenByHash(hash)
	if err != nil {
		return Caller{}, unknown, &TokenRefused{"the token is not valid (unknown or revoked)"}
	}
	name := "token:" + t.Name + " (" + t.User + ")"
	if t.RevokedAt != nil {
		return Caller{}, name, &TokenRefused{"the token is not valid (unknown or revoked)"}
	}
	// A token acts for the admin who made it, and only while they are an
	// enabled admin: disabling, demoting or removing them stops it at once.
	u, err := a.st.ActiveUser(t.User)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrDisabled) {
		return Caller{}, name, err
	}
	// The owner is the person of the ID, not of the name: a person given
	// a removed admin's name gets none of their tokens.
	if err != nil || u.ID == "" || u.ID != t.UserID || u.Role != store.RoleAdmin {
		return Caller{}, name, &TokenRefused{fmt.Sprintf("the token's owner %s is no longer an active admin, so it is not valid; an admin can create a new one", t.User)}
	}
	role := store.RoleApprover
	if t.Scope == store.ScopeAdmin {
		role = store.RoleAdmin
	}
	return Caller{Name: name, Role: role, Scope: t.Scope, Clients: t.Clients}, "", nil
}

// auditBearer writes one entry about refused tokens, within the budget of
// bearerAudit; the last entry of a window says that the rest are left out.
func (a *Accounts) auditBearer(ctx context.Context, now time.Time, from, who, action, detail string) {
	ok, last := a.bearerAudit.take(now)
	if !ok {
		return
	}
	if last {
		detail += fmt.Sprintf("; this is the %dth such entry in %s, so no more are written until it ends", AuditPerWindow, BearerWindow)
	}
	_ = a.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: who, From: from, Action: action, Detail: detail})
}

// The refusals of a token's name and scope as typed.
var (
	ErrTokenName  error = &Invalid{errors.New("a token name is 1 to 64 letters, digits, dots, dashes, underscores or @")}
	ErrTokenScope error = &Invalid{errors.New("the scope must be one of approve, read, keys, metrics or admin")}
)

// NewToken is an API token as an admin asks for it.
type NewToken struct {
	Name    string
	User    string // the admin who makes it, and for whom it acts
	Scope   store.Scope
	Clients []string // checked by the caller against the config
}

// MintToken makes the token at now, with the audit entry, and returns its
// secret, to be shown once; only its hash is stored, bound to the ID of
// the person t.User names. The audit entry's target is the token's ID. A name, a scope, or a limit to clients on a
// scope that reads no client's records (keys, metrics) or every client's
// (admin) is *Invalid; a live token of that name, store.ErrExists.
func (a *Accounts) MintToken(ctx context.Context, t NewToken, now time.Time, audit store.AuditEntry) (string, store.Token, error) {
	switch {
	case !ValidName(t.Name):
		return "", store.Token{}, ErrTokenName
	case !store.ValidScope(t.Scope):
		return "", store.Token{}, ErrTokenScope
	case len(t.Clients) > 0 && t.Scope != store.ScopeRead && t.Scope != store.ScopeApprove:
		// A keys or metrics token reads no client's records, and an admin
		// token sees every client: a limit there would be a promise not kept.
		return "", store.Token{}, invalid("only a read or approve token can be limited to clients; a " + string(t.Scope) + " token reaches no client's leads or reaches them all, so leave its clients empty")
	}
	secret := NewSecret()
	tok := store.Token{ID: ulid.Make().String(), Name: t.Name, User: t.User, Scope: t.Scope, Clients: t.Clients, CreatedAt: now}
	audit.Target = tok.ID
	if err := a.st.CreateToken(ctx, HashSecret(secret), tok, audits(audit)...); err != nil {
		return "", store.Token{}, err
	}
	return secret, tok, nil
}

// RevokeToken revokes the token id at now, with the audit entry; a token
// revoked twice keeps the first time.
func (a *Accounts) RevokeToken(ctx context.Context, id string, now time.Time, audit store.AuditEntry) (store.Token, error) {
	return a.st.RevokeToken(ctx, id, now, audits(audit)...)
}

// audits is the change's audit entry as the store's variadic takes it;
// none for a change without one (a test's), as writeAudit.
func audits(e store.AuditEntry) []store.AuditEntry {
	if e.Action == "" {
		return nil
	}
	return []store.AuditEntry{e}
}
