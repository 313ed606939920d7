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

func TestSaveDraftFirstWinsUnderConcurrency(t *testing.T) {
	st := openTest(t)
	rec := record(t, st, "web:lead-7", t0)
	const n = 20
	got := make([]Draft, n)
	created := make([]bool, n)
	errs := make([]error, n)
	together(n, func(i int) {
		got[i], created[i], errs[i] = st.SaveDraft(context.Background(), Draft{
			EventKey: rec.Event.Key, CorrelationID: rec.Event.CorrelationID,
			Channel: rec.Event.Channel, ConversationID: rec.Event.ConversationID,
			Text: fmt.Sprint("draft from caller ", i), Drafter: "template",
			Fields: map[string]string{"caller": fmt.Sprint(i)}, ExecutionID: fmt.Sprint("exec-", i), CreatedAt: t0,
		})
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: SaveDraft: %v", i, errs[i])
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("callers %d and %d both stored a draft", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no caller stored the draft")
	}
	want := fmt.Sprint("draft from caller ", winner)
	for i, d := range got {
		if d.Text != want || d.ExecutionID != fmt.Sprint("exec-", winner) || d.Fields["caller"] != fmt.Sprint(winner) || len(d.Fields) != 1 {
			t.Errorf("caller %d got draft %q exec %s fields %v, want the first one %q", i, d.Text, d.ExecutionID, d.Fields, want)
		}
		if d.ID != DraftID(rec.Event.ID) || d.Status != DraftPending {
			t.Errorf("caller %d got id %s status %s, want %s %s", i, d.ID, d.Status, DraftID(rec.Event.ID), DraftPending)
		}
	}
	stored, err := st.DraftByEvent(rec.Event.Key)
	if err != nil {
		t.Fatalf("DraftByEvent: %v", err)
	}
	if stored.Text != want {
		t.Errorf("stored draft = %q, want %q", stored.Text, want)
	}
	if k := countKeys(t, st, bucketDrafts); k != 1 {
		t.Errorf("drafts bucket holds %d drafts, want 1", k)
	}
}

func TestSaveDraftUnknownEvent(t *testing.T) {
	st := openTest(t)
	record(t, st, "web:known", t0)
	_, created, err := st.SaveDraft(context.Background(), Draft{EventKey: "web:unknown", Text: "hi"})
	if !errors.Is(err, ErrNotFound) || created {
		t.Fatalf("SaveDraft for an unknown event = created %v err %v, want ErrNotFound", created, err)
	}
	if _, err := st.DraftByEvent("web:unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DraftByEvent(unknown) err = %v, want ErrNotFound", err)
	}
	if _, err := st.DraftByEvent("web:known"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DraftByEvent(known, no draft yet) err = %v, want ErrNotFound", err)
	}
}

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

// TestApproveDraftChannelGone: a draft whose channel left the configuration
// cannot be newly approved, but an approval that already happened is still
// answered as one.
func TestApproveDraftChannelGone(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	gone := func(string) (string, bool) { return "", false }
	here := func(string) (string, bool) { return "sandbox", true }
	var ids []string
	for _, key := range []string{"web:gone-1", "web:gone-2"} {
		rec := record(t, st, key, t0)
		d, _, err := st.SaveDraft(ctx, Draft{EventKey: rec.Event.Key, Text: "hi", CreatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	var state *StateError
	if _, err := st.ApproveDraft(ctx, ids[0], Approval{Decision: Decision{By: "ann", At: t0}, ProviderFor: gone, JobID: ulid.Make().String(), MaxAttempts: 1}); !errors.As(err, &state) {
		t.Errorf("approving a draft of a removed channel: %v, want a StateError", err)
	}
	first, err := st.ApproveDraft(ctx, ids[1], Approval{Decision: Decision{By: "ann", At: t0}, ProviderFor: here, JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil || first.Outbox.Provider != "sandbox" {
		t.Fatalf("approve: %v, provider %q", err, first.Outbox.Provider)
	}
	again, err := st.ApproveDraft(ctx, ids[1], Approval{Decision: Decision{By: "bob", At: t0}, ProviderFor: gone, JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil || again.Created || again.Outbox.ID != first.Outbox.ID || again.Draft.Decision.By != "ann" {
		t.Errorf("a second approval after the channel went: %+v, %v; want the first approval back", again, err)
	}
}

// TestRejectDraftDecidesOnce: of concurrent rejections of one draft, exactly
// one reports that it made the decision; the others get that decision back,
// and a later rejection by the same person is answered as already made.
func TestRejectDraftDecidesOnce(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rec := record(t, st, "web:reject-race", t0)
	d, _, err := st.SaveDraft(ctx, draftFor(rec.Event, "Hi Ada", ""))
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	const n = 2
	got := make([]Rejected, n)
	errs := make([]error, n)
	together(n, func(i int) {
		got[i], errs[i] = st.RejectDraft(ctx, d.ID, Decision{By: fmt.Sprint("person-", i), At: t0.Add(time.Duration(i) * time.Second), Reason: fmt.Sprint("reason ", i)})
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: RejectDraft: %v", i, errs[i])
		}
		if got[i].Decided {
			if winner >= 0 {
				t.Fatalf("callers %d and %d both report they rejected the draft", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no caller reports it rejected the draft")
	}
	by := fmt.Sprint("person-", winner)
	for i, r := range got {
		if r.ID != d.ID || r.Status != DraftRejected || r.Decision == nil || r.Decision.By != by {
			t.Errorf("caller %d: draft %s %s decided by %+v; want %s rejected by the winner %s", i, r.ID, r.Status, r.Decision, d.ID, by)
		}
	}

	again, err := st.RejectDraft(ctx, d.ID, Decision{By: by, At: t0.Add(time.Hour), Reason: "once more"})
	if err != nil || again.Decided || again.Decision.By != by || !again.Decision.At.Equal(got[winner].Decision.At) || again.Decision.Reason != got[winner].Decision.Reason {
		t.Errorf("the same person rejecting again: %+v, %v; want the first rejection back, not decided by this call", again, err)
	}
	log, err := st.AuditLog(50)
	if err != nil {
		t.Fatal(err)
	}
	rejections := 0
	for _, e := range log {
		if e.Action == "reject draft" && e.Target == d.ID {
			rejections++
		}
	}
	if rejections != 1 {
		t.Errorf("%d audit entries for rejecting %s, want 1", rejections, d.ID)
	}
}
