package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// stallConfig auto-approves every draft of the demo channel to a sandbox
// that records the message and then answers like a timeout, and that can
// look nothing up: every reply ends needing a person.
const stallConfig = `workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: stall
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - {name: stall, kind: sandbox, timeout_after_accept: true, lookup: false}
retry: {base_delay: 100ms, max_delay: 1s}
`

// dxPost posts body (none when empty) to path with the API token and
// decodes the JSON answer.
func dxPost(t *testing.T, i *instance, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, i.cur().URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+i.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := i.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var ans map[string]any
	if err := json.Unmarshal(raw, &ans); err != nil {
		t.Fatalf("POST %s: %d %q is not JSON", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, ans
}

// dxSandbox returns the sandbox's messages for ref.
func dxSandbox(t *testing.T, i *instance, ref string) []dlvSandboxMessage {
	t.Helper()
	var ans struct {
		Messages []dlvSandboxMessage `json:"messages"`
	}
	if code, err := dlvGet(i, "/api/v1/sandbox/messages?limit=1000", &ans); err != nil || code != http.StatusOK {
		t.Fatalf("GET sandbox messages: %d %v", code, err)
	}
	var out []dlvSandboxMessage
	for _, m := range ans.Messages {
		if m.Ref == ref {
			out = append(out, m)
		}
	}
	return out
}

// dxParked waits until the reply of key needs reconciliation after n
// attempts and every job of the event has ended; it returns the row.
func dxParked(t *testing.T, i *instance, key string, n int) dlvOutbox {
	t.Helper()
	var row dlvOutbox
	testkit.Eventually(t, 20*time.Second, func() bool {
		var tl dlvTimeline
		if code, err := dlvGet(i, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
			t.Fatalf("GET event %s: %d %v", key, code, err)
		}
		if tl.Outbox == nil {
			return false
		}
		for _, j := range tl.Jobs {
			if j.State != "completed" {
				return false
			}
		}
		if code, err := dlvGet(i, dlvOutboxPath(tl.Outbox.ID), &row); err != nil || code != http.StatusOK {
			t.Fatalf("GET outbox %s: %d %v", tl.Outbox.ID, code, err)
		}
		return row.Status == "needs_reconciliation" && len(row.Attempts) == n
	}, fmt.Sprintf("the reply of %s to need reconciliation after %d attempt(s)", key, n))
	return row
}

// TestDeadLetterReplayNeedsConfirmation runs the real binary with a
// provider that times out after accepting and cannot look anything up: the
// reply needs reconciliation, a replay is refused with the reason until a
// person confirms it with the id, and the confirmed replay reaches the
// provider under the same reference, which refuses the repeat visibly.
func TestDeadLetterReplayNeedsConfirmation(t *testing.T) {
	inst := startInstance(t, stallConfig)
	inst.mustPostBody(corpus.Message(1, "dx-1", "+15550009999", "+15550009999")) // the emoji text, pretty-printed
	row := dxParked(t, inst, "demo:dx-1", 1)
	if msgs := dxSandbox(t, inst, row.ID); len(msgs) != 1 || msgs[0].Repeats != 0 {
		t.Fatalf("sandbox before any replay: %+v, want the one accepted message", msgs)
	}

	path := "/api/v1/dead-letters/" + strings.NewReplacer("+", "%2B", ":", "%3A").Replace(url.PathEscape(row.ID)) + "/replay"
	code, ans := dxPost(t, inst, path, "")
	if msg, _ := ans["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "may already have this message") || !strings.Contains(msg, row.ID) {
		t.Fatalf("replay without confirm: %d %v, want 409 naming the reason", code, ans)
	}
	if msgs := dxSandbox(t, inst, row.ID); len(msgs) != 1 || msgs[0].Repeats != 0 {
		t.Fatalf("the refused replay reached the provider: %+v", msgs)
	}

	code, ans = dxPost(t, inst, path, fmt.Sprintf(`{"confirm":%q}`, row.ID))
	if code != http.StatusOK || ans["status"] != "replayed" {
		t.Fatalf("confirmed replay: %d %v", code, ans)
	}
	// The sandbox refuses the second copy of the reference with a 409,
	// ambiguous by the spec, so the reply needs a person again.
	after := dxParked(t, inst, "demo:dx-1", 2)
	msgs := dxSandbox(t, inst, row.ID)
	if len(msgs) != 1 || msgs[0].Repeats != 1 {
		t.Errorf("sandbox after the confirmed replay: %+v, want one message for %s and one refused repeat", msgs, row.ID)
	}
	if after.ID != row.ID || !strings.Contains(after.Note, "refusing a second copy") {
		t.Errorf("row after the replay: %+v, want the same reference and the refusal in its note", after)
	}
	for _, a := range after.Attempts {
		if a.Action != "send" {
			t.Errorf("attempt %+v, want sends only", a)
		}
	}
	inst.stopCleanly()
}
