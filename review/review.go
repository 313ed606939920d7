// Package review owns drafts on their way to a person's decision: the
// draft state machine and every rule about it, written through the store's
// Tx.
//
//	(draft job) ──save──▶ pending_approval ──approve──▶ approved (+ outbox row, delivery job)
//	                        │   │
//	                        │   └──reject──▶ rejected
//	                        └──regenerate (version n+1)──▶ rejected, "replaced by" the new version
//
// An approval holds its send for undo_window; inside it, Undo puts the
// draft back to pending_approval and deletes the row and its job
// (review/undo.go, delivery.UndoTx) in one transaction.
//
// Save stores what the drafter wrote (the first draft of a version wins);
// Approve decides a draft and, in the same transaction, creates its outbox
// row through delivery.CreateTx and its delivery job; Reject decides it the
// other way; a channel with auto_approve approves its drafts as they are
// saved. Record is the draft job's one write: save, auto-approve and the
// job's completion in one transaction. The store keeps the Draft record, its
// table, indexes, counts and Check; the outbox status is delivery's.
package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/store"
)

// Review is the drafts' operations and the policy they follow: which
// provider a channel sends through, which channels approve their own
// drafts, and how many attempts a delivery job gets. Its zero value is not
// usable; call New.
type Review struct {
	st          *store.Store
	cfg         *config.Config
	maxAttempts int
	newID       func() string
}

// New returns the review of drafts in st under cfg's channels and retry policy.
func New(st *store.Store, cfg *config.Config) *Review {
	return &Review{st: st, cfg: cfg, maxAttempts: cfg.Retry.MaxAttempts, newID: func() string { return ulid.Make().String() }}
}

// provider names the provider of channel (false: it is no longer configured).
func (r *Review) provider(channel string) (string, bool) {
	ch, ok := r.cfg.Channel(channel)
	if !ok {
		return "", false
	}
	return ch.Provider, true
}

// ViaCRM reports whether channel's client has a CRM (crm[]): its lead is
// matched once the CRM holds its record, not when a draft names the
// contact (leads.DraftedTx).
func (r *Review) ViaCRM(channel string) bool {
	_, ok := r.cfg.CRMFor(channel)
	return ok
}

// autoApproves reports whether channel approves its drafts as they are saved.
func (r *Review) autoApproves(channel string) bool {
	ch, ok := r.cfg.Channel(channel)
	return ok && ch.AutoApprove
}

// SaveTx stores d as version n (n <= 1: the first draft) of its event's
// draft, unless version n or later is stored: then that one is returned
// with created false (the first draft wins; a retry that raced a slower
// attempt reuses it). A regeneration keeps the draft it replaces, rejected
// with a note if it was pending; an approved draft is not regenerated. The
// lead moves forward in the same transaction (leads.DraftedTx); viaCRM
// reports whether a channel's client has a CRM, whose record then moves it
// to matched (nil: no client has one; Review.ViaCRM is the config's).
func SaveTx(tx *store.Tx, d store.Draft, n int, viaCRM func(channel string) bool) (out store.Draft, created bool, err error) {
	n = max(n, 1)
	cur, err := tx.DraftByEvent(d.EventKey)
	hasCur := err == nil
	switch {
	case hasCur:
		// A record from before versions were counted (0) is version 1.
		if max(cur.Version, 1) >= n {
			return cur, false, nil
		}
		if cur.Status == store.DraftApproved {
			return store.Draft{}, false, &store.StateError{What: "draft " + cur.ID, State: "approved", Want: "pending or rejected to be regenerated"}
		}
	case !errors.Is(err, store.ErrNotFound):
		return store.Draft{}, false, err
	}
	ev, err := tx.EventByKey(d.EventKey)
	if err != nil {
		return store.Draft{}, false, fmt.Errorf("event %s: %w", d.EventKey, err)
	}
	d.Version, d.Status = n, store.DraftPending
	d.ID = store.DraftVersionID(ev.ID, n)
	d.Channel, d.ConversationID, d.CorrelationID = ev.Channel, ev.ConversationID, ev.CorrelationID
	h, err := tx.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		return store.Draft{}, false, fmt.Errorf("lead of %s: %w", d.EventKey, err)
	}
	switch {
	case h.Turn > 0 && h.TurnDraft != d.EventKey:
		// A newer message moved the turn on (or it ended) while this was
		// drafted: the model's answer is stored, as the record of the call,
		// but it can no longer be approved.
		cur, err := tx.CurrentDraftID(h)
		if err != nil {
			return store.Draft{}, false, err
		}
		supersede(&d, cur, d.CreatedAt)
	case h.Turn > 0 && len(d.Answers) == 0:
		d.Answers = slices.Clone(h.TurnEvents)
	case h.Turn > 0 && len(h.TurnEvents) > 0 && d.Answers[len(d.Answers)-1] != h.TurnEvents[len(h.TurnEvents)-1]:
		// The turn gained a message after this draft's input was read (new
		// messages join at the end). Only an execution that lost its lease
		// can get here: while a draft job runs, a new message makes a draft
		// job of its own. Nothing is stored; the job's current execution
		// drafts the whole turn.
		return store.Draft{}, false, fmt.Errorf("the turn of lead %s has %d messages, and this draft answers %d; it is drafted again", h.Key, len(h.TurnEvents), len(d.Answers))
	}
	if hasCur && d.Status == store.DraftPending {
		d.Replaces = cur.ID
		if cur.Status == store.DraftPending {
			old := cur
			cur.Decision = &store.Decision{By: "regeneration", At: d.CreatedAt, Reason: "replaced by " + d.ID, Outcome: store.OutcomeDraftAgain}
			if d.Drafter == "person" {
				cur.Decision.Outcome = store.OutcomeOwnReply
			}
			cur.Status = store.DraftRejected
			if err := tx.PutDraft(&old, &cur); err != nil {
				return store.Draft{}, false, err
			}
		}
	}
	if err := tx.InsertDraft(&d, ev); err != nil {
		return store.Draft{}, false, err
	}
	if err := leads.DraftedTx(tx, d, ev.Contact, viaCRM != nil && viaCRM(ev.Channel), d.CreatedAt); err != nil { // matched, owned
		return store.Draft{}, false, err
	}
	return d, true, nil
}

// supersede marks d, written for a turn that has moved on, superseded by
// the turn's current draft cur (empty: the turn has ended).
func supersede(d *store.Draft, cur string, at time.Time) {
	d.Status, d.SupersededBy = store.DraftSuperseded, cur
	reason := "superseded: the turn it answered has ended"
	if cur != "" {
		reason = "superseded by " + cur + ": a newer message joined the turn it answered"
	}
	d.Decision = &store.Decision{By: "turn", At: at, Reason: reason}
}

// Save is SaveTx in a transaction of its own.
func (r *Review) Save(ctx context.Context, d store.Draft, n int) (store.Draft, bool, error) {
	var (
		out     store.Draft
		created bool
	)
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, created, err = SaveTx(tx, d, n, r.ViaCRM)
		return err
	})
	if err != nil {
		return store.Draft{}, false, fmt.Errorf("review: save draft version %d for %s: %w", max(n, 1), d.EventKey, err)
	}
	return out, created, nil
}

// Approved is the answer to Approve.
type Approved struct {
	Draft   store.Draft
	Outbox  store.Outbox
	Created bool // false: an earlier approval made the outbox row; Draft.Decision says who
}

// ApproveTx approves draft id with dec and, in the same transaction,
// creates its outbox row ("<conversation id>:<draft id>") and its delivery
// job jobID, unless an approval already did: then the existing row is
// returned and nothing is written. Approving a rejected draft is a
// *store.ConflictError; a reply too long for its provider a *TooLongError,
// one whose channel's reply window closes before the send (window.go) a
// *WindowClosedError; a draft whose channel is no longer configured is a
// *store.StateError (an approval that already happened is still answered).
// dec.Text empty approves the draft as written; Edited is set here. A
// person's approval holds its send for the configured undo_window (the
// delivery job is due at its end, and UndoTx can take it back until then).
func (r *Review) ApproveTx(tx *store.Tx, id string, dec store.Decision, jobID string) (Approved, error) {
	return r.approveTx(tx, id, dec, jobID, r.cfg.UndoWindow, nil)
}

// approveTx is ApproveTx with the send held for hold (0: sent at once);
// with choice set, the draft is answered with that template instead of
// its text (SendTemplateTx).
func (r *Review) approveTx(tx *store.Tx, id string, dec store.Decision, jobID string, hold time.Duration, choice *TemplateChoice) (Approved, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return Approved{}, err
	}
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return Approved{}, fmt.Errorf("lead of draft %s: %w", d.ID, err)
	}
	switch d.Status {
	case store.DraftRejected:
		return Approved{}, &store.ConflictError{Draft: d}
	case store.DraftSuperseded:
		cur, err := tx.CurrentDraftID(h)
		if err != nil {
			return Approved{}, err
		}
		return Approved{}, &store.SupersededError{Draft: d, Current: cur}
	case store.DraftApproved:
		o, err := tx.Outbox(d.OutboxID)
		if err != nil {
			return Approved{}, fmt.Errorf("approved draft's outbox row %s: %w", d.OutboxID, err)
		}
		return Approved{Draft: d, Outbox: o}, nil
	}
	prov, ok := r.provider(d.Channel)
	if !ok {
		return Approved{}, &store.StateError{What: "draft " + d.ID, State: "in channel " + d.Channel + ", which is no longer configured", Want: "in a configured channel to be approved"}
	}
	ev, err := tx.EventByKey(d.EventKey)
	if err != nil {
		return Approved{}, fmt.Errorf("event %s of draft %s: %w", d.EventKey, d.ID, err)
	}
	var tpl *store.OutboxTemplate
	if choice != nil {
		// A template goes out whatever the window, as the provider's
		// rule allows: it replaces the draft's text.
		if tpl, err = r.template(d, ev, h, prov, *choice); err != nil {
			return Approved{}, err
		}
		dec.Text, dec.Edited = TemplateText(*tpl), false
	} else {
		if dec.Text == "" {
			dec.Text = d.Text
		}
		dec.Edited = dec.Text != d.Text
		if dec.By != autoApprover {
			measure(d, &dec) // quality.go: how much the person changed it
		}
		if err := r.fits(d, prov, dec.Text); err != nil {
			return Approved{}, err
		}
		if err := r.open(tx, d, h, dec.At, hold); err != nil {
			return Approved{}, err // window.go: the provider would refuse it
		}
	}
	to := Recipient(ev, h)
	if to == "" {
		return Approved{}, &store.StateError{What: "lead " + h.Key, State: "without a contact to send a reply to", Want: "reachable for draft " + d.ID + " to be approved; close it without a reply instead"}
	}
	o, err := delivery.CreateTx(tx, delivery.Reply{
		Draft: d, To: to, Text: dec.Text, Template: tpl, Provider: prov, By: dec.By, At: dec.At,
		JobID: jobID, MaxAttempts: r.maxAttempts, Hold: hold,
	})
	if err != nil {
		return Approved{}, err
	}
	old := d
	d.Decision, d.OutboxID, d.Status = &dec, o.ID, store.DraftApproved
	if err := tx.PutDraft(&old, &d); err != nil {
		return Approved{}, err
	}
	if err := leads.AnswerTx(tx, d); err != nil { // a newer message starts the next turn
		return Approved{}, err
	}
	detail := "approved as written"
	switch {
	case tpl != nil:
		detail = "answered with template " + tpl.Name + " instead of its text"
	case dec.Edited:
		detail = "approved with edited text"
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "approve draft", Target: d.ID, Detail: detail + "; outbox " + o.ID}); err != nil {
		return Approved{}, err
	}
	return Approved{Draft: d, Outbox: o, Created: true}, nil
}

// TooLongError refuses the approval of a reply longer than its provider's
// kind takes (kinds.Kind.MaxText): sending it could only fail.
type TooLongError struct {
	Draft    string
	Provider string // the provider's name
	Kind     string
	Length   int // kinds.TextLength of the reply
	Max      int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("the reply to draft %s is %d characters, and provider %s (%s) takes at most %d: shorten it by %d and approve again", e.Draft, e.Length, e.Provider, e.Kind, e.Max, e.Length-e.Max)
}

// fits refuses text, the reply to d, with a *TooLongError when provider
// prov's kind declares a longer text than it takes; a provider that is not
// configured (the built-in sandbox) declares none.
func (r *Review) fits(d store.Draft, prov, text string) error {
	p, ok := r.cfg.Provider(prov)
	if !ok {
		return nil
	}
	k, ok := kinds.Lookup(p.Kind)
	if !ok || k.MaxText == 0 {
		return nil
	}
	if n := kinds.TextLength(text); n > k.MaxText {
		return &TooLongError{Draft: d.ID, Provider: prov, Kind: k.Name, Length: n, Max: k.MaxText}
	}
	return nil
}

// Recipient is where a reply to ev, a message of lead h, goes: the
// message's contact, else the contact identified on the lead. Empty: the
// lead cannot be replied to, only closed.
func Recipient(ev store.Event, h store.Handoff) string {
	if ev.Contact != "" {
		return ev.Contact
	}
	return h.Contact
}

// Approve is ApproveTx in a transaction of its own, with a fresh job id.
func (r *Review) Approve(ctx context.Context, id string, dec store.Decision) (Approved, error) {
	var out Approved
	jobID := r.newID()
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = r.ApproveTx(tx, id, dec, jobID)
		return err
	})
	if err != nil {
		return Approved{}, fmt.Errorf("review: approve draft %s: %w", id, err)
	}
	return out, nil
}

// Rejected is the answer to Reject. Draft is embedded (not a named field as
// in Approved) so callers that read the draft's fields off the answer keep
// reading them there.
type Rejected struct {
	store.Draft
	Decided bool // false: an earlier rejection decided the draft; Draft.Decision says who
}

// RejectTx rejects draft id with dec, deciding inside tx whether this call
// is the one that rejects it. Rejecting it again writes nothing and answers
// the earlier rejection with Decided false; rejecting an approved draft is
// a *store.ConflictError.
func RejectTx(tx *store.Tx, id string, dec store.Decision) (Rejected, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return Rejected{}, err
	}
	switch d.Status {
	case store.DraftApproved:
		return Rejected{}, &store.ConflictError{Draft: d}
	case store.DraftRejected:
		return Rejected{Draft: d}, nil
	}
	old := d
	d.Decision, d.Status = &dec, store.DraftRejected
	if err := tx.PutDraft(&old, &d); err != nil {
		return Rejected{}, err
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "reject draft", Target: d.ID, Detail: dec.Reason}); err != nil {
		return Rejected{}, err
	}
	return Rejected{Draft: d, Decided: true}, nil
}

// Reject is RejectTx in a transaction of its own.
func (r *Review) Reject(ctx context.Context, id string, dec store.Decision) (Rejected, error) {
	var out Rejected
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = RejectTx(tx, id, dec)
		return err
	})
	if err != nil {
		return Rejected{}, fmt.Errorf("review: reject draft %s: %w", id, err)
	}
	return out, nil
}

// AutoApproveTx approves d, as just read or saved in tx, when its channel
// approves its drafts itself, and returns the draft as it now stands. A
// draft already decided is left as it is: a person's rejection stands, and
// an approval is idempotent.
func (r *Review) AutoApproveTx(tx *store.Tx, d store.Draft, now time.Time, jobID string) (store.Draft, error) {
	if d.Status != store.DraftPending || !r.autoApproves(d.Channel) {
		return d, nil
	}
	ev, err := tx.EventByKey(d.EventKey)
	if err != nil {
		return store.Draft{}, fmt.Errorf("event %s of draft %s: %w", d.EventKey, d.ID, err)
	}
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return store.Draft{}, fmt.Errorf("lead of draft %s: %w", d.ID, err)
	}
	if Recipient(ev, h) == "" {
		return d, nil // it waits for a person, who can only close the lead
	}
	if prov, ok := r.provider(d.Channel); ok && r.fits(d, prov, d.Text) != nil {
		return d, nil // too long for its provider: it waits for a person to shorten it
	}
	if d.Guards.Flagged() {
		return holdFlagged(tx, d, now) // quality.go: invented figures or the wrong language wait for a person
	}
	var closed *WindowClosedError
	if err := r.open(tx, d, h, now, 0); errors.As(err, &closed) {
		return d, nil // its window closed: it waits for a person to send a template instead
	} else if err != nil {
		return store.Draft{}, err
	}
	// Nobody is there to undo an auto-approval: it is sent at once.
	res, err := r.approveTx(tx, d.ID, store.Decision{By: autoApprover, At: now, From: "channel " + d.Channel}, jobID, 0, nil)
	if err != nil {
		return store.Draft{}, err
	}
	return res.Draft, nil
}

// autoApprover is who an auto-approval is by.
const autoApprover = "auto-approve"

// Record is the draft job's one write. In one transaction it saves d as
// version n of its event's draft (SaveTx; nil: the job found the draft
// already stored, and it is read again here), approves it when its channel
// auto-approves, and completes job, held by execution job.ExecutionID, as
// of now: a draft costs the job's claim and this one commit. then, when
// not nil, runs last in the same transaction: the draft job releases its
// budget hold there, so the budget never counts the call twice, as a hold
// and as a stored cost, nor misses it in between. A lease lost meanwhile
// (the reaper gave the job to another execution) still records the draft
// and the approval, but the job is not this execution's to complete; its
// next execution finds the draft and completes it.
func (r *Review) Record(ctx context.Context, job store.Job, d *store.Draft, n int, now time.Time, then func(tx *store.Tx) error) (store.Draft, error) {
	var out store.Draft
	jobID := r.newID() // the delivery job an auto-approval enqueues
	err := r.st.UpdateSavingDraft(ctx, job, d, func(tx *store.Tx) error {
		var err error
		switch {
		case d != nil:
			out, _, err = SaveTx(tx, *d, n, r.ViaCRM)
		default:
			out, err = tx.DraftByEvent(job.Key)
			if errors.Is(err, store.ErrNotFound) {
				// The job found its turn moved on before it drafted: it has
				// nothing to write, if the turn still has not come back to it.
				var t store.Turn
				if t, err = tx.TurnOf(job.Key); err == nil && t.Current {
					err = fmt.Errorf("the turn of %s waits for this job's draft, and none was stored", job.Key)
				}
				if err == nil {
					out = store.Draft{}
					return completeJob(tx, job, now, then)
				}
			}
		}
		if err != nil {
			return err
		}
		if out, err = r.AutoApproveTx(tx, out, now, jobID); err != nil {
			return err
		}
		return completeJob(tx, job, now, then)
	})
	if err != nil {
		return store.Draft{}, fmt.Errorf("review: record the draft of %s: %w", job.Key, err)
	}
	return out, nil
}

// completeJob completes job, held by its execution, unless its lease was
// lost meanwhile (then its next execution completes it), and runs then.
func completeJob(tx *store.Tx, job store.Job, now time.Time, then func(tx *store.Tx) error) error {
	if err := tx.CompleteJob(job.ID, job.ExecutionID, now); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	if then != nil {
		return then(tx)
	}
	return nil
}
