package config

import (
	"strings"
	"testing"
)

// TestSlackSocketMode: socket_mode takes an app-level token instead of a
// signing secret; a missing or wrong token is one sentence naming the key.
func TestSlackSocketMode(t *testing.T) {
	const head = "clients: [{id: acme}]\nchannels:\n  - {name: web, client: acme, fields: {message_id: /id}}\napprovals:\n  slack:\n    bot_token_env: SLACK_BOT\n    channels: {acme: C0ACME}\n"
	env := func(k string) string {
		return map[string]string{"SLACK_BOT": "xoxb-1", "SLACK_APP": "xapp-1-A0-1-abc", "NOT_APP": "xoxb-2"}[k]
	}
	c, err := Parse([]byte(head+"    socket_mode: true\n    app_token_env: SLACK_APP\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s := c.Approvals.Slack; !s.SocketMode || s.AppToken != "xapp-1-A0-1-abc" || s.AppTokenEnv != "SLACK_APP" || s.SigningSecret != "" {
		t.Errorf("slack = %+v", s)
	}
	for _, b := range []struct{ yaml, err string }{
		{"    socket_mode: true\n", "approvals.slack.app_token_env: missing; socket_mode needs the variable holding the app-level xapp- token"},
		{"    socket_mode: true\n    app_token_env: NOT_APP\n", "approvals.slack.app_token_env: environment variable NOT_APP does not hold an app-level token (xapp-"},
		{"    socket_mode: yes please\n    app_token_env: SLACK_APP\n", "approvals.slack.socket_mode:"},
		{"    app_token_env: SLACK_APP\n", "approvals.slack.signing_secret_env: missing"},
		{"    signing_secret_env: SLACK_APP\n    app_token_env: SLACK_APP\n", "approvals.slack.app_token_env: is read only with socket_mode: true"},
	} {
		_, err := Parse([]byte(head+b.yaml), env)
		if err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("%q: error %v, want %q", b.yaml, err, b.err)
		}
		if err != nil && strings.Contains(err.Error(), "xoxb-2") {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
}
