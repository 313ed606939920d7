package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestDraftID: a draft's id follows from its event (the same event always
// names the same draft), differs between events, and sorts like the events,
// so that drafts append at the right edge of their tree.
func TestDraftID(t *testing.T) {
	st := openTest(t)
	var ids []string
	for i, key := range []string{"web:1", "web:2", "sms:1"} {
		rec := record(t, st, key, t0.Add(time.Duration(i)*time.Millisecond))
		d, _, err := st.SaveDraft(context.Background(), draftFor(rec.Event, "hi", "ignored"))
		if err != nil {
			t.Fatalf("SaveDraft: %v", err)
		}
		if d.ID != DraftID(rec.Event.ID) {
			t.Errorf("stored draft id = %s, want DraftID(%s) = %s", d.ID, rec.Event.ID, DraftID(rec.Event.ID))
		}
		again, _, err := st.SaveDraft(context.Background(), draftFor(rec.Event, "other", "ignored"))
		if err != nil || again.ID != d.ID {
			t.Errorf("a second SaveDraft for %s named draft %s, %v; want %s", key, again.ID, err, d.ID)
		}
		ids = append(ids, d.ID)
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("draft ids %v: want distinct and in the order their events arrived", ids)
	}
}

// draftFor is a draft of ev as the draft job stores it.
func draftFor(ev Event, text, id string) Draft {
	return Draft{
		ID: id, EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
		ConversationID: ev.ConversationID, Text: text, Drafter: "template", CreatedAt: ev.ReceivedAt,
	}
}

// TestDraftsWhere: a filter keeps only what it accepts, pages with exact
// cursors, and a scan budget ends a page early with a cursor that resumes
// exactly where the scan stopped.
func TestDraftsWhere(t *testing.T) {
	st := openTest(t)
	var want []string
	for i := range 12 {
		rec := record(t, st, fmt.Sprintf("web:w-%02d", i), t0.Add(time.Duration(i)*time.Second))
		d, _, err := st.SaveDraft(context.Background(), Draft{EventKey: rec.Event.Key, Text: "hi", Owner: []string{"ann", "bob", "cy"}[i%3], CreatedAt: rec.Event.ReceivedAt})
		if err != nil {
			t.Fatal(err)
		}
		if d.Owner == "bob" {
			want = append(want, d.ID)
		}
	}
	bob := func(d Draft) bool { return d.Owner == "bob" }
	for _, tt := range []struct {
		name        string
		limit, scan int
	}{{"pages of 2, no budget", 2, 0}, {"pages of 3, budget 4", 3, 4}, {"pages of 10, budget 1", 10, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var after []byte
			for pages := 0; pages < 50; pages++ {
				page, next, partial, err := st.DraftsWhere(DraftFilter{Status: DraftPending, After: after, Limit: tt.limit, Keep: bob, Scan: tt.scan})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > tt.limit || (!partial && next != nil && len(page) != tt.limit) {
					t.Fatalf("page of %d (partial %v) with limit %d", len(page), partial, tt.limit)
				}
				for _, d := range page {
					got = append(got, d.ID)
				}
				if next == nil {
					break
				}
				after = next
			}
			if !slices.Equal(got, want) {
				t.Errorf("walked %v, want every bob draft once, in order: %v", got, want)
			}
		})
	}
}

// The fixtures below give the store's own tests approved, rejected and
// regenerated drafts. The rules are the review package's (review.Save,
// Approve, Reject), and the store's tests cannot import it (it imports the
// store): these write the same records in the same transactions, so tests of
// counts, indexes, retention, leads and Check see what review leaves behind.
// The rules themselves are proved in review's tests.

// SaveDraft stores d against its event key unless a draft is already stored
// there; it returns the stored draft and whether this call stored it. The
// first draft wins: a retry that raced a slower attempt reuses it. The same
// transaction moves the lead forward (matched, owned), so its status never
// claims more than what is stored.
func (s *Store) SaveDraft(ctx context.Context, draft Draft) (Draft, bool, error) {
	return s.SaveDraftVersion(ctx, draft, 1)
}

// Approval asks for a draft to be approved and sent.
type Approval struct {
	Decision
	Provider string // the channel's provider
	// ProviderFor, when set, names the provider of the draft's channel inside
	// the transaction (false: the channel is no longer configured); an
	// approval that already happened is answered without it.
	ProviderFor func(channel string) (string, bool)
	JobID       string // a ULID for the delivery job, minted by the caller
	MaxAttempts int
}

// Approved is the answer to ApproveDraft.
type Approved struct {
	Draft   Draft
	Outbox  Outbox
	Created bool // false: an earlier approval made the outbox row; Draft.Decision says who
}

// ApproveDraft approves draft id and, in the same transaction, creates its
// outbox row ("<conversation id>:<draft id>") and delivery job, unless an
// approval already did: then the existing row is returned and nothing is
// written. Approving a rejected draft is a *ConflictError.
func (s *Store) ApproveDraft(ctx context.Context, id string, approval Approval) (Approved, error) {
	var out Approved
	err := s.update(ctx, func(tx *Tx) error {
		out = Approved{}
		a := approval // a round may run twice: start from the caller's values
		d, err := tx.Draft(id)
		if err != nil {
			return err
		}
		switch d.Status {
		case DraftRejected:
			return &ConflictError{Draft: d}
		case DraftApproved:
			o, err := tx.Outbox(d.OutboxID)
			if err != nil {
				return fmt.Errorf("approved draft's outbox row %s: %w", d.OutboxID, err)
			}
			out = Approved{Draft: d, Outbox: o}
			return nil
		}
		if a.ProviderFor != nil {
			p, ok := a.ProviderFor(d.Channel)
			if !ok {
				return &StateError{What: "draft " + d.ID, State: "in channel " + d.Channel + ", which is no longer configured", Want: "in a configured channel to be approved"}
			}
			a.Provider = p
		}
		if a.Text == "" {
			a.Text = d.Text
		}
		a.Edited = a.Text != d.Text
		ev, err := tx.EventByKey(d.EventKey)
		if err != nil {
			return fmt.Errorf("event %s of draft %s: %w", d.EventKey, d.ID, err)
		}
		old := d
		dec := a.Decision
		d.Decision = &dec
		d.OutboxID = OutboxID(d.ConversationID, d.ID)
		o := Outbox{
			V: recordVersion, ID: d.OutboxID, DraftID: d.ID, EventKey: d.EventKey, CorrelationID: d.CorrelationID,
			Channel: d.Channel, ConversationID: d.ConversationID, To: ev.Contact, Text: a.Text,
			Provider: a.Provider, Status: OutboxPending, CreatedAt: a.At, UpdatedAt: a.At,
			ApprovedBy: a.By, Attempts: []OutboxAttempt{},
		}
		if err := insertOutbox(tx, o); err != nil {
			return err
		}
		if _, _, err := enqueue(tx, NewJob{ID: a.JobID, Kind: KindDeliver, Key: o.ID, MaxAttempts: a.MaxAttempts}, d.CorrelationID, a.At); err != nil {
			return err
		}
		d.Status = DraftApproved
		if err := tx.PutDraft(&old, &d); err != nil {
			return err
		}
		detail := "approved as written"
		if a.Edited {
			detail = "approved with edited text"
		}
		if err := writeAudit(tx, AuditEntry{At: a.At, Who: a.By, From: a.From, Action: "approve draft", Target: d.ID, Detail: detail + "; outbox " + o.ID}); err != nil {
			return err
		}
		out = Approved{Draft: d, Outbox: o, Created: true}
		return nil
	})
	if err != nil {
		return Approved{}, fmt.Errorf("store: approve draft %s: %w", id, err)
	}
	return out, nil
}

// Rejected is the answer to RejectDraft. Draft is embedded (not a named
// field as in Approved) so callers that read the draft's fields off the
// answer keep reading them there.
type Rejected struct {
	Draft
	Decided bool // false: an earlier rejection decided the draft; Draft.Decision says who
}

// RejectDraft rejects draft id, deciding inside one transaction whether this
// call is the one that rejects it. Rejecting it again writes nothing and
// answers the earlier rejection with Decided false; rejecting an approved
// draft is a *ConflictError.
func (s *Store) RejectDraft(ctx context.Context, id string, dec Decision) (Rejected, error) {
	var out Rejected
	err := s.update(ctx, func(tx *Tx) error {
		out = Rejected{} // a round may run twice: start from nothing
		d, err := tx.Draft(id)
		if err != nil {
			return err
		}
		switch d.Status {
		case DraftApproved:
			return &ConflictError{Draft: d}
		case DraftRejected:
			out = Rejected{Draft: d}
			return nil
		}
		old := d
		mine := dec
		d.Decision, d.Status = &mine, DraftRejected
		if err := tx.PutDraft(&old, &d); err != nil {
			return err
		}
		if err := writeAudit(tx, AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "reject draft", Target: d.ID, Detail: dec.Reason}); err != nil {
			return err
		}
		out = Rejected{Draft: d, Decided: true}
		return nil
	})
	if err != nil {
		return Rejected{}, fmt.Errorf("store: reject draft %s: %w", id, err)
	}
	return out, nil
}

// SaveDraftVersion stores a regenerated draft as version n of its event,
// unless version n (or later) is stored: then that one is returned. The
// draft it replaces is kept, rejected with a note if it was pending, and
// the event's index points at the new one.
func (s *Store) SaveDraftVersion(ctx context.Context, draft Draft, n int) (Draft, bool, error) {
	var (
		out     Draft
		created bool
	)
	err := s.update(ctx, func(tx *Tx) error {
		out, created = Draft{}, false
		d := draft // a round may run twice: start from the caller's values
		cur, err := tx.DraftByEvent(d.EventKey)
		hasCur := err == nil
		switch {
		case hasCur:
			// A record from before versions were counted (0) is version 1.
			if max(cur.Version, 1) >= n {
				out = cur
				return nil
			}
			if cur.Status == DraftApproved {
				return &StateError{What: "draft " + cur.ID, State: "approved", Want: "pending or rejected to be regenerated"}
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		ev, err := tx.EventByKey(d.EventKey)
		if err != nil {
			return fmt.Errorf("event %s: %w", d.EventKey, err)
		}
		d.V, d.Version, d.Status = recordVersion, n, DraftPending
		d.ID = DraftVersionID(ev.ID, n)
		d.Channel, d.ConversationID, d.CorrelationID = ev.Channel, ev.ConversationID, ev.CorrelationID
		if hasCur {
			d.Replaces = cur.ID
			if cur.Status == DraftPending {
				old := cur
				cur.Decision = &Decision{By: "regeneration", At: d.CreatedAt, Reason: "replaced by " + d.ID}
				cur.Status = DraftRejected
				if err := tx.PutDraft(&old, &cur); err != nil {
					return err
				}
			}
		}
		if err := insertDraft(tx, d, ev); err != nil {
			return err
		}
		if err := draftedFixture(tx, d, ev.Contact, d.CreatedAt); err != nil {
			return err
		}
		out, created = d, true
		return nil
	})
	if err != nil {
		return Draft{}, false, fmt.Errorf("store: save draft version %d for %s: %w", n, draft.EventKey, err)
	}
	return out, created, nil
}

// draftEventID undoes DraftVersionID for every version, and refuses what
// DraftVersionID never makes.
func TestDraftEventID(t *testing.T) {
	ev := "01M8YFBMBN5KCC251MVA1099F2"
	for _, n := range []int{0, 1, 2, 17} {
		if got, ok := draftEventID(DraftVersionID(ev, n)); !ok || got != ev {
			t.Errorf("draftEventID(DraftVersionID(%s, %d)) = %q, %v; want %s", ev, n, got, ok, ev)
		}
	}
	for _, id := range []string{"", "d", "x" + ev, "d" + ev[:20], "d" + ev + "x"} {
		if got, ok := draftEventID(id); ok {
			t.Errorf("draftEventID(%q) = %q; want no event", id, got)
		}
	}
}
