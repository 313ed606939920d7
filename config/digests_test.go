package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDigests: a digests list decodes with its defaults, and each mistake
// is one sentence that names the key.
func TestDigests(t *testing.T) {
	const head = "base_url: https://handoff.example.com\n" +
		"clients: [{id: acme}, {id: bolt}]\n" +
		"channels:\n  - {name: web, client: acme, fields: {message_id: /id}}\n  - {name: sms, client: bolt, fields: {message_id: /id}}\n" +
		"providers:\n" +
		"  - {name: mail, kind: smtp, host: smtp.example.com, from: handoff@agency.example}\n" +
		"  - {name: hook, kind: http, url: https://ntfy.example.com/approvals}\n" +
		"  - {name: tg, kind: telegram, token_env: TG}\n"
	env := func(k string) string { return map[string]string{"TG": "123:abc"}[k] }
	c, err := Parse([]byte(head+"digests:\n"+
		"  - {name: morning, to: mail, address: approvers@agency.example, client: acme, schedule: \"0 9 * * 1-5\", oldest_after: 30m}\n"+
		"  - {name: ping, to: hook, oldest_after: 1h, owner: sales}\n"+
		"  - {name: box, to: sandbox, schedule: \"@daily\"}\n"+
		"  - {name: chat, to: tg, address: \"-1001234\", schedule: \"@hourly\"}\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Digest{
		{Name: "morning", To: "mail", Address: "approvers@agency.example", Client: "acme", Schedule: "0 9 * * 1-5", OldestAfter: 30 * time.Minute},
		{Name: "ping", To: "hook", Owner: "sales", OldestAfter: time.Hour},
		{Name: "box", To: "sandbox", Address: "team", Schedule: "@daily"},
		{Name: "chat", To: "tg", Address: "-1001234", Schedule: "@hourly"},
	}
	if !reflect.DeepEqual(c.Digests, want) {
		t.Errorf("Digests =\n %+v\nwant\n %+v", c.Digests, want)
	}

	bad := []struct{ yaml, err string }{
		{"  - {to: mail, address: a@b.example, schedule: \"@daily\"}", "digests[0].name: missing; every digest needs a name"},
		{"  - {name: Morning, to: mail, address: a@b.example, schedule: \"@daily\"}", `digests[0].name: "Morning" is not a valid digest name`},
		{"  - {name: a, to: sandbox, schedule: \"@daily\"}\n  - {name: a, to: sandbox, schedule: \"@daily\"}", `digests[1].name: duplicate digest name "a"`},
		{"  - {name: a, address: a@b.example, schedule: \"@daily\"}", "digests[0].to: missing; name the provider"},
		{"  - {name: a, to: nope, schedule: \"@daily\"}", `digests[0].to: provider "nope" is not defined`},
		{"  - {name: a, to: mail, address: a@b.example}", "digests[0]: has neither schedule nor oldest_after"},
		{"  - {name: a, to: sandbox, schedule: \"every day\"}", `digests[0].schedule: "every day" is not a cron expression`},
		{"  - {name: a, to: sandbox, oldest_after: soon}", `digests[0].oldest_after: "soon" is not a duration`},
		{"  - {name: a, to: sandbox, oldest_after: 0s}", "digests[0].oldest_after: must be more than zero"},
		{"  - {name: a, to: sandbox, client: zeta, schedule: \"@daily\"}", `digests[0].client: client "zeta" is not defined under clients`},
		{"  - {name: a, to: mail, schedule: \"@daily\"}", `digests[0].address: missing; a digest through smtp provider "mail" needs the recipient (an email address`},
		{"  - {name: a, to: mail, address: \"Ann <a@b.example>\", schedule: \"@daily\"}", `digests[0].address: the address is not a bare email address for smtp provider "mail"`},
		{"  - {name: a, to: tg, address: approvals, schedule: \"@daily\"}", "digests[0].address: the address is neither a numeric chat id nor an @channel"},
		{"  - {name: a, to: sandbox, schedule: \"@daily\", colour: red}", `digests[0]: unknown key "colour"`},
	}
	for _, tt := range bad {
		t.Run(tt.err, func(t *testing.T) {
			_, err := Parse([]byte(head+"digests:\n"+tt.yaml+"\n"), env)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
			}
			if strings.Count(err.Error(), "config:") != 1 {
				t.Errorf("Parse = %v, want one sentence", err)
			}
		})
	}

	// The links need base_url.
	_, err = Parse([]byte(strings.Replace(head, "base_url: https://handoff.example.com\n", "", 1)+"digests:\n  - {name: a, to: sandbox, schedule: \"@daily\"}\n"), env)
	if err == nil || !strings.Contains(err.Error(), "digests[0].to: base_url is not set") {
		t.Fatalf("Parse without base_url = %v, want the base_url sentence", err)
	}
}
