package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// The fixtures below give the store's own tests the leads that an ingest,
// a stored draft and a sent reply leave behind. The rules are the leads
// package's (leads.RecordTx, DraftedTx, ReplyTx), and the store's tests
// cannot import it (it imports the store): these write the same records in
// the same transactions for the cases the store's tests build — a first
// message opens a turn with its own draft job, a later one joins the
// turn's queued job or opens the next turn, a draft moves the lead to
// matched and owned, a reply to its latest message to replied — so tests
// of counts, indexes, search, retention, erase and Check see what leads
// leaves behind. The rules themselves (held-back draft jobs, superseded
// drafts, reopened leads) are proved in leads' tests.

// The statuses as the leads package declares them (leads.Statuses), named
// here for the store's tests alone.
const (
	HandoffReceived HandoffStatus = "received"
	HandoffMatched  HandoffStatus = "matched"
	HandoffOwned    HandoffStatus = "owned"
	HandoffReplied  HandoffStatus = "replied"
	HandoffClosed   HandoffStatus = "closed"
)

// allHandoffStatuses are those statuses in leads.Statuses' order.
var allHandoffStatuses = []HandoffStatus{HandoffReceived, HandoffMatched, HandoffOwned, HandoffReplied, HandoffClosed}

// RecordEvent (fixture) encodes ev and job and records them (Record).
func (s *Store) RecordEvent(ctx context.Context, ev Event, job NewJob) (Recorded, error) {
	e, err := EncodeEvent(ev, job)
	if err != nil {
		return Recorded{}, err
	}
	return s.Record(ctx, e)
}

// Record (fixture) is leads.Record: the event, its lead and its turn's
// draft job in one transaction.
func (s *Store) Record(ctx context.Context, e *Encoded) (Recorded, error) {
	var out Recorded
	err := s.Update(ctx, func(tx *Tx) error {
		var err error
		out, err = recordRaw(tx, &e.ev, e.evRaw, &e.j, e.jobRaw)
		return err
	})
	if err != nil {
		return Recorded{}, fmt.Errorf("store: record event %s: %w", e.ev.Key, err)
	}
	return out, nil
}

// recordRaw (fixture) is leads.RecordTx with the event and its job already
// encoded as evRaw and jobRaw.
func recordRaw(tx *Tx, ev *Event, evRaw []byte, j *Job, jobRaw []byte) (Recorded, error) {
	rec, err := recordEvent(tx, ev, evRaw)
	if err != nil || !rec.Created {
		return rec, err
	}
	rec.Job, err = receiveFixture(tx, rec.Event, j, jobRaw)
	return rec, err
}

// receiveFixture is leads.ReceiveTx for the cases above.
func receiveFixture(tx *Tx, ev Event, j *Job, raw []byte) (Job, error) {
	h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID))
	isNew := errors.Is(err, ErrNotFound)
	if err != nil && !isNew {
		return Job{}, err
	}
	if isNew {
		h = NewHandoff(ev.Channel, ev.ConversationID)
	}
	old := h
	ended := isNew || h.Status == HandoffReplied || h.Status == HandoffClosed
	if ended {
		h.TurnEvents, h.TurnDraft = nil, ""
	}
	var live Job
	joined := false
	if h.TurnDraft != "" {
		if q, err := tx.LiveJob(KindDraft, h.TurnDraft); err == nil && (q.State == JobAvailable || q.State == JobRetryable) {
			if j.RunAt.After(q.RunAt) {
				was := q
				q.RunAt, q.UpdatedAt = j.RunAt, ev.ReceivedAt
				if err := tx.PutJob(&was, &q); err != nil {
					return Job{}, err
				}
			}
			live, joined = q, true
		}
	}
	if !joined {
		k, created, err := enqueueEncoded(tx, j, raw)
		if err != nil {
			return Job{}, err
		}
		if created {
			h.DraftJob = k.ID
		}
		live = k
		if h.TurnDraft == "" {
			h.Turn++
			h.TurnEvents = nil
		}
		h.TurnDraft = ev.Key
	}
	h.TurnEvents = append(slices.Clip(h.TurnEvents), ev.Key)
	h.LastEventKey = ev.Key
	if ev.Contact != "" && (h.Contact == "" || ended) {
		h.Contact = ev.Contact
	}
	if ev.Name != "" {
		h.Name = ev.Name
	}
	if !ended {
		return live, tx.PutHandoff(&old, &h)
	}
	if !isNew {
		h.Cycle++
	}
	h.Closed = nil
	var stored *Handoff
	if !isNew {
		stored = &old
	}
	return live, moveFixture(tx, stored, &h, HandoffReceived, ev.ReceivedAt, ev.Key, "message received")
}

// moveFixture is the leads package's move: h into status at now, its
// transition recorded.
func moveFixture(tx *Tx, old, h *Handoff, status HandoffStatus, now time.Time, eventKey, note string) error {
	h.Status, h.Since = status, now
	h.History = append(slices.Clip(h.History), Transition{Cycle: h.Cycle, Status: status, At: now, EventKey: eventKey, Note: note})
	return tx.PutHandoff(old, h)
}

// draftedFixture is leads.DraftedTx: matched when the draft identifies a
// contact, owned when it names an owner.
func draftedFixture(tx *Tx, d Draft, contact string, now time.Time) error {
	h, err := tx.Handoff(LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", d.EventKey, err)
	}
	if h.Status == HandoffReceived && (contact != "" || d.Fields["email"] != "" || d.Fields["phone"] != "") {
		old := h
		h.Contact = cmpOr(contact, d.Fields["email"], d.Fields["phone"])
		if err := moveFixture(tx, &old, &h, HandoffMatched, now, d.EventKey, "contact identified"); err != nil {
			return err
		}
	}
	if h.Status == HandoffMatched && d.Owner != "" {
		old := h
		h.Owner = d.Owner
		return moveFixture(tx, &old, &h, HandoffOwned, now, d.EventKey, "routed to "+d.Owner+" by "+d.RuleVersion+" "+d.Rule)
	}
	return nil
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// replyFixture is leads.ReplyTx: a reply sent to the lead's latest message
// (its draft's turn holds it) moves an open lead to replied.
func replyFixture(tx *Tx, o Outbox, now time.Time) error {
	if o.Kind == OutboxAlert {
		return nil
	}
	h, err := tx.Handoff(LeadKey(o.Channel, o.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", o.ID, err)
	}
	latest := h.LastEventKey == o.EventKey
	if !latest && o.DraftID != "" {
		if d, err := tx.Draft(o.DraftID); err == nil {
			latest = slices.Contains(d.AnsweredEvents(), h.LastEventKey)
		}
	}
	if h.Status == HandoffReplied || h.Status == HandoffClosed || !latest {
		return nil
	}
	old := h
	return moveFixture(tx, &old, &h, HandoffReplied, now, o.EventKey, "reply "+o.ID+" sent")
}

// hoT0 is the fixed clock of the lead fixtures' tests.
var hoT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// hoReceive records one inbound message of lead web:<conv> at at.
func hoReceive(t *testing.T, st *Store, key, conv, contact string, at time.Time) Event {
	t.Helper()
	ev := Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key, CorrelationID: ulid.Make().String(),
		ConversationID: conv, Contact: contact, Text: "message " + key, ReceivedAt: at,
	}
	rec, err := st.RecordEvent(context.Background(), ev, NewJob{ID: ulid.Make().String(), Kind: "draft", Key: key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = created %v, %v", key, rec.Created, err)
	}
	return rec.Event
}

// hoSaveDraft stores a draft for ev routed to owner, with fields, at at.
func hoSaveDraft(t *testing.T, st *Store, ev Event, owner string, fields map[string]string, at time.Time) Draft {
	t.Helper()
	d, created, err := st.SaveDraft(context.Background(), Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Text: "reply to " + ev.Key, Drafter: "template", PromptVersion: "v1", Fields: fields,
		Owner: owner, RuleVersion: "r1", Rule: "default", ExecutionID: ulid.Make().String(), CreatedAt: at,
	})
	if err != nil || !created {
		t.Fatalf("SaveDraft(%s) = created %v, %v", ev.Key, created, err)
	}
	return d
}

// allHandoffs lists every lead, by status then longest waiting first
// (leads.List with no filter).
func allHandoffs(st *Store) ([]Handoff, error) {
	var out []Handoff
	err := st.View(func(tx *Tx) error {
		out = out[:0]
		for _, s := range allHandoffStatuses {
			if err := tx.EachHandoff(s, time.Time{}, func(h Handoff) (bool, error) {
				out = append(out, h)
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// hoLead reads lead web:<conv>.
func hoLead(t *testing.T, st *Store, conv string) Handoff {
	t.Helper()
	h, err := st.Handoff(LeadKey("web", conv))
	if err != nil {
		t.Fatalf("Handoff(%s): %v", LeadKey("web", conv), err)
	}
	return h
}
