package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// DeliverArgs are the delivery job's: it sends the outbox row OutboxID
// once. The row holds everything else, so the job stores no payload.
type DeliverArgs struct {
	OutboxID string `json:"-"`
}

// Kind is the delivery job kind (Kind).
func (DeliverArgs) Kind() string { return Kind }

// Key is the outbox row's id.
func (a DeliverArgs) Key() string { return a.OutboxID }

// SetKey is how jobs.Decode gives the key back.
func (a *DeliverArgs) SetKey(k string) { a.OutboxID = k }

// EventArgs are the delivery job of an outbound event's row (OutboxEvent):
// the same job, under a kind of its own, so that the runner gives the
// events their own pool and a subscriber that hangs never holds a reply's
// worker.
type EventArgs struct {
	OutboxID string `json:"-"`
}

// Kind is KindEvent.
func (EventArgs) Kind() string { return KindEvent }

// Key is the outbox row's id.
func (a EventArgs) Key() string { return a.OutboxID }

// SetKey is how jobs.Decode gives the key back.
func (a *EventArgs) SetKey(k string) { a.OutboxID = k }

// argsFor are the delivery job's arguments for row o: an event's go to
// its own kind (EventArgs), every other row's to Kind.
func argsFor(o store.Outbox) jobs.Args {
	if o.Kind == store.OutboxEvent {
		return EventArgs{OutboxID: o.ID}
	}
	return DeliverArgs{OutboxID: o.ID}
}

// Sender is what the delivery job needs of a provider.
type Sender interface {
	Send(ctx context.Context, m provider.Message) (string, error)
	Lookup(ctx context.Context, ref, correlationID string) (string, bool, error)
	Capabilities() provider.Capabilities
}

// Job is the delivery job kind: it sends the outbox row job.Key once. It claims the row
// (effect_pending, with its execution id) in one transaction before the
// call and records the outcome in another; an outcome it cannot know is
// resolved by resending with the same key (only where the provider honours
// it), by lookup (where the provider supports it), or else parked for a
// person as needs_reconciliation. It never resends blindly.
//
// Its control flow is the queue's own: *jobs.RetryLater (ask again after
// a delay), *jobs.Snooze (the same for a send held to its provider's rate,
// without counting the attempt) and *jobs.Discard (the row does not exist,
// or the job is not a delivery job: retrying cannot help); every other
// error is an attempt that failed and counts. The runner runs it as it is
// (workers.Kinds registers it under Kind).
type Job struct {
	Store     *store.Store
	Providers map[string]Sender
	Now       func() time.Time
	// Log gets one line for each reply that ends failed or waits for a
	// person (needs_reconciliation): the job itself completes then, so the
	// runner has nothing to log. nil: nothing is logged.
	Log *slog.Logger
	// Gate, when set, can hold a reply before its first send: a positive
	// wait snoozes the job (no attempt counted) with why as its error, the
	// row untouched (crm.Gate: no "all set" before the lead's CRM record
	// exists). nil: nothing is held.
	Gate func(row store.Outbox, now time.Time) (wait time.Duration, why string)
}

// Run delivers one outbox row.
func (k *Job) Run(ctx context.Context, job store.Job) error {
	var err error
	if job.Kind == KindEvent {
		_, err = jobs.Decode[EventArgs](job)
	} else {
		_, err = jobs.Decode[DeliverArgs](job)
	}
	if err != nil {
		return err
	}
	now := k.now
	ob := &Outbox{st: k.Store}
	if wait, err := k.hold(job.Key, now()); err != nil || wait > 0 {
		return err
	}
	row, prev, err := ob.Claim(ctx, job.Key, job.ExecutionID, now())
	if errors.Is(err, store.ErrNotFound) {
		return &jobs.Discard{Err: err}
	}
	if err != nil {
		return err
	}
	if row.Status != store.OutboxEffectPending {
		return nil // sent, failed or waiting for a person: nothing to do
	}
	finish := func(status store.OutboxStatus, providerID, note string, a store.OutboxAttempt) error {
		a.ExecutionID, a.At = job.ExecutionID, now()
		// What the provider said is recorded even when the attempt's context
		// has just ended: dropping it would turn a known outcome into an
		// unknown one.
		_, err := ob.Finish(context.WithoutCancel(ctx), row.ID, job.ExecutionID, now(), Result{Status: status, ProviderID: providerID, Note: note, Attempt: a, JobID: job.ID})
		if err == nil {
			k.report(row, job, status, note)
		}
		return err
	}
	p, ok := k.Providers[row.Provider]
	if !ok {
		note := fmt.Sprintf("provider %q is not configured; nothing was sent", row.Provider)
		if err := finish(store.OutboxFailed, "", note, store.OutboxAttempt{Action: "send", Outcome: "permanent", Error: note}); err != nil {
			return err
		}
		return nil
	}
	caps := p.Capabilities()
	// The last attempt parks an unknown outcome for a person, unless the
	// attempt was cut short by shutdown: the runner hands that one back
	// without counting it as the end, and the next process resolves it.
	last := func() bool { return job.Attempt >= job.MaxAttempts && !errors.Is(ctx.Err(), context.Canceled) }
	action := "send"
	if prev.Status == store.OutboxEffectPending {
		// An earlier attempt may have delivered: find out before sending.
		switch {
		case caps.IdempotencyKey:
			action = "resend"
		case caps.Lookup:
			id, found, err := p.Lookup(ctx, row.ID, row.CorrelationID)
			switch {
			case err != nil:
				return k.unknown(finish, last(), "lookup", err)
			case found:
				return finish(store.OutboxSent, id, "", store.OutboxAttempt{Action: "lookup", Outcome: "sent", ProviderID: id})
			}
			// "Not found" proves nothing while the provider may still be
			// storing what an earlier send handed it.
			if proof := settledAt(row, prev, caps); now().Before(proof) {
				return k.tooSoon(finish, last(), proof.Sub(now()), proof)
			}
			// The provider had time to store it and says it never got it:
			// sending is safe. The lookup is recorded first, so the row
			// shows why this send was not blind.
			if err := finish(store.OutboxEffectPending, "", "", store.OutboxAttempt{Action: "lookup", Outcome: "not_found"}); err != nil {
				return err
			}
		default:
			note := fmt.Sprintf("an earlier attempt's outcome is unknown and provider %s can neither deduplicate nor look a message up: check whether %s arrived, then reconcile", row.Provider, row.ID)
			return finish(store.OutboxNeedsReconciliation, "", note, store.OutboxAttempt{Action: "check", Outcome: "ambiguous", Error: note})
		}
	}
	msg := provider.Message{Ref: row.ID, ConversationID: row.ConversationID, To: row.To, Text: row.Text, CorrelationID: row.CorrelationID}
	if t := row.Template; t != nil {
		msg.Template = &provider.Template{Name: t.Name, Language: t.Language, Params: t.Params}
	}
	if row.Kind == "" { // a reply; an alert answers no one
		k.answer(&msg, row, caps)
	}
	id, err := p.Send(ctx, msg)
	var perm *provider.Permanent
	var unsent *provider.NotSent
	switch {
	case err == nil:
		return finish(store.OutboxSent, id, "", store.OutboxAttempt{Action: action, Outcome: "sent", ProviderID: id})
	case errors.As(err, &perm):
		return finish(store.OutboxFailed, "", err.Error(), store.OutboxAttempt{Action: action, Outcome: "permanent", Error: err.Error()})
	case errors.As(err, &unsent) && prev.Status != store.OutboxEffectPending:
		// Nothing reached the provider, and nothing before it did either:
		// the row is as it was before the claim. (After an unknown outcome
		// it stays effect_pending below: this attempt proves nothing about
		// the earlier one.)
		a := store.OutboxAttempt{Action: action, Outcome: "not_sent", Error: err.Error()}
		if last() {
			note := fmt.Sprintf("provider %s could not be reached in %d attempts; nothing was sent, so a replay is safe", row.Provider, job.Attempt)
			return finish(store.OutboxFailed, "", note, a)
		}
		if ferr := finish(store.OutboxPending, "", "", a); ferr != nil {
			return ferr
		}
		if unsent.RetryAfter > 0 {
			// The provider refused for now and said when to come back:
			// the queue's due time waits, no goroutine does.
			return &jobs.RetryLater{Err: err, After: unsent.RetryAfter}
		}
		return err
	case caps.IdempotencyKey || caps.Lookup:
		return k.unknown(finish, last(), action, err)
	default:
		note := fmt.Sprintf("the provider's answer was lost (%v) and provider %s can neither deduplicate nor look a message up: check whether %s arrived, then reconcile", err, row.Provider, row.ID)
		return finish(store.OutboxNeedsReconciliation, "", note, store.OutboxAttempt{Action: action, Outcome: "ambiguous", Error: err.Error()})
	}
}

// report logs a row's end that a person must see: a permanent failure (a
// dead letter) or an outcome nobody can know without them.
func (k *Job) report(row store.Outbox, job store.Job, status store.OutboxStatus, note string) {
	if k.Log == nil {
		return
	}
	attrs := []any{"outbox_id", row.ID, "provider", row.Provider, "correlation_id", row.CorrelationID,
		"execution_id", job.ExecutionID, "attempt", job.Attempt, "reason", note}
	switch status {
	case store.OutboxFailed:
		k.Log.Error("reply failed for good; it is in the dead letters", attrs...)
	case store.OutboxNeedsReconciliation:
		k.Log.Warn("reply outcome unknown; a person must reconcile it", attrs...)
	}
}

// answer fills in what the reply answers, from the lead's event the row
// replies to: where in the channel that message sits (its reply_to: a
// Telegram group, a Slack thread), and for an email (caps.Threads) its
// subject and Message-ID — the reply_to's message id where the channel
// maps one (postmark, from Headers[]), else the channel's message id
// where that is one (sendgrid and mailgun map it so). A read that fails
// leaves them empty (To's own chat, the provider's "Re: your message")
// rather than fail a claimed send.
func (k *Job) answer(msg *provider.Message, row store.Outbox, caps provider.Capabilities) {
	// The window kinds (whatsapp, meta) measure it from the lead's latest
	// message (leads/window.go); a latest message that cannot be read
	// counts as a closed window (they refuse a free-form reply unsent).
	at, err := leads.LastInbound(k.Store, store.LeadKey(row.Channel, row.ConversationID))
	switch {
	case err == nil:
		msg.LastInbound = at
	case errors.Is(err, leads.ErrInboundUnknown):
		msg.WindowUnknown = true
	}
	ev, err := k.Store.EventByKey(row.EventKey)
	if err != nil {
		return
	}
	if r := ev.ReplyTo; r != nil {
		msg.ReplyTo = provider.ReplyTo{Chat: r.Chat, MessageID: r.MessageID, Thread: r.Thread}
	}
	if !caps.Threads {
		return
	}
	msg.Subject = ev.Subject
	for _, id := range []string{msg.ReplyTo.MessageID, ev.MessageID} {
		if len(id) > 2 && id[0] == '<' && id[len(id)-1] == '>' && strings.Count(id, "@") == 1 && !strings.ContainsAny(id, " \t\r\n") {
			msg.InReplyTo = id
			return
		}
	}
}

// settledAt is when a lookup's "not found" becomes proof that nothing
// arrived: lookup_settle after the last moment an earlier send may have
// reached the provider. That moment is the end of the last recorded send
// or resend, or, for an execution that claimed the row and died before
// recording anything, its claim plus the provider's timeout (how long its
// call could have gone on). Lookups themselves never move it, so asking
// early cannot push the proof away.
func settledAt(row store.Outbox, prev Claim, caps provider.Capabilities) time.Time {
	var sent time.Time
	died := prev.ExecutionID != ""
	for _, a := range row.Attempts {
		if a.ExecutionID == prev.ExecutionID {
			died = false
		}
		if (a.Action == "send" || a.Action == "resend") && a.Outcome != "not_sent" && a.At.After(sent) {
			sent = a.At
		}
	}
	if died {
		if t := prev.At.Add(caps.Timeout); t.After(sent) {
			sent = t
		}
	}
	return sent.Add(caps.LookupSettle)
}

// tooSoon records a "not found" that came before it could count: the row
// stays effect_pending and the job asks again when the answer settles.
func (k *Job) tooSoon(finish func(store.OutboxStatus, string, string, store.OutboxAttempt) error, last bool, wait time.Duration, proof time.Time) error {
	cause := fmt.Errorf("the provider has no record of the message yet, which proves nothing before %s (lookup_settle after the last send that may have reached it)", proof.UTC().Format(time.RFC3339))
	a := store.OutboxAttempt{Action: "lookup", Outcome: "not_found_yet", Error: cause.Error()}
	if last {
		return finish(store.OutboxNeedsReconciliation, "", "the last attempt's lookup found nothing, but too soon after a send to count: check with the provider, then reconcile", a)
	}
	if err := finish(store.OutboxEffectPending, "", "", a); err != nil {
		return err
	}
	return &jobs.RetryLater{Err: cause, After: wait}
}

// unknown handles an outcome that a later attempt can resolve: the row stays
// effect_pending and the job retries, unless this was its last attempt.
func (k *Job) unknown(finish func(store.OutboxStatus, string, string, store.OutboxAttempt) error, last bool, action string, cause error) error {
	a := store.OutboxAttempt{Action: action, Outcome: "ambiguous", Error: cause.Error()}
	if last {
		return finish(store.OutboxNeedsReconciliation, "", "the outcome is still unknown after the last attempt: check with the provider, then reconcile", a)
	}
	if err := finish(store.OutboxEffectPending, "", "", a); err != nil {
		return err
	}
	var amb *provider.Ambiguous
	if errors.As(cause, &amb) && amb.RetryAfter > 0 {
		return &jobs.RetryLater{Err: cause, After: amb.RetryAfter}
	}
	return cause
}

// hold keeps a send to its provider's rate: before the row is claimed, a
// provider with a rate (provider.Holder) gives the row a slot, and a slot
// in the future comes back as *jobs.Snooze for the queue to wait on, without
// counting the attempt. The row is untouched, so nothing about the send
// is uncertain meanwhile.
func (k *Job) hold(id string, now time.Time) (time.Duration, error) {
	row, err := k.Store.OutboxRow(id)
	if err != nil || row.Status != store.OutboxPending {
		return 0, nil // Claim reports a missing row; only a first send waits
	}
	if k.Gate != nil && row.Kind == "" {
		if wait, why := k.Gate(row, now); wait > 0 {
			return wait, &jobs.Snooze{Err: errors.New(why), After: wait}
		}
	}
	h, ok := k.Providers[row.Provider].(provider.Holder)
	if !ok {
		return 0, nil
	}
	wait := h.Hold(row.ID, now)
	if wait <= 0 {
		return 0, nil
	}
	return wait, &jobs.Snooze{Err: fmt.Errorf("provider %s is held to its rate", row.Provider), After: wait}
}

func (k *Job) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}
