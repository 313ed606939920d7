// Package evaltest builds the database an evaluation reads: past turns
// drafted by a model and approved by people, written through the real
// store, leads and review code on a real bbolt file, with texts from the
// shared corpus.
package evaltest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// Script is the body of one of the fixture's shown drafts: a draft whose
// text must come out of every report escaped.
const Script = `<script>alert("eval")</script> Thanks & see you <b>soon</b>`

// Epoch is the first turn's time; turn i is drafted i minutes later.
var Epoch = time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)

// DraftLatency is how long each shown draft's job attempt took.
const DraftLatency = 800 * time.Millisecond

// Config is the fixture's configuration: channels web (client acme) and
// shop (client other) sending through the sandbox, the openai drafter
// at modelURL with model m-current, prompt version v1, facts naming
// €12 and 09:00, and a price.
func Config(modelURL string) *config.Config {
	return &config.Config{
		Channels: []config.Channel{
			{Name: "web", Provider: "sandbox", Client: "acme"},
			{Name: "shop", Provider: "sandbox", Client: "other"},
		},
		Clients: []config.Client{{ID: "acme", Name: "Acme"}, {ID: "other", Name: "Other"}},
		Drafter: config.Drafter{
			Kind: "openai", BaseURL: modelURL, Model: "m-current", PromptVersion: "v1", Timeout: 10 * time.Second,
			Facts: "Fish & chips cost €12. We open at 09:00.",
			Price: config.Price{Input: 1000, Output: 1000, Currency: "USD"},
		},
		Routing: config.Routing{Version: "r1", DefaultOwner: "sales"},
		Retry:   config.Retry{MaxAttempts: 3},
	}
}

// Turn is one approved turn of the fixture.
type Turn struct {
	Draft store.Draft // as approved
	Sent  string
	// Round is the turn's place in its conversation: 0 for the first.
	Round int
}

// Build records n turns in st under cfg, in rounds of one message per
// conversation (conversations = n/3, at least 1), so later turns have an
// earlier conversation: each message recorded with its draft job
// (leads.RecordEvent), the job claimed and the draft stored and the job
// completed by review.Record (drafter openai, model m-current, a cost),
// and the draft approved by a person with review.Approve, every third one
// edited. The texts are the corpus's; one draft is Script. Channel shop
// gets every fifth turn.
func Build(t testing.TB, st *store.Store, cfg *config.Config, n int) []Turn {
	t.Helper()
	ctx := context.Background()
	// The clients' facts, as a start with their facts_file stores them
	// (facts.Seed): the drafts shown were written from these versions.
	for _, cl := range cfg.ClientList() {
		if _, text := cfg.FactsFileOf(cl.ID); text != "" {
			if _, err := facts.Save(ctx, st, facts.Edit{Client: cl.ID, Text: text, Author: "config", Source: facts.SourceConfig, At: Epoch}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rv := review.New(st, cfg)
	texts := corpus.Texts()
	convs := max(n/3, 1)
	turns := make([]Turn, n)
	for round := 0; round*convs < n; round++ {
		lo, hi := round*convs, min((round+1)*convs, n)
		at := Epoch.Add(time.Duration(hi) * time.Minute) // every message of the round is due
		byKey := map[string]int{}
		parallel(t, lo, hi, func(i int) error {
			ch := "web"
			if i%5 == 4 {
				ch = "shop"
			}
			tx := texts[i%len(texts)]
			key := fmt.Sprintf("%s:m-%d", ch, i)
			when := Epoch.Add(time.Duration(i) * time.Minute)
			ev := store.Event{
				ID: ulid.MustNew(ulid.Timestamp(when), ulid.DefaultEntropy()).String(), Key: key, Channel: ch, MessageID: key,
				CorrelationID: ulid.Make().String(), ConversationID: fmt.Sprintf("c-%d", i%convs),
				Contact: fmt.Sprintf("+4420794600%02d", i%convs), Name: tx.From, Text: tx.Body, ReceivedAt: when,
			}
			_, err := leads.RecordEvent(ctx, st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: 3})
			return err
		})
		jobs, err := st.Claim(ctx, at, store.ClaimLimits{Kinds: map[string]int{store.KindDraft: hi - lo}}, time.Hour)
		if err != nil || len(jobs) != hi-lo {
			t.Fatalf("claim the round's draft jobs: %d of %d, %v", len(jobs), hi-lo, err)
		}
		for j, job := range jobs {
			byKey[job.Key] = j
		}
		parallel(t, lo, hi, func(i int) error {
			ch := "web"
			if i%5 == 4 {
				ch = "shop"
			}
			key := fmt.Sprintf("%s:m-%d", ch, i)
			job := jobs[byKey[key]]
			ev, err := st.EventByKey(key)
			if err != nil {
				return err
			}
			text := draftText(i, ev)
			started := job.Attempts[len(job.Attempts)-1].StartedAt
			d, err := rv.Record(ctx, job, &store.Draft{
				EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel, ConversationID: ev.ConversationID,
				Text: text, Drafter: "openai", Model: "m-current", PromptVersion: "v1", ExecutionID: job.ExecutionID,
				CreatedAt: ev.ReceivedAt, PromptTokens: 40, OutputTokens: 20, Cost: 0.06, Currency: "USD",
				Answers: []string{ev.Key},
			}, 1, started.Add(DraftLatency), nil)
			if err != nil {
				return err
			}
			sent := ""
			if i%3 == 0 {
				sent = text + "\n\nBest wishes, Ada 🌸"
			}
			a, err := rv.Approve(ctx, d.ID, store.Decision{By: "ada", At: ev.ReceivedAt.Add(2 * time.Minute), Text: sent})
			if err != nil {
				return err
			}
			turns[i] = Turn{Draft: a.Draft, Sent: a.Draft.Decision.Text, Round: round}
			return nil
		})
	}
	return turns
}

// draftText is the shown draft of turn i: a reply quoting the customer's
// words, Script for turn 7, one stating an invented price every tenth.
func draftText(i int, ev store.Event) string {
	switch {
	case i == 7:
		return Script
	case i%10 == 3:
		return "Hello " + ev.Name + ", that is €49.99 and we open at 07:30."
	}
	words := strings.Fields(ev.Text)
	return fmt.Sprintf("Hello %s, thanks for writing: %q. We open at 09:00.", ev.Name, strings.Join(words[:min(len(words), 6)], " "))
}

// parallel runs fn(lo) … fn(hi-1) on 8 goroutines, so the store's group
// commit writes them together, and fails the test on the first error.
func parallel(t testing.TB, lo, hi int, fn func(i int) error) {
	t.Helper()
	next := make(chan int)
	errs := make(chan error, hi-lo)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- fmt.Errorf("turn %d: %w", i, err)
				}
			}
		}()
	}
	for i := lo; i < hi; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
