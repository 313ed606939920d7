package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A conversation turn is the inbound messages of one lead since its last
// approved reply (or since it was closed), and it has at most one live
// draft. The lead record keeps the open turn (Handoff.Turn, TurnEvents,
// TurnDraft); these are the record operations that keep it, each inside the
// transaction that stores what justifies the move, as the lead's other
// moves in handoffs.go:
//
//	new message, no open turn ─────────────▶ turn n+1 = [message], its draft job enqueued
//	new message, the turn's draft job queued ─▶ joins the turn; the job's due time moves to the
//	                                          new message's (the quiet period starts again)
//	new message, the turn's draft waiting ──▶ joins the turn; the draft is superseded and a
//	                                          draft job for the new message drafts the whole turn
//	new message, the draft job running ────▶ joins the turn; a draft job for the new message,
//	                                          held back until the running one's attempt ends
//	                                          (joinTurn: one draft job of a lead runs at a time)
//	new message, the draft job dead
//	or the draft rejected ──────────────────▶ joins the turn; a draft job for the new message
//	draft approved ─────────────────────────▶ the turn ends (its reply goes out)
//	lead closed ────────────────────────────▶ the turn ends without a reply
//
// The draft job's business key and the draft's event stay one event key
// (the turn's TurnDraft), so the draft id, DraftID of that event, and the
// outbox id "<conversation id>:<draft id>" keep every guarantee they had.

// receiveTurn is the ingest's lead step for ev, just inserted: the lead's
// move (a new lead, a replied or closed one: received, in a new cycle) and
// the turn rules above, with j (raw: its JSON, or nil) as the new message's
// draft job, due at j.RunAt (its quiet period). It returns the live draft
// job of the turn: j, or the queued job that ev joined.
func receiveTurn(tx *Tx, ev Event, j *Job, raw []byte) (Job, error) {
	key := LeadKey(ev.Channel, ev.ConversationID)
	h, err := tx.Handoff(key)
	isNew := errors.Is(err, ErrNotFound)
	if err != nil && !isNew {
		return Job{}, err
	}
	if isNew {
		h = Handoff{V: recordVersion, Key: key, Channel: ev.Channel, ConversationID: ev.ConversationID, Cycle: 1}
	}
	old := h
	ended := isNew || h.Status == HandoffReplied || h.Status == HandoffClosed
	if h.Turn == 0 && !ended && h.LastEventKey != "" {
		// A lead from before turns were kept: its latest message is its open turn.
		h.Turn, h.TurnEvents, h.TurnDraft = 1, []string{h.LastEventKey}, h.LastEventKey
	}
	if ended {
		h.TurnEvents, h.TurnDraft = nil, ""
	}
	live, note, err := joinTurn(tx, &h, ev, j, raw)
	if err != nil {
		return Job{}, err
	}
	h.LastEventKey = ev.Key
	if ev.Contact != "" && (h.Contact == "" || ended) {
		h.Contact = ev.Contact
	}
	if ev.Name != "" {
		h.Name = ev.Name // the search's index follows (idx_handoffs_by_term)
	}
	switch {
	case ended:
		if !isNew {
			h.Cycle++
		}
		h.Closed = nil
		msg := "message received"
		if old.Status == HandoffClosed {
			msg = "message received; the closed lead is reopened"
		}
		var stored *Handoff // nil: a new lead
		if !isNew {
			stored = &old // as stored: the contact and name may have changed above
		}
		return live, moveHandoffFrom(tx, stored, &h, HandoffReceived, ev.ReceivedAt, ev.Key, msg)
	case note != "":
		// The status stays (its stuck timer too); the history says why.
		h.History = append(slices.Clip(h.History), Transition{Cycle: h.Cycle, Status: h.Status, At: ev.ReceivedAt, EventKey: ev.Key, Note: note})
	}
	return live, tx.PutHandoff(&old, &h)
}

// joinTurn puts ev into h's open turn, or opens the next one, and returns
// the turn's live draft job and a note for the lead's history (empty: none).
//
// A lead has one draft job running at a time: when the job that drafts
// its turn (or the lead's newest, h.DraftJob, for a turn that ended) is
// running as the message arrives, the new message's job is enqueued held
// back behind it (waitFor) and released by the end of its attempt, in
// that transaction (store/jobs.go, endAttempt). Further messages meanwhile
// join the held job as they would any queued one. So a burst while a
// draft is written costs one more draft job, not one per message, and
// never two model calls at once for one lead.
func joinTurn(tx *Tx, h *Handoff, ev Event, j *Job, raw []byte) (Job, string, error) {
	note := ""
	var running *Job // the lead's draft job being written now
	if h.TurnDraft != "" {
		h.TurnEvents = append(slices.Clip(h.TurnEvents), ev.Key)
		live, err := tx.LiveJob(KindDraft, h.TurnDraft)
		switch {
		case err == nil && (live.State == JobAvailable || live.State == JobRetryable):
			// The draft is not being written yet: one draft for the whole
			// burst, once the lead has been quiet for the quiet period (for
			// a job held back behind a running one, once that one ended too).
			old := live
			moved := false
			if live.Waits != nil && j.RunAt.After(live.Waits.RunAt) {
				w := *live.Waits
				w.RunAt = j.RunAt
				live.Waits, moved = &w, true
			}
			if j.RunAt.After(live.RunAt) {
				live.RunAt, moved = j.RunAt, true
			}
			if moved {
				live.UpdatedAt = ev.ReceivedAt
				if err := tx.PutJob(&old, &live); err != nil {
					return Job{}, "", err
				}
			}
			return live, "", nil
		case err == nil && live.State == JobRunning:
			running = &live
		case err != nil && !errors.Is(err, ErrNotFound):
			return Job{}, "", err
		}
		switch d, err := tx.DraftByEvent(h.TurnDraft); {
		case err == nil && d.Status == DraftPending:
			if err := supersede(tx, d, DraftID(ev.ID), ev.Key, ev.ReceivedAt); err != nil {
				return Job{}, "", err
			}
			note = "message joins turn " + fmt.Sprint(h.Turn) + "; draft " + d.ID + " is superseded by " + DraftID(ev.ID)
		case err == nil && d.Status == DraftApproved:
			// The approval ends the turn (AnswerTurn); a record that still
			// names it is treated as ended.
			h.TurnDraft = ""
		case err != nil && !errors.Is(err, ErrNotFound):
			return Job{}, "", err
		}
	}
	if running == nil && h.DraftJob != "" {
		// The turn that job drafted ended (approved, written by a person,
		// closed) while it ran: the new turn's job waits for it all the same.
		switch k, err := tx.Job(h.DraftJob); {
		case err == nil && k.State == JobRunning:
			running = &k
		case err != nil && !errors.Is(err, ErrNotFound) && !tx.skip(err, nil):
			return Job{}, "", err
		}
	}
	if h.TurnDraft == "" {
		if h.Turn > 0 && h.Status != HandoffReplied && h.Status != HandoffClosed && h.Status != "" {
			note = fmt.Sprintf("message starts turn %d; the reply approved for turn %d still goes out", h.Turn+1, h.Turn)
		}
		h.Turn++
		h.TurnEvents = []string{ev.Key}
	}
	h.TurnDraft = ev.Key
	var k Job
	if running != nil {
		held := *j // the caller's stays as built: this function may run again
		k, j = waitFor(&held, *running), &held
		raw = nil // encoded again, here, as held back
	}
	live, created, err := enqueueEncoded(tx, j, raw)
	if err != nil || !created {
		return live, note, err
	}
	h.DraftJob = live.ID
	if running != nil {
		if err := tx.PutJob(running, &k); err != nil {
			return Job{}, "", err
		}
	}
	return live, note, nil
}

// supersede marks d, a waiting draft, superseded by draft by (the draft of
// the event eventKey that joined its turn) at at.
func supersede(tx *Tx, d Draft, by, eventKey string, at time.Time) error {
	old := d
	d.Status, d.SupersededBy = DraftSuperseded, by
	d.Decision = &Decision{By: "message " + eventKey, At: at, Reason: "superseded by " + by + ": the customer wrote again, and that draft answers the whole turn"}
	return tx.PutDraft(&old, &d)
}

// Turn is what a draft job reads of its lead's turn.
type Turn struct {
	Lead Handoff
	// Current is false when the turn no longer waits for this job's draft:
	// a newer message moved it on to another draft, or it ended (approved,
	// closed). Such a job has nothing to draft.
	Current bool
	// Events are the turn's messages, in the order they were recorded (the
	// job's own event alone on a lead from before turns were kept).
	Events []Event
}

// Keys are the event keys of the turn's messages.
func (t Turn) Keys() []string {
	keys := make([]string, len(t.Events))
	for i, ev := range t.Events {
		keys[i] = ev.Key
	}
	return keys
}

// TurnOf reads, in one read transaction, the turn that the draft of event
// eventKey answers.
func (s *Store) TurnOf(eventKey string) (Turn, error) {
	var t Turn
	err := s.view(func(tx *Tx) error {
		var err error
		t, err = tx.TurnOf(eventKey)
		return err
	})
	if err != nil {
		return Turn{}, fmt.Errorf("store: turn of %s: %w", eventKey, err)
	}
	return t, nil
}

// TurnOf reads the turn that the draft of event eventKey answers.
func (tx *Tx) TurnOf(eventKey string) (Turn, error) {
	ev, err := tx.EventByKey(eventKey)
	if err != nil {
		return Turn{}, err
	}
	h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		return Turn{}, fmt.Errorf("lead of %s: %w", eventKey, err)
	}
	t := Turn{Lead: h}
	switch {
	case h.Turn == 0:
		t.Current, t.Events = true, []Event{ev}
	case h.TurnDraft == eventKey:
		t.Current = true
		for _, k := range h.TurnEvents {
			e, err := tx.EventByKey(k)
			if errors.Is(err, ErrNotFound) && k != eventKey {
				continue // retention took an old message of a turn left open
			}
			if err != nil {
				return Turn{}, fmt.Errorf("event %s of the turn of lead %s: %w", k, h.Key, err)
			}
			t.Events = append(t.Events, e)
		}
	}
	return t, nil
}

// CurrentDraftID names the draft that answers the open turn of lead h: the
// stored draft of its TurnDraft event, or the id that draft will have once
// written. Empty when no turn is open.
func (tx *Tx) CurrentDraftID(h Handoff) (string, error) {
	if h.TurnDraft == "" {
		return "", nil
	}
	switch d, err := tx.DraftByEvent(h.TurnDraft); {
	case err == nil:
		return d.ID, nil
	case !errors.Is(err, ErrNotFound):
		return "", err
	}
	ev, err := tx.EventByKey(h.TurnDraft)
	if err != nil {
		return "", fmt.Errorf("event %s of lead %s: %w", h.TurnDraft, h.Key, err)
	}
	return DraftID(ev.ID), nil
}

// AnswerTurn ends the open turn of d's lead, d being the turn's draft just
// approved: a message recorded after this starts the next turn.
func (tx *Tx) AnswerTurn(d Draft) error {
	h, err := tx.Handoff(LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", d.ID, err)
	}
	if h.TurnDraft != d.EventKey {
		return nil
	}
	old := h
	h.TurnDraft, h.TurnEvents = "", nil
	return tx.PutHandoff(&old, &h)
}

// CloseLead ends the open turn of lead h (as read in this transaction)
// without a reply, as c says: the lead moves to closed, which no stuck
// alert watches, until a new message reopens it at received. Whether it
// may close is the caller's rule (review.CloseTx).
func (tx *Tx) CloseLead(h Handoff, c Closure) (Handoff, error) {
	h.TurnDraft, h.TurnEvents, h.Closed = "", nil, &c
	note := "closed without a reply by " + c.By
	if c.Reason != "" {
		note += ": " + c.Reason
	}
	if err := moveHandoff(tx, &h, HandoffClosed, c.At, h.LastEventKey, note); err != nil {
		return Handoff{}, err
	}
	return h, nil
}

// LiveJob returns the live job of kind and business key: ErrNotFound
// when none is live.
func (s *Store) LiveJob(kind, key string) (Job, error) {
	var j Job
	err := s.view(func(tx *Tx) error {
		var err error
		j, err = tx.LiveJob(kind, key)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("store: live %s job %s: %w", kind, key, err)
	}
	return j, nil
}

// Drafting is what the approval queue says about replies not drafted yet:
// how many messages wait for a draft, and whether drafting is failing.
type Drafting struct {
	Messages int // messages in open turns whose draft is not written yet
	Leads    int // leads those messages are from
	// Failing counts those leads whose draft job's last attempt failed
	// (retrying, or out of attempts: a dead letter), since FailingSince,
	// the first failure among them; LastError is the newest failure's.
	Failing      int
	FailingSince time.Time
	LastError    string
	// Failed names up to failedShown events whose draft job ran out of
	// attempts: a person can draft them again or close them.
	Failed []string
	// Partial: more draft jobs than draftingScan, so the numbers are a floor.
	Partial bool
}

// draftingScan bounds the draft jobs one overview reads, of each list
// (each costs its job, event, lead and draft): a backlog past it shows as
// "at least" (Partial).
const (
	draftingScan = 300
	failedShown  = 5
)

// Drafting reads, in one read transaction, the messages waiting for a draft:
// the live draft jobs, and the dead ones whose turn still waits, at most
// draftingScan of each.
func (s *Store) Drafting() (Drafting, error) { return s.DraftingFor(Everything()) }

// DraftingFor is Drafting for the channels v sees.
func (s *Store) DraftingFor(v Visible) (Drafting, error) {
	var out Drafting
	err := s.view(func(tx *Tx) error {
		out = Drafting{}
		var lastAt time.Time
		seen := map[string]bool{}
		see := func(j Job) error {
			if seen[j.Key] {
				return nil // an older dead job of a turn already counted
			}
			seen[j.Key] = true
			if !v.Key(j.Key) {
				return nil // another client's
			}
			ev, err := tx.EventByKey(j.Key)
			if errors.Is(err, ErrNotFound) || tx.skip(err, nil) {
				return nil // the event went with retention, or cannot be read (listed apart)
			}
			if err != nil {
				return err
			}
			h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID))
			if tx.skip(err, nil) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("lead of %s: %w", j.Key, err)
			}
			waiting := len(h.TurnEvents)
			if h.Turn == 0 {
				waiting = 1 // a lead from before turns were kept
			} else if h.TurnDraft != j.Key {
				return nil // the turn moved on, or ended
			}
			if d, err := tx.DraftByEvent(j.Key); err == nil && d.Status == DraftPending {
				return nil // waiting for a person, not for a draft
			}
			out.Leads++
			out.Messages += waiting
			if j.LastError == "" || j.State == JobRunning && j.Attempt <= 1 {
				return nil
			}
			out.Failing++
			for _, a := range j.Attempts {
				if a.Error != "" && a.EndedAt != nil {
					if out.FailingSince.IsZero() || a.EndedAt.Before(out.FailingSince) {
						out.FailingSince = *a.EndedAt
					}
					break
				}
			}
			if j.UpdatedAt.After(lastAt) {
				lastAt, out.LastError = j.UpdatedAt, j.LastError
			}
			if j.State == JobDiscarded && len(out.Failed) < failedShown {
				out.Failed = append(out.Failed, j.Key)
			}
			return nil
		}
		prefix := append([]byte(KindDraft), 0)
		c := tx.bucket(bucketJobsUnique).Cursor()
		n := 0
		for k, val := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
			if !v.Key(string(k[len(prefix):])) {
				continue // another client's: its key (the event's) says so, undecoded
			}
			if n++; n > draftingScan {
				out.Partial = true
				break
			}
			j, err := tx.Job(string(val))
			if tx.skip(err, nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("unique index points at job %s: %w", val, err)
			}
			if err := see(j); err != nil {
				return err
			}
		}
		n = 0
		dc := tx.bucket(bucketJobsDead).Cursor()
		for k, _ := dc.Last(); k != nil; k, _ = dc.Prev() { // newest first
			if n++; n > draftingScan {
				out.Partial = true
				break
			}
			j, err := tx.Job(string(k))
			if tx.skip(err, nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("dead-letter index points at job %s: %w", k, err)
			}
			if j.Kind != KindDraft {
				continue
			}
			if _, err := tx.LiveJob(KindDraft, j.Key); err == nil {
				continue // drafted again: counted above
			}
			if err := see(j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Drafting{}, fmt.Errorf("store: drafting: %w", err)
	}
	return out, nil
}

// DraftCounts reads the number of drafts in each status (DraftStatuses)
// from the counts in meta: a few keys, however many drafts there are.
func (s *Store) DraftCounts() (map[DraftStatus]int, error) {
	out := map[DraftStatus]int{}
	err := s.view(func(tx *Tx) error {
		for _, st := range DraftStatuses {
			out[st] = count(tx, draftCountKey(st))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: draft counts: %w", err)
	}
	return out, nil
}
