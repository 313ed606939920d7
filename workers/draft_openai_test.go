package workers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// ---- the model (testkit.Model), scripted by mode ----

// How the fake model answers.
const (
	oaOK            = "ok"             // valid, different on every call: "draft #N"
	oaStatus500     = "500"            // server error
	oaStatus401     = "401"            // wrong key: permanent
	oaStall         = "stall"          // accepts and never answers until the request's context ends
	oaBadJSON       = "bad-json"       // content that is not JSON
	oaBadConfidence = "bad-confidence" // JSON breaking the schema: confidence 7
	oaMissingReply  = "missing-reply"  // JSON breaking the schema: no reply
	oaRefusal       = "refusal"        // message.refusal with content null
	oaRetryAfter    = "retry-after"    // 429 with Retry-After: 7
	oaBadIntent     = "bad-intent"     // a fine reply with intent "Support Request"
)

// oaMsg is one prompt message as role and text.
type oaMsg struct{ Role, Text string }

// oaMsgs is a request's prompt as roles and texts.
func oaMsgs(r testkit.ChatRequest) []oaMsg {
	out := make([]oaMsg, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = oaMsg{Role: m.Role, Text: m.Text()}
	}
	return out
}

// newOAFakeModel is a fake model answering every call as mode says.
func newOAFakeModel(t *testing.T, mode string) *testkit.Model {
	t.Helper()
	f := testkit.NewModel(t)
	f.Answer(func(c testkit.ModelCall) testkit.Reply {
		n := c.N
		switch mode {
		case oaStatus500:
			return testkit.ErrorReply(http.StatusInternalServerError, "fake "+mode, "test")
		case oaStatus401:
			return testkit.ErrorReply(http.StatusUnauthorized, "fake "+mode, "test")
		case oaRetryAfter:
			return testkit.RateLimited("7", "Rate limit reached")
		case oaRefusal:
			return testkit.RefusalReply("I can't help with that.")
		case oaBadIntent:
			return testkit.JSONReply(fmt.Sprintf(`{"reply":"draft #%d","intent":"Support Request","name":"Ada","email":null,"phone":null,"summary":"s","confidence":0.8}`, n))
		case oaStall:
			return testkit.Reply{Hang: true}
		case oaOK:
			return testkit.DraftReply(n)
		case oaBadJSON:
			return testkit.JSONReply(fmt.Sprintf("I think the reply is draft #%d {", n))
		case oaBadConfidence:
			return testkit.JSONReply(fmt.Sprintf(`{"reply":"draft #%d","intent":"sales","name":"","email":"","phone":"","summary":"s","confidence":7}`, n))
		case oaMissingReply:
			return testkit.JSONReply(fmt.Sprintf(`{"intent":"sales","name":"","email":"","phone":"","summary":"call %d","confidence":0.5}`, n))
		}
		return testkit.ErrorReply(http.StatusTeapot, "unknown fake mode "+mode, "test")
	})
	return f
}

// ---- wiring ----

// oaConfig routes support intents to "support", everything else to "sales".
func oaConfig() *config.Config {
	cfg := config.Default()
	cfg.Routing = config.Routing{Version: "r9", DefaultOwner: "sales", Rules: []config.Rule{
		{When: config.When{Intent: "support"}, Owner: "support"},
	}}
	return cfg
}

// oaKinds wires the real job kinds with an OpenAI drafter against f and the sandbox provider.
func oaKinds(t *testing.T, st *store.Store, f *testkit.Model, timeout time.Duration) (map[string]jobs.Kind, *DraftJob) {
	t.Helper()
	d, err := drafter.NewOpenAI(drafter.OpenAIConfig{BaseURL: f.URL, Model: "m", PromptVersion: "p1", Timeout: timeout})
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	providers, err := provider.Open(nil, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatalf("provider.Open: %v", err)
	}
	return Kinds(st, oaConfig(), d, providers)
}

// oaOptions are testOptions with four workers and retries far enough apart
// to tell a retry that waited its backoff from one run at once.
func oaOptions() jobs.Options {
	opt := testOptions()
	opt.Workers = 4
	opt.Backoff = jobs.Backoff{Base: 40 * time.Millisecond, Max: 160 * time.Millisecond}
	return opt
}

// oaEvent is an inbound message on the web channel, received now.
func oaEvent(key, conv, contact, text string) store.Event {
	return store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: strings.TrimPrefix(key, "web:"),
		CorrelationID: ulid.Make().String(), ConversationID: conv, Contact: contact, Name: "Ada",
		Text: text, ReceivedAt: time.Now().UTC(),
	}
}

// oaRecord records ev with its draft job (maxAttempts attempts) and wakes r.
func oaRecord(t *testing.T, st *store.Store, r *jobs.Runner, ev store.Event, maxAttempts int) store.Recorded {
	t.Helper()
	rec, err := leads.RecordEvent(context.Background(), st, ev, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: ev.Key, MaxAttempts: maxAttempts})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = created %v, %v", ev.Key, rec.Created, err)
	}
	if r != nil {
		r.Wake()
	}
	return rec
}

// ---- tests ----

// TestDraftOpenAIDuplicatesCallModelOnce: 20 deliveries of one event race
// into the store; one event, one job, one model call, one draft.
func TestDraftOpenAIDuplicatesCallModelOnce(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaOK)
	kinds, _ := oaKinds(t, st, f, 5*time.Second)
	r := startRunner(t, st, kinds, oaOptions())

	const copies = 20
	recs := make([]store.Recorded, copies)
	errs := make([]error, copies)
	start := make(chan struct{})
	var ready, wg sync.WaitGroup
	for i := range copies {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := oaEvent("web:dup-1", "conv-dup", "+15550001234", "Hello, my site is down")
			nj := store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: ev.Key, MaxAttempts: 3}
			ready.Done()
			<-start
			recs[i], errs[i] = leads.RecordEvent(context.Background(), st, ev, nj)
			r.Wake()
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()

	var first store.Recorded
	created := 0
	for i := range copies {
		if errs[i] != nil {
			t.Fatalf("RecordEvent %d: %v", i, errs[i])
		}
		if recs[i].Created {
			created++
			first = recs[i]
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d concurrent deliveries created the event, want exactly 1", created, copies)
	}
	for i := range copies {
		if recs[i].Event.ID != first.Event.ID || recs[i].Event.CorrelationID != first.Event.CorrelationID {
			t.Errorf("delivery %d got event %s / %s, want the first one's %s / %s", i,
				recs[i].Event.ID, recs[i].Event.CorrelationID, first.Event.ID, first.Event.CorrelationID)
		}
	}

	job := testkit.WaitJob(t, st, first.Job.ID, store.JobCompleted)
	if len(job.Attempts) != 1 {
		t.Fatalf("job %s completed after %d attempts, want 1", job.ID, len(job.Attempts))
	}
	var all []store.Job
	err := st.View(func(tx *store.Tx) (err error) { all, err = tx.JobsByCorrelation(first.Event.CorrelationID); return err })
	if err != nil || len(all) != 1 {
		t.Errorf("JobsByCorrelation = %d jobs, %v; want the one draft job", len(all), err)
	}
	calls := f.Calls()
	if len(calls) != 1 {
		t.Fatalf("model called %d times for one event delivered %d times, want 1", len(calls), copies)
	}
	if got := calls[0].Header.Get("X-Correlation-ID"); got != first.Event.CorrelationID {
		t.Errorf("model call X-Correlation-ID = %q, want the event's %q", got, first.Event.CorrelationID)
	}

	d, err := st.DraftByEvent("web:dup-1")
	if err != nil {
		t.Fatalf("DraftByEvent: %v", err)
	}
	want := store.Draft{
		Text: "draft #1", Drafter: "openai", Model: "m", PromptVersion: "p1", Raw: f.Content(1),
		Owner: "support", RuleVersion: "r9", Rule: "rules[0]", PromptTokens: 11, OutputTokens: 7,
		ExecutionID: job.Attempts[0].ExecutionID, CorrelationID: first.Event.CorrelationID, Status: store.DraftPending,
	}
	got := store.Draft{
		Text: d.Text, Drafter: d.Drafter, Model: d.Model, PromptVersion: d.PromptVersion, Raw: d.Raw,
		Owner: d.Owner, RuleVersion: d.RuleVersion, Rule: d.Rule, PromptTokens: d.PromptTokens, OutputTokens: d.OutputTokens,
		ExecutionID: d.ExecutionID, CorrelationID: d.CorrelationID, Status: d.Status,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stored draft =\n %+v\nwant\n %+v", got, want)
	}
	if d.Fields["intent"] != "support" || d.Fields["email"] != "ada@example.com" || d.Fields["confidence"] != "0.8" || len(d.InputHash) != 64 {
		t.Errorf("stored fields %v / input hash %q, want the model's validated fields and a hash", d.Fields, d.InputHash)
	}
	drafts, _, err := st.Drafts(store.DraftFilter{Status: store.DraftPending})
	if err != nil || len(drafts) != 1 {
		t.Errorf("pending drafts = %d, %v; want 1", len(drafts), err)
	}
	ev, err := st.EventByKey("web:dup-1")
	if err != nil || ev.Duplicates != copies-1 {
		t.Errorf("event duplicates = %d, %v; want %d", ev.Duplicates, err, copies-1)
	}
	h, err := st.Handoff(store.LeadKey("web", "conv-dup"))
	if err != nil || h.Status != leads.Owned || h.Owner != "support" {
		t.Errorf("lead = %s owner %q, %v; want owned by support", h.Status, h.Owner, err)
	}
}

// TestDraftOpenAIRetryReusesStoredDraft: once the draft is stored, no
// later attempt of the job calls the model again, whether the attempt that
// stored it died right after (a panic in AfterSave, standing in for a crash)
// or the job is run again by hand.
func TestDraftOpenAIRetryReusesStoredDraft(t *testing.T) {
	st := openStore(t)
	f := newOAFakeModel(t, oaOK)
	kinds, dj := oaKinds(t, st, f, 5*time.Second)
	var saves atomic.Int64
	dj.AfterSave = func() {
		if saves.Add(1) == 1 {
			panic("the process dies right after the draft commit")
		}
	}
	r := startRunner(t, st, kinds, oaOptions())
	rec := oaRecord(t, st, r, oaEvent("web:retry-1", "conv-retry", "+15550001234", "Hello"), 3)

	// The draft and the job's completion commit together, so the attempt
	// that died right after that commit is the one that completed the job.
	job := testkit.WaitJob(t, st, rec.Job.ID, store.JobCompleted)
	if len(job.Attempts) != 1 || job.Attempts[0].Outcome != store.OutcomeCompleted {
		t.Fatalf("attempts = %+v, want one, completed in the draft's own commit", job.Attempts)
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("model called %d times, want 1: the retry must reuse the stored draft", n)
	}
	// AfterSave runs once the commit returns, which may be after the
	// completed job is visible here.
	testkit.Eventually(t, 10*time.Second, func() bool { return saves.Load() >= 1 }, "AfterSave to run")
	if n := saves.Load(); n != 1 {
		t.Errorf("AfterSave ran %d times, want 1: nothing stores the draft again", n)
	}
	stored, err := st.DraftByEvent("web:retry-1")
	if err != nil {
		t.Fatalf("DraftByEvent: %v", err)
	}
	if stored.Text != "draft #1" || stored.ExecutionID != job.Attempts[0].ExecutionID {
		t.Errorf("draft = %q by %s, want %q by the first attempt %s", stored.Text, stored.ExecutionID, "draft #1", job.Attempts[0].ExecutionID)
	}

	// A forced rerun, as a replay would do: a new execution of the same job.
	rerun := job
	rerun.ExecutionID = ulid.Make().String()
	rerun.Attempt++
	rerun.Attempts = append(rerun.Attempts, store.Attempt{ExecutionID: rerun.ExecutionID, Number: rerun.Attempt, StartedAt: time.Now().UTC()})
	if err := dj.Run(context.Background(), rerun); err != nil {
		t.Fatalf("Run again: %v", err)
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("model called %d times after a forced rerun, want still 1", n)
	}
	again, err := st.DraftByEvent("web:retry-1")
	if err != nil {
		t.Fatalf("DraftByEvent: %v", err)
	}
	if !reflect.DeepEqual(again, stored) {
		t.Errorf("draft changed by the rerun:\n got %+v\nwant %+v", again, stored)
	}
}

// TestDraftOpenAIModelFailures: a model that keeps failing uses up the
// job's attempts (each recorded with its execution id and error, the
// invalid answers kept raw), stores no draft and leaves the lead received.
func TestDraftOpenAIModelFailures(t *testing.T) {
	tests := []struct {
		mode     string
		attempts int  // the model is called once per attempt
		raw      bool // attempts keep the model's raw answer
		errHas   string
	}{
		{mode: oaStatus500, attempts: 3, errHas: "500"},
		{mode: oaStall, attempts: 3, errHas: "call the model"},
		{mode: oaBadJSON, attempts: 3, raw: true, errHas: "not JSON"},
		{mode: oaMissingReply, attempts: 3, raw: true, errHas: "schema"},
		{mode: oaStatus401, attempts: 1, errHas: "401"}, // permanent: discarded at once
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			st := openStore(t)
			f := newOAFakeModel(t, tt.mode)
			kinds, _ := oaKinds(t, st, f, 150*time.Millisecond)
			r := startRunner(t, st, kinds, oaOptions())
			key := "web:fail-" + tt.mode
			rec := oaRecord(t, st, r, oaEvent(key, "conv-fail", "+15550001234", "Hello"), 3)

			job := testkit.WaitJob(t, st, rec.Job.ID, store.JobDiscarded)
			if len(job.Attempts) != tt.attempts || job.Attempt != tt.attempts {
				t.Fatalf("job has %d attempt records (counter %d), want %d: %+v", len(job.Attempts), job.Attempt, tt.attempts, job.Attempts)
			}
			calls := f.Calls()
			if len(calls) != tt.attempts {
				t.Errorf("model called %d times, want %d (one per attempt, no hidden retries)", len(calls), tt.attempts)
			}
			for _, c := range calls {
				if got := c.Header.Get("X-Correlation-ID"); got != rec.Event.CorrelationID {
					t.Errorf("call %d X-Correlation-ID = %q, want %q", c.N, got, rec.Event.CorrelationID)
				}
			}
			seen := map[string]bool{}
			for i, a := range job.Attempts {
				wantOutcome := store.OutcomeRetry
				if i == len(job.Attempts)-1 {
					wantOutcome = store.OutcomeDiscarded
				}
				if a.Number != i+1 || a.Outcome != wantOutcome || a.EndedAt == nil {
					t.Errorf("attempt %d = number %d outcome %q ended %v, want number %d outcome %q and an end", i, a.Number, a.Outcome, a.EndedAt, i+1, wantOutcome)
				}
				if _, err := ulid.ParseStrict(a.ExecutionID); err != nil || seen[a.ExecutionID] {
					t.Errorf("attempt %d execution id %q is not a fresh ULID", i+1, a.ExecutionID)
				}
				seen[a.ExecutionID] = true
				if !strings.Contains(a.Error, tt.errHas) {
					t.Errorf("attempt %d error %q does not say %q", i+1, a.Error, tt.errHas)
				}
				if i > 0 {
					// Retried after its backoff, not at once (less a moment:
					// the retry time is taken just before the end is recorded).
					delay := oaOptions().Backoff.Delay(i, 0)
					if wait := a.StartedAt.Sub(*job.Attempts[i-1].EndedAt); wait < delay-5*time.Millisecond {
						t.Errorf("attempt %d started %s after attempt %d ended, want at least the backoff %s", i+1, wait, i, delay)
					}
				}
				wantRaw := ""
				if tt.raw {
					wantRaw = f.Content(i + 1)
				}
				if a.Raw != wantRaw {
					t.Errorf("attempt %d raw = %q, want %q", i+1, a.Raw, wantRaw)
				}
			}
			if last := job.Attempts[len(job.Attempts)-1]; tt.raw && (last.Raw == "" || last.Raw != f.Content(len(calls))) {
				t.Errorf("last attempt raw = %q, want the model's last answer %q", last.Raw, f.Content(len(calls)))
			}
			if _, err := st.DraftByEvent(key); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("DraftByEvent after failures = %v, want ErrNotFound: no draft from a failing model", err)
			}
			h, err := st.Handoff(store.LeadKey("web", "conv-fail"))
			if err != nil || h.Status != leads.Received || len(h.History) != 1 {
				t.Errorf("lead = %s with %d transitions, %v; want still received", h.Status, len(h.History), err)
			}
		})
	}
}

// TestDraftOpenAIConversationContext: a later message of the same lead is
// drafted with the earlier messages and the replies approved for them,
// newest last; a rejected draft is not a reply. When the approver edited
// the reply, the model must see what was sent, not the first draft.
func TestDraftOpenAIConversationContext(t *testing.T) {
	tests := []struct {
		name     string
		edit     string // the approver's text; "" approves the draft as is
		wantSent string
	}{
		{name: "approved as drafted", wantSent: "draft #1"},
		{name: "approved edited", edit: "Edited: we will call you at 5pm.", wantSent: "Edited: we will call you at 5pm."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			f := newOAFakeModel(t, oaOK)
			kinds, _ := oaKinds(t, st, f, 5*time.Second)
			r := startRunner(t, st, kinds, oaOptions())
			ctx := context.Background()
			const conv, contact = "conv-ctx", "+15550001234"
			lead := store.LeadKey("web", conv)

			// 1: drafted, approved (maybe edited), sent through the sandbox.
			rec1 := oaRecord(t, st, r, oaEvent("web:ctx-1", conv, contact, "First: my site is down."), 3)
			testkit.WaitJob(t, st, rec1.Job.ID, store.JobCompleted)
			d1, err := st.DraftByEvent("web:ctx-1")
			if err != nil {
				t.Fatal(err)
			}
			cfg := oaConfig()
			cfg.UndoWindow = 0 // not about undo: the reply goes at once
			cfg.Channels = append(cfg.Channels, config.Channel{Name: "web", Provider: "sandbox"})
			rv := review.New(st, cfg)
			ap, err := rv.Approve(ctx, d1.ID, store.Decision{By: "tester", At: time.Now().UTC(), Text: tt.edit})
			if err != nil {
				t.Fatalf("ApproveDraft: %v", err)
			}
			r.Wake()
			testkit.Eventually(t, 10*time.Second, func() bool {
				o, err := st.OutboxRow(ap.Outbox.ID)
				return err == nil && o.Status == store.OutboxSent
			}, "the reply to be sent")
			if h, err := st.Handoff(lead); err != nil || h.Status != leads.Replied {
				t.Fatalf("lead after the reply = %s, %v; want replied", h.Status, err)
			}

			// 2: a new cycle; its draft is rejected.
			rec2 := oaRecord(t, st, r, oaEvent("web:ctx-2", conv, contact, "Second: still down."), 3)
			testkit.WaitJob(t, st, rec2.Job.ID, store.JobCompleted)
			d2, err := st.DraftByEvent("web:ctx-2")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rv.Reject(ctx, d2.ID, store.Decision{By: "tester", At: time.Now().UTC(), Reason: "no"}); err != nil {
				t.Fatalf("RejectDraft: %v", err)
			}

			// 3: the rejected draft answered nobody, so message 2 is still
			// in the open turn: the draft answers both, with turn 1 as context.
			rec3 := oaRecord(t, st, r, oaEvent("web:ctx-3", conv, contact, "Third: hello?"), 3)
			testkit.WaitJob(t, st, rec3.Job.ID, store.JobCompleted)
			calls := f.Calls()
			if len(calls) != 3 {
				t.Fatalf("model called %d times for 3 events, want 3", len(calls))
			}
			if got := oaMsgs(calls[0].Req); len(got) != 2 {
				t.Errorf("first message's prompt has %d messages, want system + the message: %+v", len(got), got)
			}
			got := oaMsgs(calls[2].Req)
			want := []oaMsg{
				{"user", "First: my site is down."},
				{"assistant", tt.wantSent},
			}
			if len(got) != len(want)+2 || got[0].Role != "system" {
				t.Fatalf("third prompt = %+v, want system, %d history messages, the new message", got, len(want))
			}
			if !reflect.DeepEqual(got[1:len(got)-1], want) {
				t.Errorf("third prompt history =\n %+v\nwant (newest last)\n %+v", got[1:len(got)-1], want)
			}
			if last := got[len(got)-1]; last.Role != "user" || !strings.HasSuffix(last.Text, "Message 1:\nSecond: still down.\nMessage 2:\nThird: hello?") {
				t.Errorf("last prompt message = %+v, want the turn's two messages", last)
			}
			if got := calls[2].Header.Get("X-Correlation-ID"); got != rec3.Event.CorrelationID {
				t.Errorf("third call X-Correlation-ID = %q, want %q", got, rec3.Event.CorrelationID)
			}
		})
	}
}
