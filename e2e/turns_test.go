package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
)

// tnConfig is a chat channel that approves its own drafts (so a reply goes
// out as soon as the turn is drafted), with quiet period coalesce, drafting
// through the fake model at modelURL, replying through the sandbox.
func tnConfig(modelURL, coalesce string) string {
	return fmt.Sprintf(`workers: 4
channels:
  - name: chat
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    auto_approve: true
    coalesce: %s
drafter: {kind: openai, base_url: %s, model: m, prompt_version: p1, timeout: 10s}
retry: {max_attempts: 5, base_delay: 50ms, max_delay: 200ms}
`, coalesce, modelURL)
}

// tnPost sends message id of conversation conv to the chat channel and
// insists on 202.
func tnPost(t *testing.T, i *instance, conv, id, text string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"id": id, "conversation_id": conv, "from": conv + "@example.com", "name": "Ada", "text": text})
	resp, err := i.client.Post(i.cur().URL()+"/hooks/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Errorf("POST /hooks/chat %s: %v", id, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("POST /hooks/chat %s = %d; want 202", id, resp.StatusCode)
	}
}

// tnDraft is a draft as GET /api/v1/drafts lists it.
type tnDraft struct {
	ID             string   `json:"id"`
	ConversationID string   `json:"conversation_id"`
	Status         string   `json:"status"`
	Answers        []string `json:"answers"`
}

// tnDrafts lists the drafts in status.
func tnDrafts(t *testing.T, i *instance, status string) []tnDraft {
	t.Helper()
	var page struct {
		Drafts []tnDraft `json:"drafts"`
	}
	if code, err := dlvGet(i, "/api/v1/drafts?limit=200&status="+status, &page); err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/drafts?status=%s = %d, %v", status, code, err)
	}
	return page.Drafts
}

// tnReplies counts the messages the sandbox received, per conversation
// (the client reference is the outbox id, "<conversation id>:<draft id>").
func tnReplies(t *testing.T, i *instance) map[string]int {
	t.Helper()
	var box struct {
		Messages []dlvSandboxMessage `json:"messages"`
	}
	if code, err := dlvGet(i, "/api/v1/sandbox/messages?limit=1000", &box); err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/sandbox/messages = %d, %v", code, err)
	}
	out := map[string]int{}
	for _, m := range box.Messages {
		conv, _, _ := strings.Cut(m.Ref, ":")
		out[conv] += 1 + m.Repeats
	}
	return out
}

// TestTurnBursts: a burst of 3 messages from one lead, and bursts of 20
// concurrent messages from two leads at once, with a model that answers
// differently on every call, cost one model call per lead, one draft per
// lead listing every one of its events, and one reply per lead at the
// provider.
func TestTurnBursts(t *testing.T) {
	model := newDFModel(t)
	inst := startInstance(t, tnConfig(model.URL, "3s"))

	for n, text := range []string{"hi", "can I book for Friday", "4 people"} {
		tnPost(t, inst, "lead-a", fmt.Sprint("a-", n), text)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for n := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			conv := []string{"lead-b", "lead-c"}[n%2]
			tnPost(t, inst, conv, fmt.Sprintf("%s-%02d", conv, n/2), fmt.Sprint("part ", n/2))
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	want := map[string]int{"lead-a": 3, "lead-b": 20, "lead-c": 20}
	testkit.Eventually(t, 30*time.Second, func() bool { return len(tnReplies(t, inst)) == len(want) }, "one reply per lead")
	// Every turn is drafted and approved by now; nothing else may follow.
	testkit.Eventually(t, 10*time.Second, func() bool { return len(tnDrafts(t, inst, "pending_approval")) == 0 }, "no draft waiting")
	if got := tnReplies(t, inst); len(got) != 3 || got["lead-a"] != 1 || got["lead-b"] != 1 || got["lead-c"] != 1 {
		t.Errorf("replies at the provider per lead = %v; want one each", got)
	}
	if n := len(model.Calls()); n != len(want) {
		t.Errorf("model called %d times; want one per lead (%d)", n, len(want))
	}
	approved := tnDrafts(t, inst, "approved")
	if len(approved) != len(want) {
		t.Fatalf("%d approved drafts; want one per lead: %+v", len(approved), approved)
	}
	for _, d := range approved {
		if len(d.Answers) != want[d.ConversationID] || !strings.HasPrefix(d.Answers[0], "chat:") {
			t.Errorf("lead %s: draft %s answers %d events (%v); want every one of its %d", d.ConversationID, d.ID, len(d.Answers), d.Answers, want[d.ConversationID])
		}
		slices.Sort(d.Answers)
		if len(slices.Compact(d.Answers)) != len(d.Answers) {
			t.Errorf("lead %s: draft %s lists an event twice: %v", d.ConversationID, d.ID, d.Answers)
		}
	}
	if s := tnDrafts(t, inst, "superseded"); len(s) != 0 {
		t.Errorf("superseded drafts %+v; want none (no message arrived while a draft waited)", s)
	}
	inst.stopCleanly()
}

// TestTurnSurvivesKillInQuietPeriod: a burst acknowledged, then SIGKILL
// before the lead's turn is drafted; after the restart the turn is still
// drafted once, answering every message, and replied to once. The model
// answers nothing before the kill, so the draft cannot be written first
// however late the kill lands. Both ways a kill can land are run: inside
// the quiet period (killed at once, the usual case), and after it, with
// the model call held in flight (killed once the call arrived; the killed
// call is never answered, so it is not a model call). Both end the same way.
func TestTurnSurvivesKillInQuietPeriod(t *testing.T) {
	for _, tc := range []struct {
		name, coalesce string
		inFlight       bool // kill once the model call arrived
	}{
		{"in the quiet period", "4s", false},
		{"with the model call in flight", "2s", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The model is held shut: a call that arrives waits unanswered
			// until it opens, or until its caller is gone (a killed
			// process), and is then not a call of the model.
			model := newDFModel(t)
			model.Hold()
			inst := startInstance(t, tnConfig(model.URL, tc.coalesce))
			for n, text := range []string{"hi", "can I book for Friday", "4 people"} {
				tnPost(t, inst, "lead-k", fmt.Sprint("k-", n), text)
			}
			if t.Failed() {
				t.FailNow()
			}
			if tc.inFlight {
				testkit.Eventually(t, 30*time.Second, func() bool { return model.Arrived() > 0 }, "the model call")
			}
			inst.kill()
			before := model.Arrived()
			if tc.inFlight && before == 0 {
				t.Fatal("no model call was in flight at the kill")
			}
			if n := len(model.Calls()); n != 0 {
				t.Fatalf("the model answered %d calls before the kill; the gate was shut", n)
			}
			// A call the killed process left held ends with its connection;
			// only then does the gate open, so it cannot be answered late.
			testkit.Eventually(t, 10*time.Second, func() bool { return model.Waiting() == 0 }, "the killed process's calls to end")
			model.Release()
			inst.restart()
			testkit.Eventually(t, 30*time.Second, func() bool { return tnReplies(t, inst)["lead-k"] > 0 }, "the reply after the restart")
			testkit.Eventually(t, 10*time.Second, func() bool { return len(tnDrafts(t, inst, "pending_approval")) == 0 }, "no draft waiting")
			if got := tnReplies(t, inst); got["lead-k"] != 1 {
				t.Errorf("replies at the provider = %v; want one", got)
			}
			if n := len(model.Calls()); n != 1 {
				t.Errorf("model answered %d calls across the kill (%d arrived before it, unanswered); want 1", n, before)
			}
			if d := tnDrafts(t, inst, "approved"); len(d) != 1 || len(d[0].Answers) != 3 {
				t.Errorf("approved drafts %+v; want one answering the 3 messages", d)
			}
			inst.stopCleanly()
		})
	}
}
