package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// A person's decision can be taken back for the undo window (undo_window):
// an approval while its reply is held (delivery.HeldTx: the outbox row's
// undo_until), a rejection and a close for the same window from when they
// were made. Each undo is one check-then-write in one transaction with its
// audit entry; after the window it is an *delivery.UndoError (409).

// What an undo takes back (Undone.What, Undoable.What).
const (
	UndoApproval  = "approval"
	UndoRejection = "rejection"
	UndoClose     = "close"
)

// Undone is the answer to Undo.
type Undone struct {
	What   string       // UndoApproval or UndoRejection
	Draft  store.Draft  // the draft, waiting for approval again
	Outbox store.Outbox // an approval's reply taken back, as it was before it was deleted; zero for a rejection
}

// UndoTx takes back the approval of draft id, by dec.By at dec.At, in the
// caller's write transaction: the reply's outbox row and its delivery job
// are deleted (delivery.UndoTx: only while the row is pending, its job
// never claimed and the undo window open), the draft waits for approval
// again, the lead's turn is open again with the draft's messages, and the
// lead's history and the audit say who undid it. Refusals are
// *delivery.UndoError: a draft that is not approved, a reply already being
// sent, or a lead whose customer wrote again after the approval (the next
// turn has begun: the approved reply still answers the earlier one).
func UndoTx(tx *store.Tx, id string, dec store.Decision) (Undone, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return Undone{}, err
	}
	h, err := approvalUndoable(tx, d)
	if err != nil {
		return Undone{}, err
	}
	o, err := delivery.UndoTx(tx, d.OutboxID, dec.At)
	if err != nil {
		return Undone{}, err
	}
	approved := d.Decision
	old := d
	d.Status, d.Decision, d.OutboxID = store.DraftPending, nil, ""
	if err := tx.PutDraft(&old, &d); err != nil {
		return Undone{}, err
	}
	oldLead := h
	if h.Turn > 0 { // a lead from before turns were kept has no turn to reopen
		h.TurnDraft, h.TurnEvents = d.EventKey, slices.Clone(d.AnsweredEvents())
	}
	note := "approval of " + d.ID + " undone by " + dec.By + "; the draft waits for approval again"
	h.History = append(slices.Clip(h.History), store.Transition{Cycle: h.Cycle, Status: h.Status, At: dec.At, EventKey: d.EventKey, Note: note})
	if err := tx.PutHandoff(&oldLead, &h); err != nil {
		return Undone{}, err
	}
	detail := "approval undone by " + dec.By + " before the reply was sent; outbox " + o.ID + " deleted"
	if approved != nil {
		detail += " (approved by " + approved.By + " at " + approved.At.UTC().Format("15:04:05 UTC")
		if approved.Edited {
			detail += ", with edited text, which is discarded"
		}
		detail += ")"
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "undo approval", Target: d.ID, Detail: detail}); err != nil {
		return Undone{}, err
	}
	return Undone{What: UndoApproval, Draft: d, Outbox: o}, nil
}

// approvalUndoable is what UndoTx checks of approved draft d before its
// reply's row (delivery.HeldTx): it returns d's lead.
func approvalUndoable(tx *store.Tx, d store.Draft) (store.Handoff, error) {
	if d.Status != store.DraftApproved || d.OutboxID == "" {
		return store.Handoff{}, &delivery.UndoError{Why: fmt.Sprintf("draft %s is %s, not approved; there is no approval to undo", d.ID, d.Status)}
	}
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return store.Handoff{}, fmt.Errorf("lead of draft %s: %w", d.ID, err)
	}
	if h.TurnDraft != "" || h.Status == leads.Closed || !slices.Contains(d.AnsweredEvents(), h.LastEventKey) {
		return store.Handoff{}, &delivery.UndoError{OutboxID: d.OutboxID, Why: "the customer wrote again after the approval, so a new turn has begun; the reply can no longer be undone"}
	}
	return h, nil
}

// UndoRejectionTx takes back a person's rejection of draft id, by dec.By
// at dec.At, inside the undo window from the rejection: the draft waits
// for approval again, with the audit entry, in the caller's transaction.
// Refused (*delivery.UndoError) after the window, for a draft rejected by
// something other than RejectTx (a regeneration, a close: undo the close),
// or when the lead's turn moved on (a newer version of the draft, the
// customer wrote again, a new draft being written).
func (r *Review) UndoRejectionTx(tx *store.Tx, id string, dec store.Decision) (Undone, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return Undone{}, err
	}
	if err := r.rejectionUndoable(tx, d, dec.At); err != nil {
		return Undone{}, err
	}
	rejected := *d.Decision
	old := d
	d.Status, d.Decision = store.DraftPending, nil
	if err := tx.PutDraft(&old, &d); err != nil {
		return Undone{}, err
	}
	detail := "rejection undone by " + dec.By + " (rejected by " + rejected.By + " at " + rejected.At.UTC().Format("15:04:05 UTC")
	if rejected.Reason != "" {
		detail += ": " + rejected.Reason
	}
	detail += "); the draft waits for approval again"
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "undo rejection", Target: d.ID, Detail: detail}); err != nil {
		return Undone{}, err
	}
	return Undone{What: UndoRejection, Draft: d}, nil
}

// RejectionUndoUntil is when the rejection of d (rejected) stops being
// undoable by its decision alone: a person's rejection, undo_window after
// it; false for a draft replaced by a newer version (no person rejected
// it). The lead's state can end it sooner (rejectionUndoable).
func RejectionUndoUntil(cfg *config.Config, d store.Draft) (time.Time, bool) {
	dec := d.Decision
	if d.Status != store.DraftRejected || dec == nil || dec.By == "regeneration" || dec.By == "turn" {
		return time.Time{}, false
	}
	return dec.At.Add(cfg.UndoWindow), true
}

// rejectionUndoable says why d's rejection cannot be taken back as of now
// (nil: it can).
func (r *Review) rejectionUndoable(tx *store.Tx, d store.Draft, now time.Time) error {
	dec := d.Decision
	if d.Status != store.DraftRejected || dec == nil {
		return &delivery.UndoError{Why: fmt.Sprintf("draft %s is %s, not rejected; there is no rejection to undo", d.ID, d.Status)}
	}
	until, byPerson := RejectionUndoUntil(r.cfg, d)
	if !byPerson {
		return &delivery.UndoError{Why: "draft " + d.ID + " was replaced by a newer version, not rejected by a person; there is no rejection to undo"}
	}
	if !now.Before(until) {
		return &delivery.UndoError{Why: "the undo window of this rejection ended at " + until.UTC().Format("15:04:05 UTC") + "; it can no longer be undone"}
	}
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of draft %s: %w", d.ID, err)
	}
	if h.Status == leads.Closed {
		return &delivery.UndoError{Why: "the lead was closed with this rejection; undo the close instead"}
	}
	if h.Turn > 0 && h.TurnDraft != d.EventKey {
		return &delivery.UndoError{Why: "the customer wrote again after the rejection, so a new turn has begun; the rejection can no longer be undone"}
	}
	switch cur, err := tx.DraftByEvent(d.EventKey); {
	case err != nil:
		return err
	case cur.ID != d.ID:
		return &delivery.UndoError{Why: "a newer draft (" + cur.ID + ") replaced this one; the rejection can no longer be undone"}
	}
	switch _, err := tx.LiveJob(KindDraft, d.EventKey); {
	case err == nil:
		return &delivery.UndoError{Why: "a new draft of this conversation is being written; the rejection can no longer be undone"}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	return nil
}

// UndoTx takes back the decision of draft id made inside the undo window,
// whichever it was: an approval (UndoTx) or a rejection (UndoRejectionTx).
func (r *Review) UndoTx(tx *store.Tx, id string, dec store.Decision) (Undone, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return Undone{}, err
	}
	if d.Status == store.DraftRejected {
		return r.UndoRejectionTx(tx, id, dec)
	}
	return UndoTx(tx, id, dec)
}

// Undo is UndoTx in a transaction of its own.
func (r *Review) Undo(ctx context.Context, id string, dec store.Decision) (Undone, error) {
	var out Undone
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = r.UndoTx(tx, id, dec)
		return err
	})
	if err != nil {
		return Undone{}, fmt.Errorf("review: undo the decision of draft %s: %w", id, err)
	}
	return out, nil
}

// Reopened is the answer to UndoClose.
type Reopened struct {
	Lead store.Handoff // open again
	// Draft is the turn's draft, waiting for approval again; nil when the
	// turn had none (its draft job writes it, enqueued again if it had
	// ended meanwhile: Job).
	Draft *store.Draft
	Job   *store.Job
}

// UndoCloseTx takes back the close of lead key (CloseTx), by dec.By at
// dec.At, inside the undo window from the close, in the caller's
// transaction: the lead goes back to the status it was closed from, with
// its open turn (leads.ReopenTx); the draft the close rejected waits for
// approval again (or one a draft job stored meanwhile, superseded because
// the turn had ended); a turn left with neither a draft nor a live draft
// job gets a new draft job; and the audit says who undid it. Refused
// (*delivery.UndoError) after the window, for a lead that is not closed (a
// new message reopened it: that message starts a new turn), or a closure
// from before the closed turn was kept.
func (r *Review) UndoCloseTx(tx *store.Tx, key string, dec store.Decision) (Reopened, error) {
	h, err := tx.Handoff(key)
	if err != nil {
		return Reopened{}, err
	}
	if err := r.closeUndoable(h, dec.At); err != nil {
		return Reopened{}, err
	}
	closed := *h.Closed
	var out Reopened
	if h.Turn > 0 {
		if out.Draft, out.Job, err = r.reopenDraft(tx, closed, dec.At); err != nil {
			return Reopened{}, err
		}
	}
	if out.Lead, err = leads.ReopenTx(tx, h, dec.By, dec.At, closed.TurnDraft, closed.TurnEvents); err != nil {
		return Reopened{}, err
	}
	detail := "close undone by " + dec.By + " (closed by " + closed.By + " at " + closed.At.UTC().Format("15:04:05 UTC") + ": " + closed.Reason + "); the lead is " + string(out.Lead.Status) + " again"
	if out.Draft != nil {
		detail += " and draft " + out.Draft.ID + " waits for approval"
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "undo close", Target: h.Key, Detail: detail}); err != nil {
		return Reopened{}, err
	}
	return out, nil
}

// closeUndoable says why lead h's close cannot be taken back as of now
// (nil: it can).
func (r *Review) closeUndoable(h store.Handoff, now time.Time) error {
	c := h.Closed
	if h.Status != leads.Closed || c == nil {
		return &delivery.UndoError{Why: "lead " + h.Key + " is " + string(h.Status) + ", not closed; there is no close to undo (a new message reopens a closed lead)"}
	}
	if until := c.At.Add(r.cfg.UndoWindow); !now.Before(until) {
		return &delivery.UndoError{Why: "the undo window of this close ended at " + until.UTC().Format("15:04:05 UTC") + "; it can no longer be undone"}
	}
	if h.Turn > 0 && c.TurnDraft == "" {
		return &delivery.UndoError{Why: "this close was made before handoff kept the turn it ended, so it cannot be undone; the next message reopens the lead"}
	}
	return nil
}

// reopenDraft puts back the draft of the turn closure c ended: the one it
// rejected, or one stored meanwhile as superseded (its turn had ended);
// with neither, it makes sure a draft job will write one.
func (r *Review) reopenDraft(tx *store.Tx, c store.Closure, now time.Time) (*store.Draft, *store.Job, error) {
	d, err := tx.DraftByEvent(c.TurnDraft)
	switch {
	case err == nil:
		closedIt := d.Status == store.DraftRejected && d.Decision != nil && d.Decision.By == c.By && d.Decision.At.Equal(c.At)
		endedIt := d.Status == store.DraftSuperseded && d.SupersededBy == ""
		if !closedIt && !endedIt {
			return nil, nil, nil // decided before the close (a person's rejection stands)
		}
		old := d
		d.Status, d.Decision, d.SupersededBy = store.DraftPending, nil, ""
		if err := tx.PutDraft(&old, &d); err != nil {
			return nil, nil, err
		}
		return &d, nil, nil
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, err
	}
	switch j, err := tx.LiveJob(KindDraft, c.TurnDraft); {
	case err == nil:
		return nil, &j, nil // still writing it; the turn waits for it again
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, err
	}
	ev, err := tx.EventByKey(c.TurnDraft)
	if err != nil {
		return nil, nil, fmt.Errorf("event %s of the closed turn: %w", c.TurnDraft, err)
	}
	j, _, err := jobs.Enqueue(tx, DraftArgs{EventKey: c.TurnDraft}, jobs.Opts{MaxAttempts: r.maxAttempts, CorrelationID: ev.CorrelationID, Now: now})
	if err != nil {
		return nil, nil, err
	}
	return nil, &j, nil
}

// UndoClose is UndoCloseTx in a transaction of its own.
func (r *Review) UndoClose(ctx context.Context, key string, dec store.Decision) (Reopened, error) {
	var out Reopened
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = r.UndoCloseTx(tx, key, dec)
		return err
	})
	if err != nil {
		return Reopened{}, fmt.Errorf("review: undo the close of lead %s: %w", key, err)
	}
	return out, nil
}

// Undoable is one decision a person can still take back: the undo stack's
// entry (web/undo.go).
type Undoable struct {
	What  string        // UndoApproval, UndoRejection or UndoClose
	Draft store.Draft   // the draft decided; a close's: the draft it rejected (zero when none)
	Lead  store.Handoff // the draft's lead, or the lead closed
	Event store.Event   // the message the draft answers (a close: the lead's latest), for the customer's name
	To    string        // an approval's recipient
	At    time.Time     // when the decision was made
	Until time.Time     // when its undo window ends
}

// Key is what names the entry in a request: the draft id, a close's lead key.
func (u Undoable) Key() string {
	if u.What == UndoClose {
		return u.Lead.Key
	}
	return u.Draft.ID
}

const (
	// undoScan bounds the audit entries one read of the stack decodes:
	// every person's actions of the last undo window, newest first.
	undoScan = 2000
	// UndoShown bounds the entries the stack lists (a bulk approval holds
	// up to 100 replies).
	UndoShown = 100
)

// UndoableTx lists, newest first, the decisions by who that can still be
// undone as of now (at most UndoShown): its approvals whose reply is held,
// its rejections and closes inside the undo window. It reads the audit of
// the last window (store.EachAuditSince, bounded by undoScan), then each
// decision's record as it stands, with the checks the undo itself makes, so
// an entry listed is one the undo accepts at that moment. It writes nothing.
func (r *Review) UndoableTx(tx *store.Tx, who string, now time.Time) ([]Undoable, error) {
	if r.cfg.UndoWindow <= 0 {
		return nil, nil
	}
	var out []Undoable
	seen := map[string]bool{}
	err := tx.EachAuditSince(now.Add(-r.cfg.UndoWindow-time.Second), undoScan, func(e store.AuditEntry) error {
		if e.Who != who || seen[e.Target] || len(out) >= UndoShown {
			return nil
		}
		// The record says what stands now, whichever entry led to it (an
		// approval undone and made again has two entries, perhaps of one
		// millisecond, in either order): each target is listed once.
		u, ok, err := r.undoable(tx, e, now)
		if ok {
			seen[e.Target] = true
			out = append(out, u)
		}
		return err
	})
	slices.SortStableFunc(out, func(a, b Undoable) int { return b.At.Compare(a.At) }) // the audit's keys order a millisecond by chance
	return out, err
}

// undoable is the stack's entry of audit entry e when what it did can still
// be undone as of now.
func (r *Review) undoable(tx *store.Tx, e store.AuditEntry, now time.Time) (Undoable, bool, error) {
	var u Undoable
	switch e.Action {
	case "approve draft", "reject draft":
		d, err := tx.Draft(e.Target)
		if errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
			return u, false, nil
		}
		if err != nil {
			return u, false, err
		}
		if d.Decision == nil || d.Decision.By != e.Who {
			return u, false, nil
		}
		u.Draft, u.At = d, d.Decision.At
		if e.Action == "approve draft" {
			h, err := approvalUndoable(tx, d)
			if err != nil {
				return u, false, ignoreRefusal(err)
			}
			o, err := tx.Outbox(d.OutboxID)
			if errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
				return u, false, nil
			}
			if err != nil {
				return u, false, err
			}
			if _, err := delivery.HeldTx(tx, o, now); err != nil {
				return u, false, ignoreRefusal(err)
			}
			u.What, u.Lead, u.To, u.Until = UndoApproval, h, o.To, o.UndoUntil
		} else {
			if err := r.rejectionUndoable(tx, d, now); err != nil {
				return u, false, ignoreRefusal(err)
			}
			h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
			if err != nil {
				return u, false, err
			}
			u.What, u.Lead, u.Until = UndoRejection, h, d.Decision.At.Add(r.cfg.UndoWindow)
		}
		ev, err := tx.EventByKey(d.EventKey)
		if err != nil && !errors.Is(err, store.ErrNotFound) && !tx.Skip(err) {
			return u, false, err
		}
		u.Event = ev
		return u, true, nil
	case "close lead":
		h, err := tx.Handoff(e.Target)
		if errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
			return u, false, nil
		}
		if err != nil {
			return u, false, err
		}
		if h.Closed == nil || h.Closed.By != e.Who {
			return u, false, nil
		}
		if err := r.closeUndoable(h, now); err != nil {
			return u, false, ignoreRefusal(err)
		}
		u.What, u.Lead, u.At, u.Until = UndoClose, h, h.Closed.At, h.Closed.At.Add(r.cfg.UndoWindow)
		if d, err := tx.DraftByEvent(h.Closed.TurnDraft); err == nil {
			u.Draft = d
		}
		ev, err := tx.EventByKey(h.LastEventKey)
		if err != nil && !errors.Is(err, store.ErrNotFound) && !tx.Skip(err) {
			return u, false, err
		}
		u.Event = ev
		return u, true, nil
	}
	return u, false, nil
}

// ignoreRefusal drops an undo's refusal (the entry is simply not listed)
// and keeps any other error.
func ignoreRefusal(err error) error {
	var refused *delivery.UndoError
	if errors.As(err, &refused) {
		return nil
	}
	return err
}

// Undoable is UndoableTx in a read transaction of its own.
func (r *Review) Undoable(who string, now time.Time) ([]Undoable, error) {
	var out []Undoable
	err := r.st.View(func(tx *store.Tx) error {
		var err error
		out, err = r.UndoableTx(tx, who, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("review: what %s can undo: %w", who, err)
	}
	return out, nil
}
