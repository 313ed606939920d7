package workers

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
)

// KindDeliver is the job that sends one approved reply (delivery.Job).
const KindDeliver = delivery.Kind

// Sender is what the delivery job needs of a provider.
type Sender = delivery.Sender

// DeliverJob runs delivery.Job, which owns every rule of sending, on the
// queue: it only says what the job's control flow means to the runner.
// A send held to its provider's rate is snoozed: it costs the job no
// attempt. (delivery cannot return the queue's error types itself: the queue wires
// it, so delivery importing jobs would be a cycle.)
type DeliverJob struct {
	Store     *store.Store
	Providers map[string]Sender
	Now       func() time.Time
	Log       *slog.Logger // delivery.Job's: failed and unknown replies; nil logs nothing
}

// Run delivers one outbox row.
func (k *DeliverJob) Run(ctx context.Context, job store.Job) error {
	if _, err := Decode[DeliverArgs](job); err != nil {
		return err
	}
	err := (&delivery.Job{Store: k.Store, Providers: k.Providers, Now: k.Now, Log: k.Log}).Run(ctx, job)
	var later *delivery.Later
	var held *delivery.Held
	var gone *delivery.Gone
	switch {
	case errors.As(err, &held):
		return &Snooze{Err: held.Err, After: held.After}
	case errors.As(err, &later):
		return &RetryLater{Err: later.Err, After: later.After}
	case errors.As(err, &gone):
		return &Discard{Err: gone.Err}
	}
	return err
}
