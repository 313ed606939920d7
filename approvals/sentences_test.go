package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// TestRefusalSentences: a superseded draft and the draft of a closed lead
// are refused on a surface with the sentences the dashboard gives (web's
// answerFor words the same errors), and the card shows why.
func TestRefusalSentences(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dana, _ := f.st.User("dana")

	d := f.pending(t, "web", "m1", "Hello Ada")
	// The draft job that wrote it is done (the fixture saved the draft).
	jobs, err := f.st.Claim(ctx, t0, store.ClaimLimits{Kinds: map[string]int{store.KindDraft: 10}}, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim the draft job: %d, %v", len(jobs), err)
	}
	if err := f.st.Update(ctx, func(tx *store.Tx) error { return tx.CompleteJob(jobs[0].ID, jobs[0].ExecutionID, t0) }); err != nil {
		t.Fatal(err)
	}
	// A newer message of the same conversation supersedes the waiting draft.
	ev := store.Event{ID: ulid.Make().String(), Key: "web:m2", Channel: "web", MessageID: "m2", CorrelationID: ulid.Make().String(),
		ConversationID: "conv-m1", Contact: "ada@example.com", Name: "Ada", Text: "Also, do you deliver?", ReceivedAt: t0}
	if _, err := leads.RecordEvent(ctx, f.st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if st := f.draft(t, d.ID).Status; st != store.DraftSuperseded {
		t.Fatalf("the first draft is %s, want superseded", st)
	}
	_, err = f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Approve, Person: dana, From: "fake D1"})
	var refusal *Refusal
	var superseded *store.SupersededError
	if !errors.As(err, &refusal) || !errors.As(err, &superseded) || refusal.Sentence != sentence(superseded.Error()) ||
		!strings.Contains(refusal.Sentence, "superseded by a newer message") {
		t.Fatalf("approving a superseded draft = %v", err)
	}
	var v View
	if err := f.st.View(func(tx *store.Tx) (err error) { v, err = f.a.viewTx(tx, d.ID, t0); return err }); err != nil {
		t.Fatal(err)
	}
	if v.State != Superseded || !v.Final() || !strings.Contains(v.Status, "the customer wrote again") {
		t.Errorf("the superseded card = %s, %q", v.State, v.Status)
	}

	d3 := f.pending(t, "shop", "m3", "Hello Bo")
	if _, err := review.New(f.st, f.cfg).Close(ctx, "shop:m3", store.Decision{By: "root", At: t0, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	root, _ := f.st.User("root")
	_, err = f.a.Decide(ctx, Ask{Via: "fake", Draft: d3.ID, Action: Approve, Person: root, From: "fake R1"})
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Sentence, "was already rejected by root") || !strings.HasSuffix(refusal.Sentence, "; that decision stands.") {
		t.Fatalf("approving the draft of a closed lead = %v", err)
	}
	// A reply window that closed is a refusal with its way out, never
	// "something went wrong" (and never logged as a failure).
	closed := fmt.Errorf("review: approve: %w", &review.WindowClosedError{Draft: d.ID, Provider: "wa", Kind: "whatsapp", Templates: []string{"order_update"}})
	if err := refusalOf(closed); !errors.As(err, &refusal) || !strings.Contains(refusal.Sentence, "order_update") || strings.Contains(refusal.Sentence, "went wrong") {
		t.Errorf("a closed reply window on a surface = %v", err)
	}
	if got := Sentence(errors.New("disk on fire")); strings.Contains(got, "fire") {
		t.Errorf("an internal error's sentence quotes it: %q", got)
	}
}
