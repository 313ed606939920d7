// Package users holds the rules of people's accounts, for the dashboard
// and the command line alike: what a person or a token may be named, the
// clients a person is limited to, the password they choose, their second
// factor, and every change an admin or the person makes. Each change is
// one store transaction that also keeps the rules every change keeps:
// the last enabled admin stays one, a disabling or a reset ends the
// person's sessions, a demotion or a removal revokes their tokens.
//
// The rules of getting in live here too, for the dashboard's HTTP to call
// (web keeps the cookies, CSRF and handlers): a login checked under the
// Guard of guesses, sessions (started, looked up with their expiry,
// ended), the second factor's code, the step-up and its window, and API
// tokens (minted, hashed, scoped, checked, revoked).
//
// Refusals are typed: *Invalid (what was typed: a 400 on the dashboard),
// *Conflict (what the account's state does not allow now: a 409, the last
// admin among them), ErrWrongPassword (a 403), *TooMany (a 429), and the
// login's own (ErrLoginFailed, ErrAccountDisabled, *CodeRefused,
// *StepUpRefused, *TokenRefused); a person who is not is
// store.ErrNotFound, a name in use store.ErrExists. Their texts are
// sentences the dashboard and the CLI both show.
package users

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/handoff/handoff/store"
)

// SetupPath is where the first start's setup link points: SetupPath + the
// link's secret (the dashboard serves it).
const SetupPath = "/setup/"

// SetupLinkFile is the file in the data folder that holds the setup link
// when serve's stdout is not a terminal; it is deleted once the link is used.
const SetupLinkFile = "setup-link"

// Invalid refuses what was typed: a name, a role, an owner, a list of
// clients, a password, a code.
type Invalid struct{ Err error }

func (e *Invalid) Error() string { return e.Err.Error() }
func (e *Invalid) Unwrap() error { return e.Err }

// Conflict refuses a change the account's present state does not allow.
type Conflict struct{ Err error }

func (e *Conflict) Error() string { return e.Err.Error() }
func (e *Conflict) Unwrap() error { return e.Err }

func invalid(msg string) error  { return &Invalid{errors.New(msg)} }
func conflict(msg string) error { return &Conflict{errors.New(msg)} }

// ErrLastAdmin refuses a change that would leave no enabled admin: the
// one who could undo it would be gone. It is a *Conflict.
var ErrLastAdmin error = &Conflict{errors.New("this is the last enabled admin; make another person admin first")}

// ErrWrongPassword refuses a change of one's own account whose current
// password is wrong.
var ErrWrongPassword = errors.New("the current password is wrong")

// MaxOwner is the longest routing owner a person may work as, in bytes.
const MaxOwner = 64

// ValidName reports whether s may name a person or an API token: 1 to 64
// letters, digits, '.', '_', '-' or '@'.
func ValidName(s string) bool {
	return len(s) >= 1 && len(s) <= 64 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r))
	})
}

// ErrName is the sentence for a name ValidName refuses.
var ErrName error = &Invalid{errors.New("a name is 1 to 64 letters, digits, dots, dashes, underscores or @")}

// ParseRole reads a role as typed: admin or approver.
func ParseRole(s string) (store.Role, error) {
	switch r := store.Role(s); r {
	case store.RoleAdmin, store.RoleApprover:
		return r, nil
	}
	return "", &Invalid{fmt.Errorf("the role must be admin or approver, not %q", s)}
}

// ParseClients splits a list of client ids given as "a,b" or "a b",
// dropping repeats.
func ParseClients(s string) []string {
	var out []string
	for _, id := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// CheckClientIDs says, in a sentence, which id is not a client id at all
// ([a-z0-9-]+): the check of a list made without the config, where an id
// no client has would limit the person to nothing.
func CheckClientIDs(ids []string) error {
	for _, id := range ids {
		if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) {
			return &Invalid{fmt.Errorf("%q is not a client id (1 to 64 lowercase letters, digits and -)", id)}
		}
	}
	return nil
}

// enabledAdmin reports whether u can act as an admin now.
func enabledAdmin(u store.User) bool { return u.Role == store.RoleAdmin && !u.Disabled }

// keepAnAdmin refuses, inside the change's transaction, a change that
// takes the enabled admin name away while no other is left.
func keepAnAdmin(tx *store.Tx, name string) error {
	all, err := tx.Users()
	if err != nil {
		return err
	}
	for _, u := range all {
		if u.Name != name && enabledAdmin(u) {
			return nil
		}
	}
	return ErrLastAdmin
}
