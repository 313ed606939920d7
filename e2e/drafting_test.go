package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
)

// ---- the fake model (testkit.Model), in the test process ----

// newDFModel is a fake model answering a valid draft that is different on
// every call ("draft #N"); its calls are counted per event by their
// X-Correlation-ID (CallsFor).
func newDFModel(t *testing.T) *testkit.Model {
	t.Helper()
	m := testkit.NewModel(t)
	m.Answer(func(c testkit.ModelCall) testkit.Reply {
		return testkit.JSONReply(fmt.Sprintf(`{"reply":"draft #%d","intent":"sales","name":"Ada","email":"","phone":"","summary":"call %d","confidence":0.9}`, c.N, c.N))
	})
	return m
}

// TestDraftStoredBeforeCrashIsReused kills the process (SIGKILL, by
// itself) right after a draft commits. The draft and its job's completion
// are one commit, so the restarted process finds the job done and the
// draft stored, and never calls the model again. Then a burst of
// duplicates of another event must cost one model call.
func TestDraftStoredBeforeCrashIsReused(t *testing.T) {
	model := newDFModel(t)
	cfg := fmt.Sprintf(`workers: 2
drafter: {kind: openai, base_url: %s, model: m, prompt_version: p1, timeout: 10s}
retry: {max_attempts: 5, base_delay: 50ms, max_delay: 200ms}
`, model.URL)
	inst := startInstance(t, cfg, "HANDOFF_FAULT=exit-after-draft-commit")
	faulty := inst.cur()

	// The event is committed before the answer; the draft job then runs,
	// commits its draft, and the process kills itself. The answer may or
	// may not get out first.
	res, err := inst.postHook("crash-draft-1")
	if err == nil && res.code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo = %s, want 202", res)
	}
	if !faulty.Wait(20 * time.Second) {
		t.Fatalf("the process with HANDOFF_FAULT=exit-after-draft-commit still runs 20s after the event; model calls: %d", len(model.Calls()))
	}
	inst.client.CloseIdleConnections()
	if faulty.ExitSignal() != syscall.SIGKILL {
		t.Fatalf("run %d ended with %s, want killed by SIGKILL right after the draft commit", faulty.Number(), faulty.Exit())
	}
	if n := len(model.Calls()); n != 1 {
		t.Fatalf("model called %d times before the crash, want 1", n)
	}

	inst.restart() // without the fault
	const key = "demo:crash-draft-1"
	v := waitAllDrafted(t, inst, []string{key}, 20*time.Second)[key]
	if err == nil && v.Event.CorrelationID != res.reply.CorrelationID {
		t.Errorf("event correlation id %q, the webhook answered %q", v.Event.CorrelationID, res.reply.CorrelationID)
	}
	calls := model.CallsFor(v.Event.CorrelationID)
	if len(calls) != 1 || len(model.Calls()) != 1 {
		t.Errorf("model called %d times for %s (%d in all) across the crash, want exactly 1: the stored draft is reused",
			len(calls), key, len(model.Calls()))
	}
	if v.Draft.Text != "draft #1" {
		t.Errorf("stored draft text %q, want the first (and only) answer %q", v.Draft.Text, "draft #1")
	}
	if len(v.Jobs) != 1 {
		t.Fatalf("event has %d jobs, want 1: %s", len(v.Jobs), describe(v))
	}
	j := v.Jobs[0]
	// The draft and the job's completion commit together (review.Record),
	// so the process that died right after that commit had finished the
	// job: one attempt, completed, by the execution that stored the draft.
	// Nothing is left for the restart to redo.
	if len(j.Attempts) != 1 || j.Attempts[0].Outcome != outcomeCompleted {
		t.Errorf("attempts: %s; want the one attempt that stored the draft, completed in the same commit", describe(v))
	}
	if len(j.Attempts) > 0 && v.Draft.ExecutionID != j.Attempts[0].ExecutionID {
		t.Errorf("draft stored by execution %s, want the killed first attempt %s", v.Draft.ExecutionID, j.Attempts[0].ExecutionID)
	}
	if len(calls) > 0 && !strings.Contains(string(calls[0].Body), `"model":"m"`) {
		t.Errorf("model request %s does not name model m", calls[0].Body)
	}
	// The model was shown the customer's message exactly as sent (a corpus
	// text: emoji, RTL, markup-like or long, in one of the layouts).
	checkBodyRead(t, demoBody("crash-draft-1"), v)
	if len(calls) > 0 && !calls[0].Req.Saw(demoBody("crash-draft-1").Want.Text) {
		t.Errorf("the model request does not carry the message text %q exactly: %s", demoBody("crash-draft-1").Want.Text, calls[0].Body)
	}

	// 30 deliveries of another event at once: one event, one model call.
	const copies = 30
	results := make([]delivery, copies)
	start := make(chan struct{})
	var ready, wg sync.WaitGroup
	for n := range copies {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			r, err := inst.postHook("storm-draft-1")
			results[n] = delivery{id: "storm-draft-1", res: r, err: err}
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()
	accepted, dups := 0, 0
	for _, d := range results {
		switch {
		case d.err != nil:
			t.Errorf("delivery: %v", d.err)
		case d.res.code == http.StatusAccepted:
			accepted++
		case d.res.code == http.StatusOK && d.res.reply.Status == "duplicate":
			dups++
		default:
			t.Errorf("delivery: got %s, want 202 or 200 duplicate", d.res)
		}
	}
	if accepted != 1 || dups != copies-1 {
		t.Errorf("%d accepted and %d duplicates of %d deliveries, want 1 and %d", accepted, dups, copies, copies-1)
	}
	sv := waitAllDrafted(t, inst, []string{"demo:storm-draft-1"}, 20*time.Second)["demo:storm-draft-1"]
	checkBodyRead(t, demoBody("storm-draft-1"), sv)
	if n := len(model.CallsFor(sv.Event.CorrelationID)); n != 1 {
		t.Errorf("model called %d times for one event delivered %d times, want 1", n, copies)
	}
	if n := len(model.Calls()); n != 2 {
		t.Errorf("model called %d times in all for 2 events, want 2", n)
	}
	if sv.Draft.Text != "draft #2" || sv.Event.Duplicates != copies-1 || len(sv.Jobs) != 1 {
		t.Errorf("storm event: draft %q, %d duplicates, %d jobs; want %q, %d, 1", sv.Draft.Text, sv.Event.Duplicates, len(sv.Jobs), "draft #2", copies-1)
	}

	inst.stopCleanly()
}
