package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/handoff/handoff/jobs/drafter"
	"github.com/handoff/handoff/store"
)

// KindDraft is the job that turns an event into a stored draft.
const KindDraft = "draft"

// Drafter writes a reply for one message.
type Drafter interface {
	Draft(ctx context.Context, in drafter.Input) (drafter.Output, error)
}

// DraftJob drafts a reply to an event and stores it against the event key.
// The stored draft is the record of the drafting call: an attempt that finds
// it reuses it and never calls the drafter again.
type DraftJob struct {
	Store   *store.Store
	Drafter Drafter
}

// Run drafts the event job.Key unless its draft is already stored.
func (k *DraftJob) Run(ctx context.Context, job store.Job) error {
	if _, err := k.Store.DraftByEvent(job.Key); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	ev, err := k.Store.EventByKey(job.Key)
	if errors.Is(err, store.ErrNotFound) {
		return &Discard{Err: err}
	}
	if err != nil {
		return err
	}
	out, err := k.Drafter.Draft(ctx, drafter.Input{
		EventKey: ev.Key, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Contact: ev.Contact, Name: ev.Name, Text: ev.Text,
	})
	if err != nil {
		return fmt.Errorf("draft %s: %w", ev.Key, err)
	}
	_, _, err = k.Store.SaveDraft(ctx, store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
		ConversationID: ev.ConversationID, Text: out.Text, Drafter: out.Drafter,
		Model: out.Model, Template: out.Template, PromptVersion: out.PromptVersion,
		InputHash: out.InputHash, Raw: out.Raw, Fields: out.Fields,
		ExecutionID: job.ExecutionID, CreatedAt: job.Attempts[len(job.Attempts)-1].StartedAt,
	})
	return err
}
