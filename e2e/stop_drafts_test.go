package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
)

// sdModel is a slow model server: it holds every call until open is
// closed, or until its caller hangs up (then the call is not answered),
// and counts the calls in flight per lead (read from the messages the
// call carries: "part <lead>-<n>").
type sdModel struct {
	srv  *httptest.Server
	next *dfModel // answers once open
	open chan struct{}

	mu       sync.Mutex
	inFlight map[string]int
	most     map[string]int
	held     int // calls in flight now, all leads
}

func newSDModel(t *testing.T) *sdModel {
	t.Helper()
	m := &sdModel{next: newDFModel(t), open: make(chan struct{}), inFlight: map[string]int{}, most: map[string]int{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *sdModel) serve(w http.ResponseWriter, r *http.Request) {
	// Read the body first: only then does the server watch the connection
	// and end r's context when the caller is gone.
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	lead := ""
	if _, rest, ok := bytes.Cut(body, []byte("part lead-")); ok && len(rest) > 0 {
		lead = "lead-" + string(rest[:1])
	}
	m.mu.Lock()
	m.inFlight[lead]++
	m.most[lead] = max(m.most[lead], m.inFlight[lead])
	m.held++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inFlight[lead]--
		m.held--
		m.mu.Unlock()
	}()
	select {
	case <-m.open:
		m.next.serve(w, r)
	case <-r.Context().Done():
	}
}

// post sends message id of lead to the chat channel and insists on 202.
func (m *sdModel) post(t *testing.T, i *instance, lead, id string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"id": id, "conversation_id": lead, "from": lead + "@example.com", "name": "Ada", "text": "part " + id})
	resp, err := i.client.Post(i.cur().URL()+"/hooks/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST /hooks/chat %s: %v", id, err)
	}
	defer resp.Body.Close()
	var reply hookReply
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /hooks/chat %s = %d %+v, %v; want 202", id, resp.StatusCode, reply, err)
	}
}

func (m *sdModel) calls() (held int, most map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	most = map[string]int{}
	for k, v := range m.most {
		most[k] = v
	}
	return m.held, most
}

// TestStopCancelsDraftsInFlight: four leads' drafts in flight at a model
// that will not answer, one of the leads writing ten more messages
// meanwhile, then SIGTERM as `docker stop` sends it. The process cancels
// the drafting calls (the model sees them hang up) without waiting for
// its shutdown grace to run out, exits 0 inside docker's wait, and stores
// nothing of the cut calls. After the restart every lead's turn is
// drafted once, answering each of its messages, and replied to once; no
// lead ever had two model calls in flight.
func TestStopCancelsDraftsInFlight(t *testing.T) {
	model := newSDModel(t)
	inst := startInstance(t, tnConfig(model.srv.URL, "0s")) // workers: 4
	leads := []string{"lead-a", "lead-b", "lead-c", "lead-d"}
	for _, lead := range leads {
		model.post(t, inst, lead, lead+"-0")
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		held, _ := model.calls()
		return held == 4
	}, "four drafting calls at the model")
	for n := 1; n <= 10; n++ {
		model.post(t, inst, "lead-a", fmt.Sprintf("lead-a-%d", n))
	}
	// lead-a's burst waits for its running draft: still four calls.
	if held, _ := model.calls(); held != 4 {
		t.Errorf("%d drafting calls at the model after lead-a's burst; want still 4, one per lead", held)
	}

	inst.client.CloseIdleConnections()
	stopped := inst.cur()
	if err := inst.stop(dockerStopWait); err != nil {
		t.Fatalf("SIGTERM with four drafts in flight: %v; want exit 0 within docker stop's %v", err, dockerStopWait)
	}
	// The model server sees each hang-up on its own handler goroutine.
	testkit.Eventually(t, 10*time.Second, func() bool {
		held, _ := model.calls()
		return held == 0
	}, "the cut calls hung up at the model")
	if out := stopped.Tail(200); strings.Contains(out, "stopped with jobs still running") {
		t.Errorf("the stop waited out its grace for running jobs; want the drafts cancelled at once:\n%s", out)
	}
	if n := len(model.next.Calls()); n != 0 {
		t.Fatalf("the model answered %d calls before the restart; it was held shut", n)
	}

	close(model.open)
	inst.restart()
	testkit.Eventually(t, 30*time.Second, func() bool { return len(tnReplies(t, inst)) == len(leads) }, "one reply per lead")
	testkit.Eventually(t, 10*time.Second, func() bool { return len(tnDrafts(t, inst, "pending_approval")) == 0 }, "no draft waiting")
	got := tnReplies(t, inst)
	for _, l := range leads {
		if len(got) != len(leads) || got[l] != 1 {
			t.Errorf("replies per lead = %v; want one each", got)
			break
		}
	}
	want := map[string]int{"lead-a": 11, "lead-b": 1, "lead-c": 1, "lead-d": 1}
	approved := tnDrafts(t, inst, "approved")
	if len(approved) != len(leads) {
		t.Fatalf("%d approved drafts; want one per lead: %+v", len(approved), approved)
	}
	for _, d := range approved {
		if len(d.Answers) != want[d.ConversationID] {
			t.Errorf("lead %s: its draft answers %d messages; want %d", d.ConversationID, len(d.Answers), want[d.ConversationID])
		}
	}
	if n := len(model.next.Calls()); n != len(leads) {
		t.Errorf("the model answered %d calls; want one per lead (%d)", n, len(leads))
	}
	// The attempt the stop cut short is closed, and never a reason to
	// discard: the job is done, not a dead letter.
	v, err := inst.event("chat:lead-b-0")
	if err != nil {
		t.Fatal(err)
	}
	var drafts []jobView
	for _, j := range v.Jobs {
		if j.Kind == "draft" {
			drafts = append(drafts, j)
		}
	}
	if len(drafts) != 1 || drafts[0].State != jobCompleted || len(drafts[0].Attempts) != 2 || !strings.Contains(drafts[0].Attempts[0].Error, "shutdown") || drafts[0].Attempts[0].EndedAt == "" {
		t.Errorf("lead-b's draft jobs: %+v; want one, completed after two attempts, the first closed by the shutdown", drafts)
	}
	_, most := model.calls()
	for _, l := range leads {
		if len(most) != len(leads) || most[l] != 1 {
			t.Errorf("model calls in flight at once, most per lead: %v; want 1 for each of %v", most, leads)
			break
		}
	}
	inst.stopCleanly()
}
