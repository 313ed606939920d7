package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestApprovals: the approvals surfaces decode with their defaults and
// their secrets from the environment, and each mistake is one sentence
// that names the key.
func TestApprovals(t *testing.T) {
	const head = "clients: [{id: acme}, {id: bolt}]\n" +
		"channels:\n  - {name: web, client: acme, fields: {message_id: /id}}\n  - {name: sms, client: bolt, fields: {message_id: /id}}\n"
	env := func(k string) string {
		return map[string]string{"SLACK_BOT": "xoxb-1", "SLACK_SIGNING": "sig", "TG_BOT": "123:abc", "TG_HOOK": "hook_secret-1"}[k]
	}
	c, err := Parse([]byte(head+"approvals:\n"+
		"  sweep: 5s\n"+
		"  slack:\n    bot_token_env: SLACK_BOT\n    signing_secret_env: SLACK_SIGNING\n    channels: {acme: C0ACME, bolt: G0BOLT}\n    users: {U0DANA: dana}\n"+
		"  telegram:\n    bot_token_env: TG_BOT\n    webhook_secret_env: TG_HOOK\n    chats: {acme: \"-1001234567890\"}\n    users: {\"42\": dana}\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a := c.Approvals
	wantSlack := &SlackSurface{BotTokenEnv: "SLACK_BOT", BotToken: "xoxb-1", SigningSecretEnv: "SLACK_SIGNING", SigningSecret: "sig",
		APIURL: DefaultSlackAPI, Channels: map[string]string{"acme": "C0ACME", "bolt": "G0BOLT"}, Users: map[string]string{"U0DANA": "dana"}}
	wantTG := &TelegramSurface{BotTokenEnv: "TG_BOT", BotToken: "123:abc", WebhookSecretEnv: "TG_HOOK", WebhookSecret: "hook_secret-1",
		APIURL: DefaultTelegramAPI, Chats: map[string]string{"acme": "-1001234567890"}, Users: map[string]string{"42": "dana"}}
	if a.Sweep != 5*time.Second || !reflect.DeepEqual(a.Slack, wantSlack) || !reflect.DeepEqual(a.Telegram, wantTG) || !a.Any() {
		t.Errorf("Approvals = %+v\n slack %+v\n telegram %+v", a, a.Slack, a.Telegram)
	}
	if none, err := Parse([]byte(head), env); err != nil || none.Approvals.Any() || none.Approvals.SweepEvery() != DefaultSweep {
		t.Errorf("without approvals: %+v, %v", none.Approvals, err)
	}

	slack := "  slack:\n    bot_token_env: SLACK_BOT\n    signing_secret_env: SLACK_SIGNING\n"
	bad := []struct{ yaml, err string }{
		{"  sweep: 100ms\n", "approvals.sweep: 100ms is outside 1s to 1m"},
		{"  teams: {}\n", `approvals: unknown key "teams"`},
		{"  slack:\n    signing_secret_env: SLACK_SIGNING\n    channels: {acme: C0ACME}\n", "approvals.slack.bot_token_env: missing; name the variable holding the bot's xoxb- token"},
		{"  slack:\n    bot_token_env: SLACK_BOT\n    channels: {acme: C0ACME}\n", "approvals.slack.signing_secret_env: missing"},
		{slack, "approvals.slack.channels: missing; map each client to the Slack channel"},
		{slack + "    channels: {acme: \"#approvals\"}\n", `approvals.slack.channels.acme: "#approvals" is not a Slack channel id`},
		{slack + "    channels: {nobody: C0ACME}\n", `approvals.slack.channels.nobody: client "nobody" is not defined (one of: acme, bolt)`},
		{slack + "    channels: {acme: C0ACME}\n    users: {dana: dana}\n", `approvals.slack.users.dana: "dana" is not a Slack member id`},
		{slack + "    channels: {acme: C0ACME}\n    users: {U0DANA: \"\"}\n", "approvals.slack.users.U0DANA: must be a non-empty string"},
		{"  slack:\n    bot_token_env: UNSET_VAR\n    signing_secret_env: SLACK_SIGNING\n    channels: {acme: C0ACME}\n", "approvals.slack.bot_token_env: environment variable UNSET_VAR is not set or is empty"},
		{"  slack:\n    bot_token_env: xoxb-pasted-secret\n    signing_secret_env: SLACK_SIGNING\n    channels: {acme: C0ACME}\n", "approvals.slack.bot_token_env: is not an environment variable name"},
		{"  slack:\n" + "    bot_token_env: SLACK_BOT\n    signing_secret_env: SLACK_SIGNING\n    channels: {acme: C0ACME}\n    api_url: ftp://x\n", "approvals.slack.api_url:"},
		{"  telegram:\n    bot_token_env: TG_BOT\n    webhook_secret_env: TG_HOOK\n    chats: {acme: \"-100\"}\n", "approvals.telegram.users: missing; map each approver's Telegram user id"},
		{"  telegram:\n    bot_token_env: TG_BOT\n    webhook_secret_env: TG_HOOK\n    chats: {acme: approvers}\n    users: {\"42\": dana}\n", `approvals.telegram.chats.acme: "approvers" is not a Telegram chat id`},
		{"  telegram:\n    bot_token_env: TG_BOT\n    webhook_secret_env: TG_HOOK\n    chats: {acme: \"-100\"}\n    users: {dana: dana}\n", `approvals.telegram.users.dana: "dana" is not a Telegram user id`},
		{"  telegram:\n    bot_token_env: TG_BOT\n    webhook_secret_env: SLACK_BOT\n    chats: {acme: \"-100\"}\n    users: {\"42\": dana}\n", "approvals.telegram.webhook_secret_env: environment variable SLACK_BOT must be 1 to 256 of A-Z"},
	}
	for _, b := range bad {
		_, err := Parse([]byte(head+"approvals:\n"+b.yaml), func(k string) string {
			if k == "SLACK_BOT" {
				return "xoxb:not/a+token" // also a webhook secret Telegram refuses
			}
			return env(k)
		})
		if err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("approvals:\n%s\n got %v\n want %q", b.yaml, err, b.err)
			continue
		}
		if strings.Contains(err.Error(), "xoxb:not") || strings.Contains(err.Error(), "hook_secret-1") {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
}
