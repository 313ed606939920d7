package outbound_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

const apiToken = "events-test-token-1234"

func call(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %q", method, url, err, raw)
		}
	}
	return resp.StatusCode
}

// TestWiredProcess: the whole process (app) with a subscriber: a webhook
// in, its draft, its approval, its reply through the sandbox — and the
// subscriber hears each status change, the approval and the sent reply,
// once each, the first of them after a 500, posted by the process's own
// delivery job.
func TestWiredProcess(t *testing.T) {
	rc := newReceiver(t)
	rc.add(config.EventLeadStatusChanged, "500")
	cfg := config.Default()
	cfg.Channels[0].Coalesce, cfg.UndoWindow = 0, 0
	cfg.BaseURL = "https://handoff.example.com"
	cfg.Events = []config.Subscriber{{Name: "n8n", URL: rc.srv.URL, Secret: secret, Timeout: 2 * time.Second}}
	base := apptest.URL(apptest.Start(t, cfg, app.Deps{APIToken: apiToken}))
	text := corpus.Texts()[2] // Arabic
	in, _ := json.Marshal(map[string]string{"id": "m-1", "from": "+15550001234", "text": text.Body, "conversation_id": "c-1"})
	if code := call(t, http.MethodPost, base+"/hooks/demo", string(in), nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	var tl struct {
		Draft *struct {
			ID string `json:"id"`
		} `json:"draft"`
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		call(t, http.MethodGet, base+"/api/v1/events/demo:m-1", "", &tl)
		return tl.Draft != nil
	}, "the draft")
	if code := call(t, http.MethodPost, base+"/api/v1/drafts/"+tl.Draft.ID+"/approve", "", nil); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("approve: %d", code)
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		got := typesOf(rc.events())
		return got[config.EventReplySent] == 1 && got[config.EventLeadStatusChanged] == 4 && got[config.EventDraftApproved] == 1
	}, "the status changes, the approval and the sent reply")
	evs := rc.events()
	if len(evs) != 6 {
		t.Errorf("acted on %v, want six events", typesOf(evs))
	}
	_, approved := byKey(t, evs, config.EventDraftApproved, tl.Draft.ID)
	if approved.Data.Lead != "demo:c-1" || approved.Data.Text == "" || approved.Data.Link != cfg.BaseURL+"/events/demo:m-1" {
		t.Errorf("draft.approved = %+v", approved.Data)
	}
	_, recv := byKey(t, evs, config.EventLeadStatusChanged, "1:received")
	if recv.Data.Status != "received" || recv.Data.Client != config.DefaultClient.ID {
		t.Errorf("lead.status_changed = %+v", recv.Data)
	}
}

// TestWiredDeadEventReplay: in the whole process, an event the subscriber
// refuses is on the dead-letter list the API gives (safe to replay), and a
// person's replay there posts it once, under its webhook-id.
func TestWiredDeadEventReplay(t *testing.T) {
	rc := newReceiver(t)
	rc.add(config.EventDraftApproved, "400")
	cfg := config.Default()
	cfg.Channels[0].Coalesce, cfg.UndoWindow = 0, 0
	cfg.Events = []config.Subscriber{{Name: "n8n", URL: rc.srv.URL, Secret: secret, Timeout: 2 * time.Second, Types: []string{config.EventDraftApproved}}}
	base := apptest.URL(apptest.Start(t, cfg, app.Deps{APIToken: apiToken}))
	in, _ := json.Marshal(map[string]string{"id": "m-1", "from": "+15550001234", "text": corpus.Texts()[1].Body, "conversation_id": "c-1"})
	if code := call(t, http.MethodPost, base+"/hooks/demo", string(in), nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	var tl struct {
		Draft *struct {
			ID string `json:"id"`
		} `json:"draft"`
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		call(t, http.MethodGet, base+"/api/v1/events/demo:m-1", "", &tl)
		return tl.Draft != nil
	}, "the draft")
	if code := call(t, http.MethodPost, base+"/api/v1/drafts/"+tl.Draft.ID+"/approve", "", nil); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("approve: %d", code)
	}
	rowID := outbound.RowID("demo:c-1", "n8n", config.EventDraftApproved, tl.Draft.ID)
	type item struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
		Safe bool   `json:"safe"`
	}
	var list struct {
		DeadLetters []item `json:"dead_letters"`
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		call(t, http.MethodGet, base+"/api/v1/dead-letters?kind=outbox", "", &list)
		return len(list.DeadLetters) > 0
	}, "the refused event on the dead-letter list")
	if len(list.DeadLetters) != 1 || list.DeadLetters[0].ID != rowID || !list.DeadLetters[0].Safe {
		t.Fatalf("dead letters = %+v, want the event %s alone, safe", list.DeadLetters, rowID)
	}
	if code := call(t, http.MethodPost, base+"/api/v1/dead-letters/"+rowID+"/replay", "", nil); code != http.StatusOK {
		t.Fatalf("replay: %d, want 200 (no confirmation: a subscriber dedupes)", code)
	}
	id := outbound.MessageID(rowID)
	testkit.Eventually(t, 20*time.Second, func() bool { _, ok := rc.events()[id]; return ok }, "the replayed event")
	if rc.requests(id) != 2 || len(rc.events()) != 1 {
		t.Errorf("%d requests of %s and %d events acted on; want 2 (refused, replayed) and 1", rc.requests(id), id, len(rc.events()))
	}
	if code := call(t, http.MethodPost, base+"/api/v1/dead-letters/"+rowID+"/replay", "", nil); code != http.StatusConflict {
		t.Errorf("a second replay: %d, want 409 (it was sent)", code)
	}
}
