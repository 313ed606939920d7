package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
)

// sdModel is the fake model held shut: it holds every call until it is
// released, or until its caller hangs up (then the call is not answered).
func newSDModel(t *testing.T) *testkit.Model {
	t.Helper()
	m := newDFModel(t)
	m.Hold()
	return m
}

// sdMostAtOnce is, per lead (read from the messages a call carries:
// "part <lead>-<n>"), the most calls that were in flight at the model at
// once.
func sdMostAtOnce(visits []testkit.ModelVisit) map[string]int {
	type edge struct{ at, delta int }
	edges := map[string][]edge{}
	for _, v := range visits {
		lead := ""
		if _, rest, ok := bytes.Cut(v.Body, []byte("part lead-")); ok && len(rest) > 0 {
			lead = "lead-" + string(rest[:1])
		}
		out := v.Out
		if out == 0 {
			out = math.MaxInt // still in flight
		}
		edges[lead] = append(edges[lead], edge{v.In, +1}, edge{out, -1})
	}
	most := map[string]int{}
	for lead, es := range edges {
		slices.SortFunc(es, func(a, b edge) int { return cmp.Compare(a.at, b.at) })
		n := 0
		for _, e := range es {
			n += e.delta
			most[lead] = max(most[lead], n)
		}
	}
	return most
}

// sdPost sends message id of lead to the chat channel and insists on 202.
func sdPost(t *testing.T, i *instance, lead, id string) {
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
	inst := startInstance(t, tnConfig(model.URL, "0s")) // workers: 4
	leads := []string{"lead-a", "lead-b", "lead-c", "lead-d"}
	for _, lead := range leads {
		sdPost(t, inst, lead, lead+"-0")
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		return model.Waiting() == 4
	}, "four drafting calls at the model")
	for n := 1; n <= 10; n++ {
		sdPost(t, inst, "lead-a", fmt.Sprintf("lead-a-%d", n))
	}
	// lead-a's burst waits for its running draft: still four calls.
	if held := model.Waiting(); held != 4 {
		t.Errorf("%d drafting calls at the model after lead-a's burst; want still 4, one per lead", held)
	}

	inst.client.CloseIdleConnections()
	stopped := inst.cur()
	if err := inst.stop(dockerStopWait); err != nil {
		t.Fatalf("SIGTERM with four drafts in flight: %v; want exit 0 within docker stop's %v", err, dockerStopWait)
	}
	// The model server sees each hang-up on its own handler goroutine.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return model.Waiting() == 0
	}, "the cut calls hung up at the model")
	if out := stopped.Tail(200); strings.Contains(out, "stopped with jobs still running") {
		t.Errorf("the stop waited out its grace for running jobs; want the drafts cancelled at once:\n%s", out)
	}
	if n := len(model.Calls()); n != 0 {
		t.Fatalf("the model answered %d calls before the restart; it was held shut", n)
	}

	model.Release()
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
	if n := len(model.Calls()); n != len(leads) {
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
	most := sdMostAtOnce(model.Visits())
	for _, l := range leads {
		if len(most) != len(leads) || most[l] != 1 {
			t.Errorf("model calls in flight at once, most per lead: %v; want 1 for each of %v", most, leads)
			break
		}
	}
	inst.stopCleanly()
}
