package workers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// BenchmarkDraftBacklog drains a backlog of 1,000 template drafts through
// the runner with draft pools of 4, 64, 128 and 256, and reports drafts/s,
// commit rounds per draft and the wall time per attempt: the group commit
// folds the claim and save rounds of concurrent drafts into one, so the
// pool sets the throughput.
func BenchmarkDraftBacklog(b *testing.B) {
	tpl, err := drafter.NewTemplate("Hi {{.Name}}, thanks for your message. {{.Owner}} will get back to you shortly.", "v1", 0)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	for _, pool := range []int{4, 64, 128, 256} {
		b.Run(fmt.Sprintf("pool=%d", pool), func(b *testing.B) {
			var drafted, rounds int
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				st := testkit.OpenStore(b, "")
				for i := range n {
					key := fmt.Sprintf("web:b-%05d", i)
					if _, err := leads.RecordEvent(context.Background(), st, store.Event{
						ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key, CorrelationID: ulid.Make().String(),
						ConversationID: "conv-" + key, Contact: "ada@example.com", Name: "Ada", Text: "Hello, please call me.", ReceivedAt: time.Now(),
					}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3}); err != nil {
						b.Fatal(err)
					}
				}
				before := commits(b, st)
				opt := jobs.Options{Workers: 4, Concurrency: map[string]int{review.KindDraft: pool}, Logger: discardLogger()}
				r := jobs.NewRunner(st, map[string]jobs.Kind{review.KindDraft: &DraftJob{Store: st, Review: review.New(st, config.Default()), Drafter: tpl}}, opt)
				b.StartTimer()
				start := time.Now()
				if err := r.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				testkit.Eventually(b, 10*time.Second, func() bool {
					c, err := st.JobCounts()
					return err == nil && len(c) == 0
				}, "the backlog to drain")
				took += time.Since(start)
				b.StopTimer()
				if err := r.Stop(context.Background()); err != nil {
					b.Fatal(err)
				}
				drafted += n
				rounds += commits(b, st) - before
				b.StartTimer()
			}
			b.ReportMetric(float64(drafted)/took.Seconds(), "drafts/s")
			b.ReportMetric(float64(rounds)/float64(drafted), "rounds/draft")
			b.ReportMetric(float64(pool)*took.Seconds()*1000/float64(drafted), "ms/attempt")
		})
	}
}
