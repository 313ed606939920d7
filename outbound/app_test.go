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
