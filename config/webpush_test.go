package config

import (
	"strings"
	"testing"
)

// TestWebPushConfig: approvals.webpush needs a mailto: or https: subject;
// each mistake is one sentence naming the key.
func TestWebPushConfig(t *testing.T) {
	const head = "clients: [{id: acme}]\nchannels:\n  - {name: web, client: acme, fields: {message_id: /id}}\napprovals:\n  webpush:\n"
	for _, ok := range []string{"mailto:ops@example.com", "https://example.com/contact"} {
		c, err := Parse([]byte(head+"    subject: \""+ok+"\"\n"), func(string) string { return "" })
		if err != nil || c.Approvals.WebPush == nil || c.Approvals.WebPush.Subject != ok || !c.Approvals.Any() {
			t.Errorf("subject %q: %+v, %v", ok, c, err)
		}
	}
	for _, b := range []struct{ yaml, err string }{
		{"    {}\n", "approvals.webpush.subject: missing; a mailto: or https: address"},
		{"    subject: ops@example.com\n", `approvals.webpush.subject: "ops@example.com" is neither a mailto: nor an https: URL`},
		{"    subject: \"mailto:not an address\"\n", "is not a mailto: address"},
		{"    subject: \"http://example.com\"\n", "is neither a mailto: nor an https: URL"},
		{"    subject: \"mailto:a@b.c\"\n    actions: true\n", `approvals.webpush: unknown key "actions"`},
	} {
		_, err := Parse([]byte(head+b.yaml), func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("%q: error %v, want %q", b.yaml, err, b.err)
		}
	}
}
