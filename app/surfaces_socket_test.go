package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// TestSlackSocketModeWired: the wired process with socket_mode and no
// signing secret opens the Socket Mode connection when it starts, posts
// the card, takes Approve over the socket (acked), sends the one reply and
// updates the card; POST /surfaces/slack answers 404; Stop closes it.
func TestSlackSocketModeWired(t *testing.T) {
	api := standin.NewSurfaceAPI(t, "xoxb-wired")
	sock := standin.NewSlackSocket(t, api, "xapp-1-A0WIRED-1-secret")
	env := map[string]string{"SLACK_BOT": "xoxb-wired", "SLACK_APP": "xapp-1-A0WIRED-1-secret"}
	cfg, err := config.Parse([]byte(`undo_window: 0s
approvals:
  sweep: 1s
  slack:
    bot_token_env: SLACK_BOT
    socket_mode: true
    app_token_env: SLACK_APP
    api_url: `+sock.URL+`
    channels: {default: C0DEMO}
    users: {U0DANA: dana}
`), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Channels {
		cfg.Channels[i].Coalesce = 0
	}
	a := apptest.Start(t, cfg, app.Deps{APIToken: token})
	base := apptest.URL(a)
	if err := a.Store().CreateUser(context.Background(), store.User{Name: "dana", Role: store.RoleApprover, PasswordHash: []byte("x"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c := sock.Next(t) // opened by Start, with no public URL anywhere
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234","name":"Zoë 🌸","text":"Thanks 👍🏽! Is the 🐟 & 🍟 combo still on?"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return len(api.Calls("chat.postMessage")) == 1 }, "the card posted in Slack")
	draftID := ""
	for _, b := range api.Calls("chat.postMessage")[0].Body["blocks"].([]any) {
		for _, e := range asList(b.(map[string]any)["elements"]) {
			if m, ok := e.(map[string]any); ok && m["action_id"] == "handoff.approve" {
				draftID, _ = m["value"].(string)
			}
		}
	}
	if draftID == "" {
		t.Fatal("the card has no Approve button")
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": "U0DANA", "username": "dana", "team_id": "T1"}, "team": map[string]any{"id": "T1"},
		"trigger_id": "1.2.3", "response_url": "https://hooks.slack.com/actions/T1/1/xyz",
		"actions": []any{map[string]any{"action_id": "handoff.approve", "block_id": "handoff.decide", "value": draftID, "type": "button"}},
	})
	c.Interactive(t, "env-wired-1", 0, payload)
	testkit.Eventually(t, 15*time.Second, func() bool {
		tl := eventTimeline(t, base, "m-1")
		return tl.Outbox != nil && tl.Outbox.Status == string(store.OutboxSent)
	}, "the reply sent")
	testkit.Eventually(t, 15*time.Second, func() bool {
		ups := api.Calls("chat.update")
		return len(ups) > 0 && strings.Contains(mustJSON(ups[len(ups)-1].Body["blocks"]), "Approved by dana via slack")
	}, "the card updated")
	req, _ := http.NewRequest(http.MethodPost, base+"/surfaces/slack", strings.NewReader("payload=%7B%7D"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /surfaces/slack in socket mode: %v, %v; want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	if n := sock.Opens(); n != 1 {
		t.Errorf("apps.connections.open calls = %d, want 1", n)
	}
}
