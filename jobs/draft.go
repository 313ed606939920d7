package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/handoff/handoff/jobs/drafter"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// KindDraft is the job that turns an event into a stored draft.
const KindDraft = store.KindDraft

// historyLimit bounds the earlier messages a drafter sees.
const historyLimit = 10

// Drafter writes a reply for one message.
type Drafter interface {
	Draft(ctx context.Context, in drafter.Input) (drafter.Output, error)
}

// DraftJob drafts a reply to an event and routes it; review.Record then
// stores the result against the event key, auto-approves it and completes
// the job, in one transaction with the lead's new status. The stored draft
// is the record of the drafting call: an attempt that finds it reuses it and
// never calls the drafter again.
type DraftJob struct {
	Store   *store.Store
	Review  *review.Review
	Drafter Drafter
	Router  Router
	// Now is the clock the job's completion is recorded in; nil: time.Now.
	Now func() time.Time
	// AfterSave, when set, runs right after the draft commits (crash tests
	// kill the process there); by then the job is complete too.
	AfterSave func()
	// Observe, when set, is told of every drafter call (metrics).
	Observe func(drafter, outcome string, promptTokens, outputTokens int64)
	// DrafterName labels the drafter in metrics (template, openai).
	DrafterName string
}

// Run drafts the event job.Key unless its draft is already stored.
func (k *DraftJob) Run(ctx context.Context, job store.Job) error {
	p, err := Decode[DraftArgs](job)
	if err != nil {
		return err
	}
	if d, err := k.Store.DraftByEvent(job.Key); err == nil && d.Version >= p.RegenerateVersion {
		return k.record(ctx, job, nil, 0) // an attempt that stored it did not complete the job
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	ev, err := k.Store.EventByKey(job.Key)
	if errors.Is(err, store.ErrNotFound) {
		return &Discard{Err: err}
	}
	if err != nil {
		return err
	}
	history, err := k.history(ev)
	if err != nil {
		return err
	}
	// The owner is a hint for the drafter (the template names it); the
	// recorded decision is made again below on the drafter's validated fields.
	hint := k.Router.Route(ev.Channel, ev.Text, routingFields(drafter.Extract(ev.Text), ev))
	out, err := k.Drafter.Draft(ctx, drafter.Input{
		EventKey: ev.Key, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Contact: ev.Contact, Name: ev.Name, Text: ev.Text, Owner: hint.Owner,
		History: history, CorrelationID: ev.CorrelationID,
	})
	var invalid *drafter.InvalidOutput
	var permanent *drafter.PermanentError
	if k.Observe != nil {
		outcome := "ok"
		if errors.As(err, &invalid) {
			outcome = "invalid"
		} else if err != nil {
			outcome = "error"
		}
		k.Observe(k.DrafterName, outcome, out.PromptTokens, out.OutputTokens)
	}
	switch {
	case errors.As(err, &invalid):
		return &WithRaw{Err: err, Raw: invalid.Raw}
	case errors.As(err, &permanent):
		return &Discard{Err: err}
	case err != nil:
		return fmt.Errorf("draft %s: %w", ev.Key, err)
	}
	dec := k.Router.Route(ev.Channel, ev.Text, routingFields(out.Fields, ev))
	err = k.record(ctx, job, &store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
		ConversationID: ev.ConversationID, Text: out.Text, Drafter: out.Drafter,
		Model: out.Model, Template: out.Template, PromptVersion: out.PromptVersion,
		InputHash: out.InputHash, Raw: out.Raw, Fields: out.Fields,
		Owner: dec.Owner, RuleVersion: dec.Version, Rule: dec.Rule,
		PromptTokens: out.PromptTokens, OutputTokens: out.OutputTokens,
		ExecutionID: job.ExecutionID, CreatedAt: job.Attempts[len(job.Attempts)-1].StartedAt,
	}, max(p.RegenerateVersion, 1))
	if err != nil {
		return err
	}
	if k.AfterSave != nil {
		k.AfterSave()
	}
	return nil
}

// record stores d as version n (nil: the draft is already stored),
// auto-approves it and completes job, in one commit (review.Record). The
// model's answer is stored even when the attempt's context has just ended:
// it is the record of the call, and a retry reuses it.
func (k *DraftJob) record(ctx context.Context, job store.Job, d *store.Draft, n int) error {
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	_, err := k.Review.Record(context.WithoutCancel(ctx), job, d, n, now().UTC())
	return err
}

// routingFields adds the event's contact to the extracted fields, so a rule
// can ask for `has: contact`.
func routingFields(fields map[string]string, ev store.Event) map[string]string {
	f := maps.Clone(fields)
	if f == nil {
		f = map[string]string{}
	}
	if ev.Contact != "" {
		f["contact"] = ev.Contact
	}
	if ev.Name != "" && f["name"] == "" {
		f["name"] = ev.Name
	}
	return f
}

// history is the lead's earlier messages and the replies approved for them,
// newest last, bounded.
func (k *DraftJob) history(ev store.Event) ([]drafter.Message, error) {
	earlier, err := k.Store.Conversation(store.LeadKey(ev.Channel, ev.ConversationID), ev.ID, historyLimit)
	if err != nil {
		return nil, err
	}
	var msgs []drafter.Message
	for _, e := range earlier {
		msgs = append(msgs, drafter.Message{From: "customer", Text: e.Text})
		d, err := k.Store.DraftByEvent(e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if d.Status == store.DraftApproved {
			text := d.Text
			if d.Decision != nil && d.Decision.Text != "" {
				text = d.Decision.Text // what was approved, edits included
			}
			msgs = append(msgs, drafter.Message{From: "agent", Text: text})
		}
	}
	if len(msgs) > historyLimit {
		msgs = msgs[len(msgs)-historyLimit:]
	}
	return msgs, nil
}
