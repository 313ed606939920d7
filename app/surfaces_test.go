package app_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
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

// TestSlackSurfaceWired: the wired process announces a waiting draft on
// Slack by its sweep (one chat.postMessage), takes a signed Approve at
// POST /surfaces/slack, sends the one reply, and the card follows
// (chat.update); an unknown surface is a 404.
func TestSlackSurfaceWired(t *testing.T) {
	api := standin.NewSurfaceAPI(t, "xoxb-wired")
	const secret = "wired-signing-secret"
	env := map[string]string{"SLACK_BOT": "xoxb-wired", "SLACK_SIGNING": secret}
	cfg, err := config.Parse([]byte(`undo_window: 0s
approvals:
  sweep: 1s
  slack:
    bot_token_env: SLACK_BOT
    signing_secret_env: SLACK_SIGNING
    api_url: `+api.URL+`
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
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234","name":"Ada","text":"Is the blue one in stock?"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return len(api.Calls("chat.postMessage")) == 1 }, "the card posted in Slack")
	post := api.Calls("chat.postMessage")[0]
	draftID := ""
	for _, b := range post.Body["blocks"].([]any) {
		for _, e := range asList(b.(map[string]any)["elements"]) {
			if m, ok := e.(map[string]any); ok && m["action_id"] == "handoff.approve" {
				draftID, _ = m["value"].(string)
			}
		}
	}
	if draftID == "" || post.Body["channel"] != "C0DEMO" {
		t.Fatalf("the card = %+v", post.Body)
	}

	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": "U0DANA", "username": "dana", "team_id": "T1"}, "team": map[string]any{"id": "T1"},
		"trigger_id": "1.2.3", "response_url": api.ResponseURL("r1"),
		"actions": []any{map[string]any{"action_id": "handoff.approve", "block_id": "handoff.decide", "value": draftID, "type": "button"}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":" + body))
	post2 := func(path string) int {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	big, _ := http.NewRequest(http.MethodPost, base+"/surfaces/slack", strings.NewReader(strings.Repeat("x", 2<<20)))
	if resp, err := http.DefaultClient.Do(big); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB body: %v, %v; want 413", resp, err)
	} else {
		resp.Body.Close()
	}
	if code := post2("/surfaces/nope"); code != http.StatusNotFound {
		t.Errorf("POST /surfaces/nope: %d, want 404", code)
	}
	if code := post2("/surfaces/slack"); code != http.StatusOK {
		t.Fatalf("POST /surfaces/slack: %d, want 200", code)
	}
	if code := post2("/surfaces/slack"); code != http.StatusUnauthorized {
		t.Errorf("the same request again: %d, want 401 (a replay)", code)
	}
	testkit.Eventually(t, 15*time.Second, func() bool {
		tl := eventTimeline(t, base, "m-1")
		return tl.Outbox != nil && tl.Outbox.Status == string(store.OutboxSent)
	}, "the reply sent")
	testkit.Eventually(t, 15*time.Second, func() bool {
		ups := api.Calls("chat.update")
		return len(ups) > 0 && strings.Contains(mustJSON(ups[len(ups)-1].Body["blocks"]), "Approved by dana via slack")
	}, "the card updated")
	if n := len(api.Calls("chat.postMessage")); n != 1 {
		t.Errorf("chat.postMessage calls = %d, want 1", n)
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
