package workers

import (
	"context"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestPastInputIsTheJobsInput: the input PastInput rebuilds for a stored
// draft is, to the byte, the one the draft job sent the model for it — a
// burst of two messages after an earlier turn whose edited reply was
// approved — so handoff eval drafts what the job drafted.
func TestPastInputIsTheJobsInput(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaOK)
	kinds, job := oaKinds(t, st, f, 5*time.Second)
	r := startRunner(t, st, kinds, oaOptions())
	cfg := oaConfig()
	cfg.Channels = append(cfg.Channels, config.Channel{Name: "web", Provider: "sandbox"})
	rv := review.New(st, cfg)
	texts := corpus.Texts()

	first := oaRecord(t, st, r, oaEvent("web:p-1", "conv-p", "+15550001234", texts[0].Body), 3)
	testkit.WaitJob(t, st, first.Job.ID, store.JobCompleted)
	d1, err := st.DraftByEvent("web:p-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Approve(context.Background(), d1.ID, store.Decision{By: "ada", At: time.Now().UTC(), Text: "Edited: " + texts[1].Body}); err != nil {
		t.Fatal(err)
	}

	// The second turn is a burst: its first message's job waits at the
	// model when the second message arrives and takes the turn over.
	f.Hold()
	oaRecord(t, st, r, oaEvent("web:p-2", "conv-p", "+15550001234", texts[2].Body), 3)
	testkit.Eventually(t, 10*time.Second, func() bool { return f.Waiting() == 1 }, "the first job of the burst at the model")
	third := oaRecord(t, st, r, oaEvent("web:p-3", "conv-p", "+15550001234", texts[6].Body), 3)
	f.Release()
	testkit.WaitJob(t, st, third.Job.ID, store.JobCompleted)
	d, err := st.DraftByEvent("web:p-3")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.AnsweredEvents()) != 2 {
		t.Fatalf("the burst's draft answers %v; want both messages", d.AnsweredEvents())
	}

	in, gi, err := job.PastInput(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Messages) != 2 || len(in.History) != 2 || in.History[1].Text != "Edited: "+texts[1].Body {
		t.Fatalf("PastInput: %d messages, history %+v; want the burst and the earlier turn with its approved reply", len(in.Messages), in.History)
	}
	if gi.Customer != in.Text || len(gi.Conversation) != 2 {
		t.Errorf("the guard input %+v does not match the input", gi)
	}
	again, err := job.Drafter.Draft(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if again.InputHash != d.InputHash {
		t.Errorf("the request rebuilt from the stored draft differs from the job's (hash %s, want %s)", again.InputHash, d.InputHash)
	}
}
