package store

import (
	"context"
	"errors"
	"fmt"
)

// Erased stands where an erase removed a customer's words.
const Erased = "[erased]"

// eraseChunk bounds the records one erase transaction rewrites, so a large
// client's erase never holds the writer for long; each next transaction
// resumes after the last lead the previous one finished.
const eraseChunk = 500

// EraseResult counts what an erase rewrote, and the leads it left alone.
type EraseResult struct {
	Leads   int `json:"leads"`
	Events  int `json:"events"`
	Drafts  int `json:"drafts"`
	Outbox  int `json:"outbox"`
	Sandbox int `json:"sandbox"`
	// Busy are the leads left as they were because work on them is still
	// running: a draft being written or waiting for a decision, or a reply
	// being sent (erasing them would draft or send "[erased]"). Decide or
	// close them and erase again.
	Busy []string `json:"busy,omitempty"`
}

// Erase removes what sub's customers wrote and were sent: each event's
// text, name, contact and body, each draft's text, raw model output,
// fields and edited reply, each outbox row's text and address, the
// sandbox's copies, and the lead's contact. What stays is what keeps the
// system honest: every key and id (so a redelivered webhook is still
// recognised as a duplicate by its event key, and replies are not sent
// twice), statuses, times, counts and the audit log. It runs in write
// transactions of at most eraseChunk records; audit is written with the
// first one, and an entry with the counts with the last.
func (s *Store) Erase(ctx context.Context, sub Subject, audit AuditEntry) (EraseResult, error) {
	var total EraseResult
	after, first := "", true
	for {
		var res EraseResult
		var last string
		var done bool
		err := s.update(ctx, func(tx *Tx) error {
			res, last, done = EraseResult{}, after, false
			if first {
				if err := writeAudit(tx, audit); err != nil {
					return err
				}
			}
			budget := eraseChunk
			err := eachLeadAfter(tx, sub, after, func(h Handoff) (bool, error) {
				n, busy, err := eraseLead(tx, h, &res)
				if err != nil {
					return false, err
				}
				if busy {
					res.Busy = append(res.Busy, h.Key)
				}
				last, budget = h.Key, budget-n
				return budget > 0, nil
			})
			if err != nil {
				return err
			}
			done = budget > 0 // the walk ended before the budget did
			if done {
				sum := total.add(res)
				e := audit
				e.ID, e.Action = "", audit.Action+" done"
				e.Detail = fmt.Sprintf("%d leads: %d events, %d drafts, %d outbox rows, %d sandbox messages erased; %d leads busy, left as they were", sum.Leads, sum.Events, sum.Drafts, sum.Outbox, sum.Sandbox, len(sum.Busy))
				return writeAudit(tx, e)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("store: erase %s: %w", sub.Client, err)
		}
		total, after, first = total.add(res), last, false
		if done {
			return total, nil
		}
	}
}

// add is r and o counted together.
func (r EraseResult) add(o EraseResult) EraseResult {
	r.Leads += o.Leads
	r.Events += o.Events
	r.Drafts += o.Drafts
	r.Outbox += o.Outbox
	r.Sandbox += o.Sandbox
	r.Busy = append(append([]string(nil), r.Busy...), o.Busy...)
	return r
}

// eraseLead erases lead h unless work on it is running (busy). n is how
// many records it read, for the chunk's budget.
func eraseLead(tx *Tx, h Handoff, res *EraseResult) (n int, busy bool, err error) {
	var events []Event
	err = eachLeadEvent(tx, h.Key, func(ev Event) error {
		events = append(events, ev)
		// Only "not found" means not busy: any other read error stops the
		// erase, or a damaged index could erase a reply still being sent.
		switch _, err := tx.LiveJob(KindDraft, ev.Key); {
		case err == nil:
			busy = true
		case !errors.Is(err, ErrNotFound):
			return err
		}
		for _, d := range draftsOf(tx, ev.Key) {
			if d.Status == DraftPending {
				busy = true
			}
			if d.OutboxID == "" {
				continue
			}
			o, err := tx.Outbox(d.OutboxID)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				return err
			case o.Status == OutboxPending || o.Status == OutboxEffectPending:
				busy = true
			}
		}
		return nil
	})
	if err != nil || busy {
		return len(events) + 1, busy, err
	}
	for i := range events {
		old := events[i]
		ev := old
		ev.Text, ev.Name, ev.Contact, ev.Subject, ev.Body, ev.BodyText, ev.TextAt = Erased, "", "", "", nil, "", nil
		if !(old.Text == Erased && old.Body == nil && old.Contact == "" && old.Name == "" && old.Subject == "" && old.BodyText == "") {
			if err := tx.putEvent(&old, &ev); err != nil {
				return 0, false, err
			}
			res.Events++
		}
		for _, d := range draftsOf(tx, ev.Key) {
			if err := eraseDraft(tx, d, res); err != nil {
				return 0, false, err
			}
		}
	}
	alerts, err := leadAlerts(tx, h.Key)
	if err != nil {
		return 0, false, err
	}
	for _, o := range alerts {
		if (o.Status == OutboxPending || o.Status == OutboxEffectPending) && o.Kind != OutboxEvent {
			continue // still being sent; its text names the lead, not the customer's words
		}
		// An outbound event's text is its body, the customer's words and
		// contact: erased even while it waits, so it is never posted (its
		// sink refuses an erased body for good).
		if err := eraseOutbox(tx, o, res); err != nil {
			return 0, false, err
		}
	}
	if h.Contact != "" || h.Name != "" {
		old := h
		h.Contact, h.Name = "", ""
		if err := tx.PutHandoff(&old, &h); err != nil {
			return 0, false, err
		}
	}
	res.Leads++
	return len(events) + 1, false, nil
}

// eraseDraft erases draft d and the reply row it was approved into; its
// cards are left for their surfaces to delete (cards.go).
func eraseDraft(tx *Tx, d Draft, res *EraseResult) error {
	if err := eraseCards(tx, d.ID); err != nil {
		return err
	}
	old := d
	d.Text, d.Raw, d.Fields = Erased, "", nil
	if d.Decision != nil {
		dec := *d.Decision
		if dec.Text != "" {
			dec.Text = Erased
		}
		if dec.Reason != "" {
			dec.Reason = Erased
		}
		d.Decision = &dec
	}
	if old.Text != Erased || old.Raw != "" || old.Fields != nil || d.Decision != nil && *d.Decision != *old.Decision {
		if err := tx.PutDraft(&old, &d); err != nil {
			return err
		}
		res.Drafts++
	}
	if d.OutboxID == "" {
		return nil
	}
	o, err := tx.Outbox(d.OutboxID)
	if err != nil {
		return nil // not approved into a row, or the row went with retention
	}
	return eraseOutbox(tx, o, res)
}

// eraseOutbox erases row o and the sandbox's copy of it.
func eraseOutbox(tx *Tx, o Outbox, res *EraseResult) error {
	if o.Text != Erased || o.To != Erased {
		old := o
		o.Text, o.To = Erased, Erased
		if err := tx.PutOutbox(&old, &o); err != nil {
			return err
		}
		res.Outbox++
	}
	b := tx.bucket(bucketSandbox)
	var m SandboxMessage
	if getJSON(b, []byte(o.ID), &m) != nil || m.Text == Erased && m.To == Erased {
		return nil
	}
	m.Text, m.To = Erased, Erased
	if err := putJSON(b, []byte(o.ID), &m); err != nil {
		return err
	}
	res.Sandbox++
	return nil
}
