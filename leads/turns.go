package leads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/handoff/handoff/store"
)

// A conversation turn is the inbound messages of one lead since its last
// approved reply (or since it was closed), and it has at most one live
// draft. The lead record keeps the open turn (Handoff.Turn, TurnEvents,
// TurnDraft); these are its rules, each inside the transaction that stores
// what justifies the move, as the lead's other moves (moves.go):
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
//	draft approved ─────────────────────────▶ the turn ends (AnswerTx; its reply goes out)
//	lead closed ────────────────────────────▶ the turn ends without a reply (CloseTx)
//
// The draft job's business key and the draft's event stay one event key
// (the turn's TurnDraft), so the draft id, DraftID of that event, and the
// outbox id "<conversation id>:<draft id>" keep every guarantee they had.
//
// The rules live here rather than in intake because every concept that
// ends or reads a turn (review's approval and close, the draft worker,
// delivery's reply) stands below intake, which imports the queue's kinds;
// leads imports the store alone, so each of them can call it in its own Tx.

// Record is the ingest's one transaction for e: RecordTx in a write
// transaction of its own.
func Record(ctx context.Context, st *store.Store, e *store.Encoded) (store.Recorded, error) {
	var out store.Recorded
	err := st.UpdateIngest(ctx, []*store.Encoded{e}, func(tx *store.Tx) error {
		var err error
		out, err = RecordTx(tx, e)
		return err
	})
	if err != nil {
		return store.Recorded{}, fmt.Errorf("leads: record event %s: %w", e.Key(), err)
	}
	return out, nil
}

// RecordEvent encodes ev and its draft job and records them (Record): the
// ingest of one event built by hand, as the tests and fixtures build them
// (intake.Record is the webhook's way in).
func RecordEvent(ctx context.Context, st *store.Store, ev store.Event, job store.NewJob) (store.Recorded, error) {
	e, err := store.EncodeEvent(ev, job)
	if err != nil {
		return store.Recorded{}, err
	}
	return Record(ctx, st, e)
}

// RecordTx is the ingest inside the caller's transaction: unless the
// event's key is taken, the event and its index entries (tx.Record), its
// lead's move (received; a new cycle on a replied or closed lead) and its
// turn, with the draft job e carries or the turn's queued one; a duplicate
// raises the first event's count and writes nothing else.
func RecordTx(tx *store.Tx, e *store.Encoded) (store.Recorded, error) {
	rec, err := tx.Record(e)
	if err != nil || !rec.Created {
		return rec, err
	}
	j, raw := e.DraftJob()
	if rec.Job, err = ReceiveTx(tx, rec.Event, j, raw); err != nil {
		return store.Recorded{}, err
	}
	return rec, nil
}

// ReceiveTx is the lead step of ev, an event just stored in tx: the lead's
// move (a new lead, a replied or closed one: received, in a new cycle) and
// the turn rules above, with j (raw: its JSON, or nil) as the new message's
// draft job, due at j.RunAt (its quiet period). It returns the live draft
// job of the turn: j, or the queued job that ev joined.
func ReceiveTx(tx *store.Tx, ev store.Event, j *store.Job, raw []byte) (store.Job, error) {
	h, err := tx.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	isNew := errors.Is(err, store.ErrNotFound)
	if err != nil && !isNew {
		return store.Job{}, err
	}
	if isNew {
		h = store.NewHandoff(ev.Channel, ev.ConversationID)
	}
	old := h
	ended := isNew || !Open(h.Status)
	if h.Turn == 0 && !ended && h.LastEventKey != "" {
		// A lead from before turns were kept: its latest message is its open turn.
		h.Turn, h.TurnEvents, h.TurnDraft = 1, []string{h.LastEventKey}, h.LastEventKey
	}
	if ended {
		h.TurnEvents, h.TurnDraft = nil, ""
	}
	live, note, err := joinTurn(tx, &h, ev, j, raw)
	if err != nil {
		return store.Job{}, err
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
		if old.Status == Closed {
			msg = "message received; the closed lead is reopened"
		}
		var stored *store.Handoff // nil: a new lead
		if !isNew {
			stored = &old // as stored: the contact and name may have changed above
		}
		return live, move(tx, stored, &h, Received, ev.ReceivedAt, ev.Key, msg)
	case note != "":
		// The status stays (its stuck timer too); the history says why.
		h.History = append(slices.Clip(h.History), store.Transition{Cycle: h.Cycle, Status: h.Status, At: ev.ReceivedAt, EventKey: ev.Key, Note: note})
	}
	return live, tx.PutHandoff(&old, &h)
}

// joinTurn puts ev into h's open turn, or opens the next one, and returns
// the turn's live draft job and a note for the lead's history (empty: none).
//
// A lead has one draft job running at a time: when the job that drafts
// its turn (or the lead's newest, h.DraftJob, for a turn that ended) is
// running as the message arrives, the new message's job is enqueued held
// back behind it (store.HoldBehind) and released by the end of its
// attempt, in that transaction (store/jobs.go, endAttempt). Further
// messages meanwhile join the held job as they would any queued one. So a
// burst while a draft is written costs one more draft job, not one per
// message, and never two model calls at once for one lead.
func joinTurn(tx *store.Tx, h *store.Handoff, ev store.Event, j *store.Job, raw []byte) (store.Job, string, error) {
	note := ""
	var running *store.Job // the lead's draft job being written now
	if h.TurnDraft != "" {
		h.TurnEvents = append(slices.Clip(h.TurnEvents), ev.Key)
		live, err := tx.LiveJob(store.KindDraft, h.TurnDraft)
		switch {
		case err == nil && (live.State == store.JobAvailable || live.State == store.JobRetryable):
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
					return store.Job{}, "", err
				}
			}
			return live, "", nil
		case err == nil && live.State == store.JobRunning:
			running = &live
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return store.Job{}, "", err
		}
		switch d, err := tx.DraftByEvent(h.TurnDraft); {
		case err == nil && d.Status == store.DraftPending:
			if err := supersede(tx, d, store.DraftID(ev.ID), ev.Key, ev.ReceivedAt); err != nil {
				return store.Job{}, "", err
			}
			note = "message joins turn " + fmt.Sprint(h.Turn) + "; draft " + d.ID + " is superseded by " + store.DraftID(ev.ID)
		case err == nil && d.Status == store.DraftApproved:
			// The approval ends the turn (AnswerTx); a record that still
			// names it is treated as ended.
			h.TurnDraft = ""
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return store.Job{}, "", err
		}
	}
	if running == nil && h.DraftJob != "" {
		// The turn that job drafted ended (approved, written by a person,
		// closed) while it ran: the new turn's job waits for it all the same.
		switch k, err := tx.Job(h.DraftJob); {
		case err == nil && k.State == store.JobRunning:
			running = &k
		case err != nil && !errors.Is(err, store.ErrNotFound) && !tx.Skip(err):
			return store.Job{}, "", err
		}
	}
	if h.TurnDraft == "" {
		if h.Turn > 0 && Open(h.Status) {
			note = fmt.Sprintf("message starts turn %d; the reply approved for turn %d still goes out", h.Turn+1, h.Turn)
		}
		h.Turn++
		h.TurnEvents = []string{ev.Key}
	}
	h.TurnDraft = ev.Key
	var k store.Job
	if running != nil {
		held := *j // the caller's stays as built: this function may run again
		k, j = store.HoldBehind(&held, *running), &held
		raw = nil // encoded again, here, as held back
	}
	live, created, err := tx.EnqueueEncoded(j, raw)
	if err != nil || !created {
		return live, note, err
	}
	h.DraftJob = live.ID
	if running != nil {
		if err := tx.PutJob(running, &k); err != nil {
			return store.Job{}, "", err
		}
	}
	return live, note, nil
}

// supersede marks d, a waiting draft, superseded by draft by (the draft of
// the event eventKey that joined its turn) at at: the one draft move the
// turn rules make, in the message's transaction.
func supersede(tx *store.Tx, d store.Draft, by, eventKey string, at time.Time) error {
	old := d
	d.Status, d.SupersededBy = store.DraftSuperseded, by
	d.Decision = &store.Decision{By: "message " + eventKey, At: at, Reason: "superseded by " + by + ": the customer wrote again, and that draft answers the whole turn"}
	return tx.PutDraft(&old, &d)
}

// AnswerTx ends the open turn of d's lead, d being the turn's draft just
// approved in tx: a message recorded after this starts the next turn.
func AnswerTx(tx *store.Tx, d store.Draft) error {
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
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
