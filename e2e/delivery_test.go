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
	"github.com/handoff/handoff/testkit/standin"
)

// slowSendConfig auto-approves every draft of the demo channel to a sandbox
// provider that takes 2s per send, on 2 workers: a kill lands on sends in
// flight, with rows effect_pending.
const slowSendConfig = `workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: slow
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - {name: slow, kind: sandbox, delay: 2s}
retry: {base_delay: 100ms, max_delay: 1s}
`

// dlvOutbox is GET /api/v1/outbox/{id}, as far as these tests look.
type dlvOutbox struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Provider   string `json:"provider"`
	ProviderID string `json:"provider_id"`
	ApprovedBy string `json:"approved_by"`
	Note       string `json:"note"`
	Attempts   []struct {
		ExecutionID string `json:"execution_id"`
		Action      string `json:"action"`
		Outcome     string `json:"outcome"`
	} `json:"attempts"`
}

// dlvTimeline is the part of GET /api/v1/events/{key} about the reply.
type dlvTimeline struct {
	Jobs    []jobView  `json:"jobs"`
	Draft   *draftView `json:"draft"`
	Outbox  *dlvOutbox `json:"outbox"`
	Handoff *struct {
		Status string `json:"status"`
	} `json:"handoff"`
}

// standing tells where the timeline's event stands, for a wait's failure:
// its handoff, draft and outbox status, and each job with its attempts.
func (tl dlvTimeline) standing() string {
	var b strings.Builder
	if tl.Handoff != nil {
		fmt.Fprintf(&b, "handoff %s", tl.Handoff.Status)
	}
	if tl.Draft != nil {
		fmt.Fprintf(&b, "; draft %s", tl.Draft.Status)
	}
	if tl.Outbox != nil {
		fmt.Fprintf(&b, "; outbox %s %q", tl.Outbox.Status, tl.Outbox.Note)
	}
	for _, j := range tl.Jobs {
		fmt.Fprintf(&b, "; job %s %s attempt %d/%d %q", j.Kind, j.State, j.Attempt, j.MaxAttempts, j.LastError)
		for _, a := range j.Attempts {
			fmt.Fprintf(&b, " [%s %s–%s %s %q]", a.ExecutionID, a.StartedAt, a.EndedAt, a.Outcome, a.Error)
		}
	}
	return b.String()
}

// dlvSandboxMessage is one entry of GET /api/v1/sandbox/messages.
type dlvSandboxMessage struct {
	Ref     string `json:"client_ref"`
	ID      string `json:"id"`
	Repeats int    `json:"repeats"`
}

// dlvGet fetches path from the current process with the API token into v;
// it returns the status code (v is filled only on 200).
func dlvGet(i *instance, path string, v any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, i.cur().URL()+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+i.token)
	resp, err := i.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, v); err != nil {
			return resp.StatusCode, fmt.Errorf("GET %s: decoding %s: %w", path, raw, err)
		}
	}
	return resp.StatusCode, nil
}

// checkReadBack reads each demo-channel body's event back through the API
// and checks it shows exactly what was sent.
func checkReadBack(t *testing.T, inst *instance, bodies []corpus.Body) {
	t.Helper()
	for _, b := range bodies {
		v, err := inst.event("demo:" + b.Want.MessageID)
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		checkBodyRead(t, b, v)
	}
}

// dlvOutboxPath escapes the '+' and ':' of an outbox id.
func dlvOutboxPath(id string) string {
	return "/api/v1/outbox/" + strings.NewReplacer("+", "%2B", ":", "%3A").Replace(url.PathEscape(id))
}

// TestDeliveryCrashResolvesInFlightSends kills the server with SIGKILL while
// replies are effect_pending (the provider call under way), restarts it on
// the same data, and checks that every reply ends sent exactly once, by the
// same delivery job, whose killed attempt the restart released.
//
// The slow sandbox waits before it accepts, so the kill lands before the
// message arrived and a blind resend would pass here too; that a restart
// looks a delivered message up instead of resending it is what
// TestDeliveryCrashAfterAcceptedSend proves.
func TestDeliveryCrashResolvesInFlightSends(t *testing.T) {
	inst := startInstance(t, slowSendConfig)
	const n = 10
	keys := make([]string, n)
	bodies := make([]corpus.Body, n)
	for k := range n {
		id := fmt.Sprintf("dlv-%02d", k)
		conv := fmt.Sprintf("+1555010%04d", k)
		keys[k] = "demo:" + id
		bodies[k] = corpus.Message(0+k, id, conv, conv) // mixed layouts and texts
		inst.mustPostBody(bodies[k])
	}
	checkReadBack(t, inst, bodies)

	// Wait for a send in flight, seen through GET /api/v1/outbox/{id}.
	inFlight := ""
	testkit.Eventually(t, 20*time.Second, func() bool {
		for _, key := range keys {
			var tl dlvTimeline
			if code, err := dlvGet(inst, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
				t.Fatalf("GET event %s: %d %v", key, code, err)
			}
			if tl.Outbox == nil {
				continue
			}
			var row dlvOutbox
			if code, err := dlvGet(inst, dlvOutboxPath(tl.Outbox.ID), &row); err != nil || code != http.StatusOK {
				t.Fatalf("GET outbox %s: %d %v", tl.Outbox.ID, code, err)
			}
			if row.Status == "effect_pending" {
				inFlight = key
				return true
			}
		}
		return false
	}, "a reply to be effect_pending")
	inst.kill()
	inst.restart()

	// Every reply ends sent, and nothing else, with its jobs finished.
	final := map[string]dlvTimeline{}
	testkit.Eventually(t, 40*time.Second, func() bool {
		for _, key := range keys {
			if _, done := final[key]; done {
				continue
			}
			var tl dlvTimeline
			if code, err := dlvGet(inst, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
				t.Fatalf("GET event %s: %d %v", key, code, err)
			}
			if tl.Outbox == nil {
				return false
			}
			switch tl.Outbox.Status {
			case "sent":
				// The row is sent a moment before its job records its end.
				for _, j := range tl.Jobs {
					if j.State != jobCompleted && j.State != jobDiscarded && j.State != jobCancelled {
						return false
					}
				}
				final[key] = tl
			case "failed", "needs_reconciliation":
				t.Fatalf("reply of %s ended %s (%s); want sent", key, tl.Outbox.Status, tl.Outbox.Note)
			default:
				return false
			}
		}
		return true
	}, "every reply to be sent after the restart")

	var box struct {
		Messages []dlvSandboxMessage `json:"messages"`
	}
	if code, err := dlvGet(inst, "/api/v1/sandbox/messages?limit=1000", &box); err != nil || code != http.StatusOK {
		t.Fatalf("GET sandbox messages: %d %v", code, err)
	}
	byRef := map[string][]dlvSandboxMessage{}
	for _, m := range box.Messages {
		byRef[m.Ref] = append(byRef[m.Ref], m)
	}
	if len(box.Messages) != n {
		t.Errorf("the sandbox received %d messages, want %d (one per reply)", len(box.Messages), n)
	}
	for _, key := range keys {
		o := final[key].Outbox
		msgs := byRef[o.ID]
		if len(msgs) != 1 {
			t.Errorf("%s: %d sandbox messages for %s, want 1", key, len(msgs), o.ID)
			continue
		}
		if msgs[0].Repeats != 0 {
			t.Errorf("%s: sandbox message %s was sent %d more times; want 0 (a restart must look it up, not resend)", key, o.ID, msgs[0].Repeats)
		}
		if o.ProviderID != msgs[0].ID || o.Provider != "slow" || o.ApprovedBy != "auto-approve" {
			t.Errorf("%s: row sent through %s as %q approved by %q; want slow, the sandbox's id %q, auto-approve", key, o.Provider, o.ProviderID, o.ApprovedBy, msgs[0].ID)
		}
		if h := final[key].Handoff; h == nil || h.Status != "replied" {
			t.Errorf("%s: lead is %+v, want replied", key, h)
		}
		deliveries := 0
		for _, j := range final[key].Jobs {
			if j.Kind == "deliver" {
				deliveries++
			}
		}
		if deliveries != 1 {
			t.Errorf("%s: %d delivery jobs, want 1", key, deliveries)
		}
	}

	// The send that was under way when the process died was an attempt of
	// its own that the restart released, and the row was resolved after it.
	killed := final[inFlight]
	var lost bool
	for _, j := range killed.Jobs {
		if j.Kind != "deliver" {
			continue
		}
		for _, a := range j.Attempts {
			if a.Outcome == outcomeLeaseExpired {
				lost = true
			}
		}
		if j.State != jobCompleted {
			t.Errorf("%s: delivery job is %s, want completed", inFlight, j.State)
		}
	}
	if !lost {
		t.Errorf("%s: no delivery attempt was released by the restart (jobs %+v); the kill did not land mid-send", inFlight, killed.Jobs)
	}
	inst.stopCleanly()
}

// acceptedThenLostConfig auto-approves to a sandbox that records each
// message and then answers like a timeout, with retries far enough apart
// that a reply sits effect_pending, already delivered, for seconds.
const acceptedThenLostConfig = `workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: accepts
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - {name: accepts, kind: sandbox, timeout_after_accept: true}
retry: {base_delay: 4s, max_delay: 4s}
`

// TestDeliveryCrashAfterAcceptedSend kills the server while replies that
// the provider did receive are effect_pending (their answer was lost), and
// checks that the restarted server finds them by lookup instead of sending
// them again: the sandbox refuses and counts a second copy, so a blind
// resend shows as a failed row and a repeat.
func TestDeliveryCrashAfterAcceptedSend(t *testing.T) {
	inst := startInstance(t, acceptedThenLostConfig)
	const n = 3
	keys := make([]string, n)
	bodies := make([]corpus.Body, n)
	for k := range n {
		id := fmt.Sprintf("acc-%02d", k)
		conv := fmt.Sprintf("+1555020%04d", k)
		keys[k] = "demo:" + id
		bodies[k] = corpus.Message(40+k, id, conv, conv) // mixed layouts and texts
		inst.mustPostBody(bodies[k])
	}
	checkReadBack(t, inst, bodies)
	ids := map[string]string{}
	testkit.Eventually(t, 20*time.Second, func() bool {
		for _, key := range keys {
			var tl dlvTimeline
			if code, err := dlvGet(inst, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
				t.Fatalf("GET event %s: %d %v", key, code, err)
			}
			if tl.Outbox == nil {
				return false
			}
			var row dlvOutbox
			if code, err := dlvGet(inst, dlvOutboxPath(tl.Outbox.ID), &row); err != nil || code != http.StatusOK {
				t.Fatalf("GET outbox %s: %d %v", tl.Outbox.ID, code, err)
			}
			switch {
			case row.Status == "effect_pending" && len(row.Attempts) == 1:
				ids[key] = row.ID
			case row.Status == "effect_pending" || row.Status == "pending":
				return false
			default:
				t.Fatalf("%s: row is %s with %d attempts before the kill; want effect_pending after one ambiguous send (is retry.base_delay too short?)", key, row.Status, len(row.Attempts))
			}
		}
		return len(ids) == n
	}, "every reply to be effect_pending after an accepted send")
	inst.kill()
	inst.restart()

	final := map[string]dlvOutbox{}
	testkit.Eventually(t, 30*time.Second, func() bool {
		for _, key := range keys {
			var row dlvOutbox
			if code, err := dlvGet(inst, dlvOutboxPath(ids[key]), &row); err != nil || code != http.StatusOK {
				t.Fatalf("GET outbox %s: %d %v", ids[key], code, err)
			}
			switch row.Status {
			case "sent", "failed", "needs_reconciliation":
				final[key] = row
			default:
				return false
			}
		}
		return true
	}, "every reply to be resolved after the restart")
	var box struct {
		Messages []dlvSandboxMessage `json:"messages"`
	}
	if code, err := dlvGet(inst, "/api/v1/sandbox/messages?limit=1000", &box); err != nil || code != http.StatusOK {
		t.Fatalf("GET sandbox messages: %d %v", code, err)
	}
	byRef := map[string]dlvSandboxMessage{}
	for _, m := range box.Messages {
		byRef[m.Ref] = m
	}
	if len(box.Messages) != n {
		t.Errorf("the sandbox received %d messages, want %d", len(box.Messages), n)
	}
	for _, key := range keys {
		row, m := final[key], byRef[ids[key]]
		var steps []string
		for _, a := range row.Attempts {
			steps = append(steps, a.Action+":"+a.Outcome)
		}
		if row.Status != "sent" || strings.Join(steps, ",") != "send:ambiguous,lookup:sent" {
			t.Errorf("%s: row %s (%s) after %v; want sent, found by lookup after the ambiguous send", key, row.Status, row.Note, steps)
		}
		if m.ID == "" || m.Repeats != 0 || row.ProviderID != m.ID {
			t.Errorf("%s: sandbox message %+v, row sent as %q; want it received once, never again, and its id on the row", key, m, row.ProviderID)
		}
	}
	inst.stopCleanly()
}

// TestDeliveryCrashWhileProviderHoldsSend approves a reply by the API to an
// http provider in the test process, kills the server with SIGKILL while
// that provider holds the POST it has already stored, and restarts it on
// the same data. The provider cannot deduplicate (supports_idempotency_key:
// false), so a resend would deliver twice: the restarted server must ask
// lookup_url instead, and the row ends sent with the id the lookup gave.
func TestDeliveryCrashWhileProviderHoldsSend(t *testing.T) {
	// The fake provider (kind http) lives in the test process, so what it
	// received survives the kill of the binary. It records each send and
	// then holds the request until released; its lookup answers like a
	// provider that stored it: 200 with its id once the reference was
	// posted, 404 before.
	fake := standin.New(t, "http", standin.Held)
	inst := startInstance(t, fmt.Sprintf(`workers: 2
undo_window: 0s
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: fake
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - name: fake
    kind: http
    url: %[1]s
    lookup_url: "%[2]s"
    supports_idempotency_key: false
    timeout: 60s
retry: {base_delay: 100ms, max_delay: 1s}
`, fake.SendURL(), fake.LookupURL()))

	const key = "demo:held-1"
	// The long text, pretty-printed (Message 5: text 5 of 9, layout 5 of 8).
	body := corpus.Message(5, "held-1", "+15550030000", "+15550030000")
	inst.mustPostBody(body)
	checkReadBack(t, inst, []corpus.Body{body})
	draft := waitAllDrafted(t, inst, []string{key}, 20*time.Second)[key].Draft
	code, ans := dxPost(t, inst, "/api/v1/drafts/"+url.PathEscape(draft.ID)+"/approve", "")
	ref, _ := ans["outbox_id"].(string)
	if code != http.StatusOK || ans["status"] != "approved" || ref == "" {
		t.Fatalf("approve draft %s: %d %v; want 200 approved with an outbox id", draft.ID, code, ans)
	}

	// The provider has the message and holds the answer: the send is in flight.
	testkit.Eventually(t, 20*time.Second, func() bool {
		return len(fake.Sends()) > 0
	}, "the provider to receive the reply")
	var row dlvOutbox
	if code, err := dlvGet(inst, dlvOutboxPath(ref), &row); err != nil || code != http.StatusOK {
		t.Fatalf("GET outbox %s: %d %v", ref, code, err)
	}
	if row.Status != "effect_pending" || len(row.Attempts) != 0 {
		t.Fatalf("row %s is %s with %d attempts while the provider holds the send; want effect_pending with none recorded", ref, row.Status, len(row.Attempts))
	}
	inst.kill()
	inst.restart()
	fake.Release() // its answer goes to a dead connection

	testkit.Eventually(t, 30*time.Second, func() bool {
		if code, err := dlvGet(inst, dlvOutboxPath(ref), &row); err != nil || code != http.StatusOK {
			t.Fatalf("GET outbox %s: %d %v", ref, code, err)
		}
		return row.Status == "sent" || row.Status == "failed" || row.Status == "needs_reconciliation"
	}, "the reply to be resolved after the restart")
	posts, lookups := fake.Sends(), len(fake.Lookups())
	var mine []standin.Send
	for _, p := range posts {
		if p.Key == ref {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 || len(posts) != 1 {
		t.Fatalf("the provider received %d POSTs with Idempotency-Key %s (%d in all), want exactly 1: no resend after the crash", len(mine), ref, len(posts))
	}
	if mine[0].Ref != ref {
		t.Errorf("the POST's body has client_ref %q, want the Idempotency-Key %q: %s", mine[0].Ref, ref, mine[0].Body)
	}
	var sent struct {
		To             string `json:"to"`
		ConversationID string `json:"conversation_id"`
	}
	if err := json.Unmarshal(mine[0].Body, &sent); err != nil || sent.To != body.Want.Contact || sent.ConversationID != body.Want.Conversation {
		t.Errorf("the provider was sent %s, want the reply to %q in conversation %q", mine[0].Body, body.Want.Contact, body.Want.Conversation)
	}
	var steps []string
	for _, a := range row.Attempts {
		steps = append(steps, a.Action+":"+a.Outcome)
	}
	if row.Status != "sent" || row.ProviderID != mine[0].ID || strings.Join(steps, ",") != "lookup:sent" || lookups == 0 {
		t.Errorf("row %s ended %s as %q (%s) after %v with %d lookups; want sent as %q, found by lookup",
			ref, row.Status, row.ProviderID, row.Note, steps, lookups, mine[0].ID)
	}

	// The killed send was an attempt of its own, released by the restart;
	// the next one found the message. (The row is sent a moment before its
	// job records its end, hence the wait.)
	var deliver jobView
	testkit.Eventually(t, 10*time.Second, func() bool {
		var tl dlvTimeline
		if code, err := dlvGet(inst, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
			t.Fatalf("GET event %s: %d %v", key, code, err)
		}
		for _, j := range tl.Jobs {
			if j.Kind == "deliver" {
				deliver = j
			}
		}
		return deliver.State == jobCompleted
	}, "the delivery job to complete")
	var outcomes []string
	for _, a := range deliver.Attempts {
		outcomes = append(outcomes, a.Outcome)
	}
	if want := outcomeLeaseExpired + "," + outcomeCompleted; strings.Join(outcomes, ",") != want {
		t.Errorf("delivery job attempts %v; want %s: the killed send, then the lookup", outcomes, want)
	}
	inst.stopCleanly()
}
