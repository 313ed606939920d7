package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/webhook"
)

const eventsSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// eventsReceiver is a subscriber of the outbound events: it verifies each
// signature, and keeps, per business event (type, lead, key), every
// webhook-id it came under and how many requests each took.
type eventsReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids map[string]map[string]int // "<type> <lead> <key>" → webhook-id → requests
	n   int
	// The holdAt-th request is recorded and then held unanswered (its
	// business event in held) until the process that sent it is gone.
	holdAt int
	held   string
	caught chan struct{} // closed when the held request arrived
}

func newEventsReceiver(t *testing.T) *eventsReceiver {
	v, err := webhook.NewVerifier(eventsSecret, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc := &eventsReceiver{ids: map[string]map[string]int{}, holdAt: 10, caught: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := v.Verify(r.Header, body, time.Now()); err != nil {
			t.Errorf("event signature: %v", err)
			w.WriteHeader(401)
			return
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Key  string `json:"key"`
				Lead string `json:"lead"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("event body %s: %v", body, err)
			w.WriteHeader(400)
			return
		}
		k := ev.Type + " " + ev.Data.Lead + " " + ev.Data.Key
		rc.mu.Lock()
		if rc.ids[k] == nil {
			rc.ids[k] = map[string]int{}
		}
		rc.ids[k][r.Header.Get("webhook-id")]++
		rc.n++
		hold := rc.n == rc.holdAt
		if hold {
			rc.held = k
		}
		rc.mu.Unlock()
		if hold {
			// Taken, and the answer never reaches its sender: the kill
			// comes first, and the connection goes with the process.
			close(rc.caught)
			<-r.Context().Done()
			return
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *eventsReceiver) requests() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n
}

// TestEventsOnceAcrossKill: the process is killed (SIGKILL) while it posts
// the leads' status changes to a subscriber, and restarted on the same
// data: every lead's received, matched and owned arrive, each business
// event under one webhook-id only (what a receiver dedupes by), none
// missing, none extra — the kill can cost a resend, never a second id. The
// post in flight at the kill (taken, never answered) is resent.
func TestEventsOnceAcrossKill(t *testing.T) {
	rc := newEventsReceiver(t)
	config := fmt.Sprintf(`workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id}
    coalesce: 0s
retry: {max_attempts: 20, base_delay: 50ms, max_delay: 500ms}
events:
  - url: %s
    secret_env: E2E_EVENTS_SECRET
    types: [lead.status_changed]
`, rc.srv.URL)
	env := "E2E_EVENTS_SECRET=" + eventsSecret
	inst := startInstance(t, config, env)
	inst.files.Env = append(inst.files.Env, env) // every later run too
	const n = 30
	for i := range n {
		inst.mustPostBody(demoBody(fmt.Sprintf("ev-%02d", i)))
	}
	select {
	case <-rc.caught:
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d events were posted in 30s", rc.requests())
	}
	inst.kill() // the held post in flight, taken by the subscriber, unanswered
	inst.restart()
	want := map[string]bool{}
	for i := range n {
		lead := fmt.Sprintf("demo:conv-ev-%02d", i)
		for _, st := range []string{"received", "matched", "owned"} {
			want["lead.status_changed "+lead+" 1:"+st] = true
		}
	}
	testkit.Eventually(t, 60*time.Second, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.ids) >= len(want)
	}, "every lead's status changes")
	inst.stopCleanly()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	resent := 0
	for k, ids := range rc.ids {
		if !want[k] {
			t.Errorf("an event nobody caused: %s", k)
		}
		if len(ids) != 1 {
			t.Errorf("%s arrived under %d webhook-ids %v, want one", k, len(ids), ids)
		}
		for _, c := range ids {
			resent += c - 1
		}
	}
	if len(rc.ids) != len(want) {
		t.Errorf("%d business events arrived, want %d", len(rc.ids), len(want))
	}
	for id, c := range rc.ids[rc.held] {
		if c < 2 {
			t.Errorf("the event in flight at the kill (%s) came %d time(s) under %s, want resent by the next run", rc.held, c, id)
		}
	}
	t.Logf("%d events, %d requests, %d of them resends", len(rc.ids), rc.n, resent)
}
