package keys

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// The refusals of the key API, checked with errors.As. Each is a decision
// about the caller's request, never a failure of the store; web answers
// MismatchError with 422 and the others with 409.

// MismatchError: the key was first claimed with another body.
type MismatchError struct{ Key string }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("key %q was first claimed with a different body; use a new key for a different request", e.Key)
}

// BusyError: another claim holds the key until its lease ends.
type BusyError struct {
	Key   string
	State store.KeyState
	Until time.Time
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("key %q is held by another claim (%s) until %s; try again after that", e.Key, e.State, e.Until.Format(time.RFC3339))
}

// UnsureError: an effect may have happened under the key
// (needs_reconciliation): a person checks it and reconciles.
type UnsureError struct {
	Key  string
	Note string // why, as recorded on the key
}

func (e *UnsureError) Error() string {
	return fmt.Sprintf("key %q needs reconciliation: %s", e.Key, e.Note)
}

// LostClaimError: the claim that asks for a move is not the key's: its
// lease expired and another claim took the key over.
type LostClaimError struct {
	Key    string
	Holder string // the claim that holds the key
	Claim  string // the claim that asked
}

func (e *LostClaimError) Error() string {
	return fmt.Sprintf("key %s is held by claim %s; this needs it to be claim %s (that claim lost the key: its lease expired and another claim took it over)", e.Key, e.Holder, e.Claim)
}

// StateError: the key is not in a state the move starts from.
type StateError struct {
	Key   string
	State store.KeyState
	Want  string // the states the move needs, in words
}

func (e *StateError) Error() string {
	return fmt.Sprintf("key %s is %s; this needs it to be %s", e.Key, e.State, e.Want)
}

func (*MismatchError) refusal()  {}
func (*BusyError) refusal()      {}
func (*UnsureError) refusal()    {}
func (*LostClaimError) refusal() {}
func (*StateError) refusal()     {}

// refused reports whether err is an answer to the request rather than a
// failure: one of the errors above, or a key that was never claimed.
func refused(err error) bool {
	var r interface{ refusal() }
	return errors.As(err, &r) || errors.Is(err, store.ErrNotFound)
}
