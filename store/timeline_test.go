package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestTimeline: an event's timeline holds the event, its jobs, its drafts,
// the outbox row once approved and the lead; an unknown key is ErrNotFound.
func TestTimeline(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rec := record(t, st, "web:tl-1", t0)

	tl, err := st.Timeline("web:tl-1")
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	if tl.Event.ID != rec.Event.ID || len(tl.Jobs) != 1 || tl.Jobs[0].Kind != "draft" {
		t.Errorf("fresh timeline: event %s with jobs %v, want %s with its draft job", tl.Event.ID, tl.Jobs, rec.Event.ID)
	}
	if tl.Draft != nil || tl.Drafts == nil || len(tl.Drafts) != 0 || tl.Outbox != nil {
		t.Errorf("fresh timeline: draft %v, drafts %v, outbox %v; want none, an empty list, none", tl.Draft, tl.Drafts, tl.Outbox)
	}
	if tl.Handoff == nil || tl.Handoff.Status != HandoffReceived {
		t.Errorf("fresh timeline: lead %v, want received", tl.Handoff)
	}

	d, _, err := st.SaveDraft(ctx, Draft{EventKey: "web:tl-1", Text: "reply", Drafter: "template", PromptVersion: "v1", ExecutionID: "x", CreatedAt: t0.Add(time.Second)})
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "ann", At: t0.Add(2 * time.Second)}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
	if err != nil {
		t.Fatalf("ApproveDraft: %v", err)
	}
	if tl, err = st.Timeline("web:tl-1"); err != nil {
		t.Fatalf("Timeline after approval: %v", err)
	}
	if tl.Draft == nil || tl.Draft.ID != d.ID || tl.Draft.Status != DraftApproved || len(tl.Drafts) != 1 || tl.Drafts[0].ID != d.ID {
		t.Errorf("approved timeline: draft %v, drafts %v; want %s approved, once", tl.Draft, tl.Drafts, d.ID)
	}
	if tl.Outbox == nil || tl.Outbox.ID != a.Outbox.ID {
		t.Errorf("approved timeline: outbox %v, want %s", tl.Outbox, a.Outbox.ID)
	}
	if len(tl.Jobs) != 2 || tl.Jobs[1].Kind != KindDeliver {
		t.Errorf("approved timeline: jobs %v, want the draft job and the delivery job", tl.Jobs)
	}

	if _, err := st.Timeline("web:nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Timeline(unknown) = %v, want ErrNotFound", err)
	}
}

// TestTimelineIsOneMoment: while drafts are being approved, every timeline
// read shows the draft approved exactly when it shows the approval's outbox
// row and delivery job, all written in one transaction. Read one record at a
// time, a timeline could show the jobs from before the approval and the
// draft from after it.
func TestTimelineIsOneMoment(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	const n = 40
	ids := make([]string, n)
	for i := range n {
		record(t, st, key(i), t0)
		d, _, err := st.SaveDraft(ctx, Draft{EventKey: key(i), Text: "reply", Drafter: "template", PromptVersion: "v1", ExecutionID: "x", CreatedAt: t0})
		if err != nil {
			t.Fatalf("SaveDraft: %v", err)
		}
		ids[i] = d.ID
	}
	var approved atomic.Int32
	together(n+4, func(g int) {
		if g < n {
			if _, err := st.ApproveDraft(ctx, ids[g], Approval{Decision: Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3}); err != nil {
				t.Errorf("ApproveDraft(%s): %v", ids[g], err)
			}
			approved.Add(1)
			return
		}
		for round := 0; approved.Load() < n || round < 2; round++ {
			for i := range n {
				tl, err := st.Timeline(key(i))
				if err != nil {
					t.Errorf("Timeline(%s): %v", key(i), err)
					return
				}
				delivering := len(tl.Jobs) == 2 && tl.Jobs[1].Kind == KindDeliver
				isApproved := tl.Draft.Status == DraftApproved
				if isApproved != (tl.Outbox != nil) || isApproved != delivering || isApproved != (tl.Drafts[0].Status == DraftApproved) {
					t.Errorf("timeline of %s mixes two moments: draft %s, outbox %v, %d jobs, version %s", key(i), tl.Draft.Status, tl.Outbox != nil, len(tl.Jobs), tl.Drafts[0].Status)
					return
				}
			}
		}
	})
}
