package config

import (
	"strings"
	"testing"
	"time"
)

// TestReminders: remind_after, escalate_after and each surface's
// escalate_to decode, and review.window_warning with its default; each
// mistake is one sentence naming the key.
func TestReminders(t *testing.T) {
	const head = "clients: [{id: acme}, {id: bolt}]\n" +
		"channels:\n  - {name: web, client: acme, fields: {message_id: /id}}\n"
	env := func(k string) string {
		return map[string]string{"SLACK_BOT": "xoxb-1", "SLACK_SIGNING": "sig", "TG_BOT": "123:abc", "TG_HOOK": "hook"}[k]
	}
	slack := "  slack:\n    bot_token_env: SLACK_BOT\n    signing_secret_env: SLACK_SIGNING\n    channels: {acme: C0ACME}\n"
	c, err := Parse([]byte(head+"review: {window_warning: 90m}\napprovals:\n  remind_after: 30m\n  escalate_after: 2h\n"+slack+
		"    escalate_to: {acme: C0LEADS}\n"+
		"  telegram:\n    bot_token_env: TG_BOT\n    webhook_secret_env: TG_HOOK\n    chats: {acme: \"-100\"}\n    users: {\"42\": dana}\n    escalate_to: {acme: \"@acme_leads\"}\n"+
		"  ntfy:\n    topics: {dana: dana-x1}\n    escalate_to: {acme: acme-leads-x9}\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a := c.Approvals
	if a.Reminders != (Reminders{RemindAfter: 30 * time.Minute, EscalateAfter: 2 * time.Hour}) ||
		a.Slack.EscalateTo["acme"] != "C0LEADS" || a.Telegram.EscalateTo["acme"] != "@acme_leads" || a.Mail.Ntfy.EscalateTo["acme"] != "acme-leads-x9" {
		t.Errorf("reminders = %+v, slack %v, telegram %v, ntfy %v", a.Reminders, a.Slack.EscalateTo, a.Telegram.EscalateTo, a.Mail.Ntfy.EscalateTo)
	}
	if got := c.Review.WindowWarningOr(); got != 90*time.Minute {
		t.Errorf("window_warning = %s, want 1h30m", got)
	}
	if none, err := Parse([]byte(head), env); err != nil || none.Review.WindowWarningOr() != DefaultWindowWarning || none.Approvals.Reminders != (Reminders{}) {
		t.Errorf("unset: review %+v, reminders %+v, %v", none.Review, none.Approvals.Reminders, err)
	}
	bad := []struct{ yaml, err string }{
		{"review: {window_warning: 1m}\n", "review.window_warning: 1m is outside 5m to 168h"},
		{"review: {window: 2h}\n", `review: unknown key "window"`},
		{"approvals:\n  remind_after: 10s\n" + slack, "approvals.remind_after: 10s is outside 1m to 720h"},
		{"approvals:\n  remind_after: soon\n" + slack, `approvals.remind_after: "soon" is not a duration`},
		{"approvals:\n  remind_after: 2h\n  escalate_after: 1h\n" + slack + "    escalate_to: {acme: C0LEADS}\n", "approvals.escalate_after: 1h0m0s is not after approvals.remind_after (2h0m0s)"},
		{"approvals:\n  escalate_after: 1h\n" + slack, "approvals.escalate_after: is set, but no surface names where to escalate"},
		{"approvals:\n" + slack + "    escalate_to: {acme: C0LEADS}\n", "approvals.escalate_after: missing; a surface's escalate_to is set"},
		{"approvals:\n  escalate_after: 1h\n" + slack + "    escalate_to: {acme: \"#leads\"}\n", `approvals.slack.escalate_to.acme: "#leads" is not a Slack channel id`},
		{"approvals:\n  escalate_after: 1h\n" + slack + "    escalate_to: {nobody: C0LEADS}\n", `approvals.slack.escalate_to.nobody: client "nobody" is not defined`},
		{"approvals:\n  escalate_after: 1h\n  ntfy:\n    topics: {dana: d1}\n    escalate_to: {acme: \"a/b\"}\n", `approvals.ntfy.escalate_to.acme: "a/b" is not an ntfy topic`},
	}
	for _, b := range bad {
		_, err := Parse([]byte(head+b.yaml), env)
		if err == nil || !strings.Contains(err.Error(), b.err) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%q: err = %v, want %q", b.yaml, err, b.err)
		}
	}
}
