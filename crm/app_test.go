package crm_test

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
)

const apiToken = "crm-test-token-1234"

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

// TestWiredProcess: the whole process (app) with a HubSpot CRM: a webhook
// in, its draft, its approval — and the contact carries each status, the
// last one replied, written by the process's own delivery job.
func TestWiredProcess(t *testing.T) {
	hs := newHubSpot(t)
	hs.add("upsert", "drop") // the first write's answer is lost: resent
	cfg := config.Default()
	cfg.Channels[0].Coalesce, cfg.UndoWindow = 0, 0
	cfg.CRM = []config.CRM{{Client: config.DefaultClient.ID, Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token,
		IDProperty: "handoff_lead_key", StatusProperty: "handoff_status", Timeout: 2 * time.Second, Required: true}}
	base := apptest.URL(apptest.Start(t, cfg, app.Deps{APIToken: apiToken}))
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234","text":"call me","conversation_id":"c-1"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	var tl struct {
		Draft *struct {
			ID string `json:"id"`
		} `json:"draft"`
		Outbox *struct {
			Status string `json:"status"`
		} `json:"outbox"`
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		call(t, http.MethodGet, base+"/api/v1/events/demo:m-1", "", &tl)
		return tl.Draft != nil
	}, "the draft")
	if code := call(t, http.MethodPost, base+"/api/v1/drafts/"+tl.Draft.ID+"/approve", "", nil); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("approve: %d", code)
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		return hs.contact("demo:c-1")["handoff_status"] == "replied"
	}, "the contact to say replied")
	c := hs.contact("demo:c-1")
	if c["phone"] != "+15550001234" || c["handoff_last_message"] != "call me" {
		t.Errorf("contact = %v, want the phone and the last message", c)
	}
	if hs.count() != 1 {
		t.Errorf("%d contacts, want 1", hs.count())
	}
}
