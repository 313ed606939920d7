package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// deadFixture fills st with jobs dead jobs (discarded draft jobs), failed
// failed replies, unsure replies that need reconciliation, one failed reply
// taken off the list and one sent reply: what the list and its counts are
// made of.
func deadFixture(t *testing.T, st *Store, jobs, failed, unsure int) {
	t.Helper()
	ctx := context.Background()
	for i := range jobs {
		rec := record(t, st, fmt.Sprintf("web:dead-%03d", i), t0)
		run := claimOne(t, st, t0.Add(time.Hour), time.Minute)
		if run.ID != rec.Job.ID {
			t.Fatalf("claimed %s, want the job of dead-%03d", run.ID, i)
		}
		if _, err := st.FinishJob(ctx, run.ID, run.ExecutionID, t0.Add(time.Hour), Result{Outcome: OutcomeDiscarded, Err: "the model refused"}); err != nil {
			t.Fatal(err)
		}
	}
	// The replies: approved, then moved to their status as delivery would.
	n := 0
	for _, g := range []struct {
		status    OutboxStatus
		count     int
		dismissed bool
	}{{OutboxFailed, failed, false}, {OutboxNeedsReconciliation, unsure, false}, {OutboxFailed, 1, true}, {OutboxSent, 1, false}} {
		for range g.count {
			_, res := approvedReply(t, st, fmt.Sprintf("web:reply-%03d", n))
			n++
			err := st.Update(ctx, func(tx *Tx) error {
				o, err := tx.Outbox(res.Outbox.ID)
				if err != nil {
					return err
				}
				old := o
				o.Status = g.status
				if g.dismissed {
					o.Dismissed = &Dismissal{By: "boss", At: t0, Reason: "handled by phone"}
				}
				return tx.PutOutbox(&old, &o)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dlIDs lists the items' ids.
func dlIDs(dls []DeadLetter) []string {
	out := make([]string, 0, len(dls))
	for _, dl := range dls {
		out = append(out, dl.ID)
	}
	return out
}

// TestDeadLetterPages walks the list a page at a time, forwards then
// backwards, under several filters: every item once, in the list's order,
// each page's neighbours where they should be; and the counts count a reply
// that needs reconciliation once, not among the dead letters too.
func TestDeadLetterPages(t *testing.T) {
	st := openTest(t)
	deadFixture(t, st, 23, 17, 9)

	c, err := st.Counts(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DeadLetters() != 23+17 || c.NeedsReconciliation != 9 {
		t.Errorf("counts: %d dead letters, %d to reconcile; want 40 and 9 (each item counted once)", c.DeadLetters(), c.NeedsReconciliation)
	}

	for _, tc := range []struct {
		name string
		f    DeadLetterFilter
		want int
	}{
		{"the dashboard's list", DeadLetterFilter{NoReconcile: true}, 23 + 17},
		{"the API's list", DeadLetterFilter{}, 23 + 17 + 9},
		{"replies only", DeadLetterFilter{Kind: DeadOutbox, NoReconcile: true}, 17},
		{"jobs only", DeadLetterFilter{Kind: DeadJob}, 23},
		{"by error", DeadLetterFilter{Error: "MODEL REFUSED", NoReconcile: true}, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := tc.f
			all.Limit = 1000
			whole, err := st.DeadLetters(all, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(whole) != tc.want {
				t.Fatalf("the whole list has %d items, want %d", len(whole), tc.want)
			}
			for _, size := range []int{1, 7, tc.want, tc.want + 5} {
				var pages [][]string
				var seen []string
				after := ""
				for {
					p, err := st.DeadLetterPage(tc.f, nil, after, "", size)
					if err != nil {
						t.Fatalf("size %d after %q: %v", size, after, err)
					}
					if len(p.Items) == 0 || len(p.Items) > size {
						t.Fatalf("size %d after %q: %d items", size, after, len(p.Items))
					}
					if (after == "") != (p.Prev == "") {
						t.Errorf("size %d page %d: prev %q, want one on every page but the first", size, len(pages)+1, p.Prev)
					}
					pages = append(pages, dlIDs(p.Items))
					seen = append(seen, dlIDs(p.Items)...)
					if p.Next == "" {
						break
					}
					if len(pages) > tc.want {
						t.Fatalf("size %d: more pages than items; the cursors go round: %v", size, pages)
					}
					after = p.Next
				}
				if !slices.Equal(seen, dlIDs(whole)) {
					t.Fatalf("size %d: the pages hold %d items %v,\nwant the list's %d in order %v", size, len(seen), seen, len(whole), dlIDs(whole))
				}
				if want := (tc.want + size - 1) / size; len(pages) != want {
					t.Errorf("size %d: %d pages, want %d", size, len(pages), want)
				}
				// Backwards from the last page's Prev: the same pages, last to first.
				p, err := st.DeadLetterPage(tc.f, nil, after, "", size)
				if err != nil {
					t.Fatal(err)
				}
				for i := len(pages) - 2; i >= 0; i-- {
					if p.Prev == "" {
						t.Fatalf("size %d: page %d has no prev", size, i+2)
					}
					if p, err = st.DeadLetterPage(tc.f, nil, "", p.Prev, size); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(dlIDs(p.Items), pages[i]) {
						t.Errorf("size %d: page %d backwards is %v, want %v", size, i+1, dlIDs(p.Items), pages[i])
					}
					if p.Next == "" {
						t.Errorf("size %d: page %d backwards has no next", size, i+1)
					}
				}
				if p.Prev != "" {
					t.Errorf("size %d: the first page, reached backwards, has prev %q", size, p.Prev)
				}
			}
		})
	}

	// Who wrote and what: from the event, for jobs and replies alike, once
	// the judge has said which event a job is about (a draft job's key is
	// its event's, as review's rules say).
	draftEvent := func(_ *Tx, dl *DeadLetter) {
		if dl.Job != nil {
			dl.EventKey = dl.Job.Key
		}
	}
	p, err := st.DeadLetterPage(DeadLetterFilter{}, draftEvent, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range p.Items {
		if dl.Customer != "Ada" || dl.Message != "hello from "+dl.EventKey || dl.Outbox != nil && dl.Outbox.Text != "Hi Ada, thanks for "+dl.EventKey {
			t.Errorf("%s: customer %q message %q, want Ada and the event's text", dl.ID, dl.Customer, dl.Message)
		}
	}

	for _, bad := range []string{"x", "z:01ABC", "n:" + p.Items[0].ID} {
		f := DeadLetterFilter{NoReconcile: true} // no "n" (needs_reconciliation) section
		if _, err := st.DeadLetterPage(f, nil, bad, "", 5); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: err %v, want ErrBadCursor", bad, err)
		}
	}
	if _, err := st.DeadLetterPage(DeadLetterFilter{}, nil, p.Items[0].ID, p.Items[1].ID, 5); !errors.Is(err, ErrBadCursor) {
		t.Errorf("after and before together: err %v, want ErrBadCursor", err)
	}
}

// TestDeadLetterPageAfterAGone: the item a cursor names may leave the list
// (replayed, cancelled) before the next page is asked for; the page goes on
// from where it was, losing and repeating nothing.
func TestDeadLetterPageAfterAGone(t *testing.T) {
	st := openTest(t)
	deadFixture(t, st, 0, 6, 0)
	f := DeadLetterFilter{NoReconcile: true}
	first, err := st.DeadLetterPage(f, nil, "", "", 3)
	if err != nil {
		t.Fatal(err)
	}
	last := first.Items[2]
	err = st.Update(context.Background(), func(tx *Tx) error {
		o, err := tx.Outbox(last.ID)
		if err != nil {
			return err
		}
		old := o
		o.Status = OutboxPending // replayed: off the list
		return tx.PutOutbox(&old, &o)
	})
	if err != nil {
		t.Fatal(err)
	}
	next, err := st.DeadLetterPage(f, nil, first.Next, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := st.DeadLetters(DeadLetterFilter{NoReconcile: true, Limit: 100}, nil)
	if want := dlIDs(whole)[2:]; !slices.Equal(dlIDs(next.Items), want) {
		t.Errorf("the page after a gone item: %v, want %v", dlIDs(next.Items), want)
	}
}
