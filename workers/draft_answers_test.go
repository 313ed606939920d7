package workers

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// oaPricedKinds is oaKinds with a price, so drafts carry a cost.
func oaPricedKinds(t *testing.T, st *store.Store, f *testkit.Model) (map[string]jobs.Kind, *DraftJob) {
	t.Helper()
	d, err := drafter.NewOpenAI(drafter.OpenAIConfig{
		BaseURL: f.URL, Model: "m", PromptVersion: "p1", Timeout: 5 * time.Second,
		Price: drafter.Price{Input: 1000, Output: 2000, Currency: "EUR"},
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds, dj := oaKinds(t, st, f, 5*time.Second)
	dj.Drafter = d
	return kinds, dj
}

// TestDraftOpenAIRefusalEndsAtOnce: a refusal is dead-lettered on its first
// attempt with the model's words, not retried as a parse error.
func TestDraftOpenAIRefusalEndsAtOnce(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaRefusal)
	kinds, _ := oaKinds(t, st, f, 5*time.Second)
	r := startRunner(t, st, kinds, oaOptions())
	rec := oaRecord(t, st, r, oaEvent("web:refuse", "conv-refuse", "", "Hello"), 8)
	job := testkit.WaitJob(t, st, rec.Job.ID, store.JobDiscarded)
	if len(job.Attempts) != 1 || len(f.Calls()) != 1 {
		t.Fatalf("%d attempts, %d model calls; want 1 and 1", len(job.Attempts), len(f.Calls()))
	}
	a := job.Attempts[0]
	if !strings.Contains(a.Error, "the model refused to draft a reply: I can't help with that.") {
		t.Errorf("attempt error = %q, want the refusal in the model's words", a.Error)
	}
	if !strings.Contains(a.Raw, `"refusal":"I can't help with that."`) {
		t.Errorf("attempt raw = %q, want the model's whole answer", a.Raw)
	}
}

// TestDraftOpenAIRetryAfter: a 429's Retry-After becomes the job's due
// time; the SDK does not retry on its own.
func TestDraftOpenAIRetryAfter(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaRetryAfter)
	kinds, _ := oaKinds(t, st, f, 5*time.Second)
	r := startRunner(t, st, kinds, oaOptions())
	rec := oaRecord(t, st, r, oaEvent("web:limited", "conv-limited", "", "Hello"), 8)
	var job store.Job
	testkit.Eventually(t, 10*time.Second, func() bool {
		j, err := st.Job(rec.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		job = j
		return len(j.Attempts) == 1 && j.Attempts[0].EndedAt != nil
	}, "the first attempt to end")
	if n := len(f.Calls()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
	ended := *job.Attempts[0].EndedAt
	if wait := job.RunAt.Sub(ended); wait < 6*time.Second || wait > 8*time.Second {
		t.Errorf("retry due %s after the attempt, want the server's Retry-After of 7s", wait)
	}
	if job.State.Final() {
		t.Errorf("job state %s, want it waiting for its retry", job.State)
	}
}

// TestDraftOpenAIKeepsReplyDropsField: a good reply with an off-rule label
// is kept; the label is dropped with a note, and the draft records its
// cost, prompt hash and context budget.
func TestDraftOpenAIKeepsReplyDropsField(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaBadIntent)
	kinds, _ := oaPricedKinds(t, st, f)
	r := startRunner(t, st, kinds, oaOptions())
	rec := oaRecord(t, st, r, oaEvent("web:label", "conv-label", "", "Hello"), 8)
	testkit.WaitJob(t, st, rec.Job.ID, store.JobCompleted)
	d, err := st.DraftByEvent("web:label")
	if err != nil {
		t.Fatal(err)
	}
	if d.Text != "draft #1" || d.Fields["intent"] != "" || d.Fields["name"] != "Ada" {
		t.Errorf("draft text %q fields %v, want the reply kept and intent dropped", d.Text, d.Fields)
	}
	if len(d.Notes) != 1 || !strings.Contains(d.Notes[0], `intent dropped: "Support Request"`) {
		t.Errorf("notes = %q, want one saying intent was dropped", d.Notes)
	}
	// The fake reports 11 prompt and 7 output tokens.
	if want := (11*1000.0 + 7*2000.0) / 1e6; math.Abs(d.Cost-want) > 1e-12 || d.Currency != "EUR" {
		t.Errorf("cost = %v %s, want %v EUR", d.Cost, d.Currency, want)
	}
	if len(d.PromptHash) != 64 || d.Structured != "json_schema" || d.ContextBudget != DefaultContextTokens {
		t.Errorf("prompt hash %q, structured %q, context budget %d; want a sha256, json_schema, %d", d.PromptHash, d.Structured, d.ContextBudget, DefaultContextTokens)
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
}

// TestDraftBudgetPausesAndResumes: once a client's drafts of the day cost
// its budget, the next message waits, with no model call, until the next
// UTC day, and is drafted then; it is never dead-lettered.
func TestDraftBudgetPausesAndResumes(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaOK)
	kinds, dj := oaPricedKinds(t, st, f)
	// Ahead of the wall clock the events are recorded in, so their jobs are due.
	clock := testkit.NewClock(time.Now().UTC().Add(time.Minute))
	day := clock.Now().Truncate(24 * time.Hour)
	dj.Now = clock.Now
	// One draft costs 0.025 EUR; the budget is 0.02, so the first spends it.
	dj.Budget = func(string) (string, float64, []string) { return "acme", 0.02, []string{"web"} }
	opt := oaOptions()
	opt.Now = clock.Now
	r := startRunner(t, st, kinds, opt)

	first := oaRecord(t, st, r, oaEvent("web:b1", "conv-b1", "", "Hello"), 2)
	testkit.WaitJob(t, st, first.Job.ID, store.JobCompleted)
	second := oaRecord(t, st, r, oaEvent("web:b2", "conv-b2", "", "Hello again"), 2)
	var job store.Job
	testkit.Eventually(t, 10*time.Second, func() bool {
		j, err := st.Job(second.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		job = j
		return len(j.Attempts) == 1 && j.Attempts[0].EndedAt != nil
	}, "the second draft to pause")
	if n := len(f.Calls()); n != 1 {
		t.Fatalf("model called %d times, want 1: no call past the budget", n)
	}
	if !strings.Contains(job.Attempts[0].Error, "the daily drafting budget of client acme is spent") {
		t.Errorf("paused attempt error = %q, want the budget sentence", job.Attempts[0].Error)
	}
	if want := day.Add(24 * time.Hour); !job.RunAt.Equal(want) {
		t.Errorf("paused job due %s, want the next UTC midnight %s", job.RunAt, want)
	}
	spent, err := spentSince(st, day, []string{"web"})
	if err != nil || math.Abs(spent-0.025) > 1e-12 {
		t.Errorf("spent today = %v, %v; want 0.025", spent, err)
	}

	clock.Advance(day.Add(24*time.Hour).Sub(clock.Now()) + time.Second) // 00:00:01 the next day
	r.Wake()
	job = testkit.WaitJob(t, st, second.Job.ID, store.JobCompleted)
	if n := len(f.Calls()); n != 2 {
		t.Errorf("model called %d times, want 2", n)
	}
	if _, err := st.DraftByEvent("web:b2"); err != nil {
		t.Errorf("the paused message has no draft the next day: %v", err)
	}
}

// TestContextWithinBudget keeps the newest messages whose estimated tokens
// fit the budget, and says how many tokens they use.
func TestContextWithinBudget(t *testing.T) {
	msg := func(n int) drafter.Message { return drafter.Message{Text: strings.Repeat("x", 4*n)} } // n tokens
	history := []drafter.Message{msg(50), msg(30), msg(20)}
	tests := []struct {
		budget, wantN, wantTokens int
	}{
		{budget: 100, wantN: 3, wantTokens: 100},
		{budget: 99, wantN: 2, wantTokens: 50},
		{budget: 20, wantN: 1, wantTokens: 20},
		{budget: 19, wantN: 0, wantTokens: 0},
	}
	for _, tt := range tests {
		k := &DraftJob{ContextTokens: tt.budget}
		got, used := k.withinBudget(history)
		if len(got) != tt.wantN || used != tt.wantTokens {
			t.Errorf("budget %d: kept %d messages (%d tokens), want %d (%d)", tt.budget, len(got), used, tt.wantN, tt.wantTokens)
		}
		if len(got) > 0 && got[len(got)-1].Text != history[2].Text {
			t.Errorf("budget %d: the newest message was not kept", tt.budget)
		}
	}
}
