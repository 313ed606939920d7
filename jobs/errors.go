package jobs

import (
	"fmt"
	"time"
)

// RetryLater asks the runner to run the job again after a given delay
// instead of the usual backoff (a provider said 429 with Retry-After).
type RetryLater struct {
	Err   error
	After time.Duration
}

func (e *RetryLater) Error() string { return fmt.Sprintf("retry after %s: %v", e.After, e.Err) }
func (e *RetryLater) Unwrap() error { return e.Err }

// Snooze asks the runner to run the job again after a delay without
// counting the attempt: the kind did no work (a send held to its
// provider's rate), so the job keeps every attempt it had.
type Snooze struct {
	Err   error
	After time.Duration
}

func (e *Snooze) Error() string { return fmt.Sprintf("snoozed for %s: %v", e.After, e.Err) }
func (e *Snooze) Unwrap() error { return e.Err }

// Discard ends the job at once: retrying cannot help (the input is invalid,
// the record it works on is gone).
type Discard struct{ Err error }

func (e *Discard) Error() string { return "permanent: " + e.Err.Error() }
func (e *Discard) Unwrap() error { return e.Err }

// WithRaw attaches what an attempt got back (a model's unusable output) to its
// error, so the attempt record keeps it for a person to read.
type WithRaw struct {
	Err error
	Raw string
}

func (e *WithRaw) Error() string { return e.Err.Error() }
func (e *WithRaw) Unwrap() error { return e.Err }
