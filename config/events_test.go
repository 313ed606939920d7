package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEvents: an events list decodes with its defaults and its secret
// from the environment; each mistake is one sentence that names the key.
func TestEvents(t *testing.T) {
	const head = "base_url: https://handoff.example.com\n" +
		"clients: [{id: acme}, {id: bolt}]\n" +
		"channels:\n  - {name: web, client: acme, fields: {message_id: /id}}\n  - {name: sms, client: bolt, fields: {message_id: /id}}\n"
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	env := func(k string) string { return map[string]string{"EV": secret, "BAD": "not base64 !"}[k] }
	c, err := Parse([]byte(head+"events:\n"+
		"  - {name: n8n, url: \"https://n8n.example.com/webhook/handoff\", secret_env: EV}\n"+
		"  - {name: acme-crm, client: acme, url: \"https://acme.example/hooks\", secret_env: EV, types: [reply.sent, dead_letter.added], timeout: 2s}\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Subscriber{
		{Name: "n8n", URL: "https://n8n.example.com/webhook/handoff", SecretEnv: "EV", Secret: secret, Timeout: 5 * time.Second},
		{Name: "acme-crm", Client: "acme", URL: "https://acme.example/hooks", SecretEnv: "EV", Secret: secret, Types: []string{EventReplySent, EventDeadLetterAdded}, Timeout: 2 * time.Second},
	}
	if !reflect.DeepEqual(c.Events, want) {
		t.Fatalf("Events =\n %+v\nwant\n %+v", c.Events, want)
	}
	for _, tt := range []struct {
		sub         int
		typ, client string
		want        bool
	}{
		{0, EventLeadStatusChanged, "acme", true}, {0, EventDeadLetterAdded, "", true}, // every type, every client, and none
		{1, EventReplySent, "acme", true}, {1, EventReplySent, "bolt", false}, {1, EventDraftApproved, "acme", false}, {1, EventDeadLetterAdded, "", false},
	} {
		if got := c.Events[tt.sub].Takes(tt.typ, tt.client); got != tt.want {
			t.Errorf("%s.Takes(%s, %q) = %v, want %v", c.Events[tt.sub].Name, tt.typ, tt.client, got, tt.want)
		}
	}
	if got := c.Events[0].ProviderName(); got != "events:n8n" {
		t.Errorf("ProviderName = %q", got)
	}

	bad := []struct{ yaml, err string }{
		{"  - {secret_env: EV}", "events[0].url: missing; an events subscriber needs the address the signed JSON is posted to"},
		{"  - {url: \"https://x.example\"}", "events[0].secret_env: missing; an events subscriber needs the variable holding the whsec_ secret"},
		{"  - {url: \"https://x.example\", secret_env: NOPE}", "events[0].secret_env: environment variable NOPE is not set or is empty"},
		{"  - {url: \"https://x.example\", secret_env: BAD}", "events[0].secret_env: the value of environment variable BAD is not usable: the secret is not a Standard Webhooks secret"},
		{"  - {url: \"https://x.example\", secret_env: EV, types: [reply.sent, lead.created]}", `events[0].types[1]: "lead.created" is not an event type (the types are lead.status_changed, draft.approved, reply.sent, reply.failed, dead_letter.added)`},
		{"  - {url: \"https://x.example\", secret_env: EV, types: [reply.sent, reply.sent]}", `events[0].types[1]: "reply.sent" is listed twice`},
		{"  - {url: \"https://x.example\", secret_env: EV, types: []}", "events[0].types: is empty"},
		{"  - {url: \"https://x.example\", secret_env: EV}\n  - {name: b, url: \"https://y.example\", secret_env: EV}", "events[0].name: missing; with several events subscribers each needs a name"},
		{"  - {name: a, url: \"https://x.example\", secret_env: EV}\n  - {name: a, url: \"https://y.example\", secret_env: EV}", `events[1].name: duplicate subscriber name "a"`},
		{"  - {name: \"N 8\", url: \"https://x.example\", secret_env: EV}", `events[0].name: "N 8" is not a valid subscriber name`},
		{"  - {client: zeta, url: \"https://x.example\", secret_env: EV}", `events[0].client: client "zeta" is not defined under clients`},
		{"  - {url: \"https://x.example\", secret_env: EV, timeout: 1m}", "events[0].timeout: 1m is longer than 30s"},
		{"  - {url: \"ftp://x.example\", secret_env: EV}", "events[0].url:"},
		{"  - {url: \"https://x.example\", secret_env: EV, kind: webhook}", `events[0]: unknown key "kind"`},
	}
	for _, tt := range bad {
		t.Run(tt.err, func(t *testing.T) {
			_, err := Parse([]byte(head+"events:\n"+tt.yaml+"\n"), env)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
			}
			if strings.Count(err.Error(), "config:") != 1 {
				t.Errorf("Parse = %v, want one sentence", err)
			}
			if strings.Contains(err.Error(), "MfKQ9r8") {
				t.Errorf("Parse = %v: the secret itself is in the error", err)
			}
		})
	}

	// One subscriber needs no name.
	c, err = Parse([]byte("events:\n  - {url: \"https://x.example\", secret_env: EV}\n"), env)
	if err != nil {
		t.Fatalf("Parse one subscriber: %v", err)
	}
	if c.Events[0].Name != "default" || c.Events[0].ProviderName() != "events:default" {
		t.Errorf("the only subscriber is named %q, want default", c.Events[0].Name)
	}
}
