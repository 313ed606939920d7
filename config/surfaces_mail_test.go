package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMailSurfaces: approvals.email and approvals.ntfy decode with their
// defaults and secrets, and each mistake is one sentence naming its key.
func TestMailSurfaces(t *testing.T) {
	const head = "clients: [{id: acme}, {id: bolt}]\n" +
		"channels:\n  - {name: web, client: acme, fields: {message_id: /id}}\n" +
		"providers:\n  - {name: mail, kind: smtp, host: smtp.example.com, from: handoff@example.com}\n  - {name: hook, kind: http, url: \"https://example.com/x\"}\n"
	env := func(k string) string {
		return map[string]string{"PM_INBOUND": "user:pass-1", "MG_KEY": "key-abc", "NTFY_TOKEN": "tk_abc"}[k]
	}
	c, err := Parse([]byte(head+"approvals:\n"+
		"  email:\n    domain: reply.example.com\n    inbound: postmark\n    secret_env: PM_INBOUND\n    provider: mail\n    to: {acme: approvers@acme.test}\n"+
		"  ntfy:\n    url: https://ntfy.example.com/\n    token_env: NTFY_TOKEN\n    token_ttl: 10m\n    topics: {dana: handoff-dana-x7Kq, bea: handoff-bea-p2Lm}\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	m := c.Approvals.Mail
	wantEmail := &EmailSurface{Domain: "reply.example.com", Local: "approvals", Inbound: "postmark", SecretEnv: "PM_INBOUND", Secret: "user:pass-1",
		Provider: "mail", To: map[string]string{"acme": "approvers@acme.test"}}
	wantNtfy := &NtfySurface{URL: "https://ntfy.example.com", TokenEnv: "NTFY_TOKEN", Token: "tk_abc", TokenTTL: 10 * time.Minute,
		Topics: map[string]string{"dana": "handoff-dana-x7Kq", "bea": "handoff-bea-p2Lm"}}
	if !reflect.DeepEqual(m.Email, wantEmail) || !reflect.DeepEqual(m.Ntfy, wantNtfy) || !c.Approvals.Any() {
		t.Errorf("email %+v\nntfy %+v", m.Email, m.Ntfy)
	}
	min, err := Parse([]byte(head+"approvals:\n  email: {domain: r.example.com, inbound: mailgun, secret_env: MG_KEY}\n  ntfy: {topics: {dana: t1}}\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if e, n := min.Approvals.Mail.Email, min.Approvals.Mail.Ntfy; e.Local != DefaultEmailLocal || e.Provider != "" || n.URL != DefaultNtfyURL || n.TokenTTL != DefaultNtfyTokenTTL {
		t.Errorf("defaults: %+v %+v", e, n)
	}

	email := "  email:\n    domain: reply.example.com\n    inbound: postmark\n    secret_env: PM_INBOUND\n"
	for _, b := range []struct{ yaml, err string }{
		{"  email:\n    inbound: postmark\n    secret_env: PM_INBOUND\n", "approvals.email.domain: missing; name the domain whose mail the inbound provider receives"},
		{"  email:\n    domain: reply.example.com\n    secret_env: PM_INBOUND\n", "approvals.email.inbound: missing; name the provider that posts the replies"},
		{"  email:\n    domain: reply.example.com\n    inbound: postmark\n", "approvals.email.secret_env: missing"},
		{"  email:\n    domain: Reply.Example.com\n    inbound: postmark\n    secret_env: PM_INBOUND\n", `approvals.email.domain: "Reply.Example.com" is not a lowercase mail domain`},
		{"  email:\n    domain: reply.example.com\n    inbound: gmail\n    secret_env: PM_INBOUND\n", `approvals.email.inbound: "gmail" is not an inbound email provider (use postmark, mailgun or sendgrid)`},
		{"  email:\n    domain: reply.example.com\n    inbound: sendgrid\n    secret_env: MG_KEY\n", "approvals.email.secret_env: environment variable MG_KEY must be user:password"},
		{email + "    local: \"Approvals+\"\n", `approvals.email.local: "Approvals+" is not a local part`},
		{email + "    to: {acme: approvers@acme.test}\n", "approvals.email.provider: missing; approvals.email.to mails each draft"},
		{email + "    provider: nope\n", `approvals.email.provider: provider "nope" is not defined under providers`},
		{email + "    provider: hook\n", `approvals.email.provider: provider "hook" is of kind http; the approval mails need an smtp provider`},
		{email + "    provider: mail\n    to: {acme: \"Approvers <a@acme.test>\"}\n", `approvals.email.to.acme: "Approvers <a@acme.test>" is not a bare mail address`},
		{email + "    provider: mail\n    to: {nobody: a@acme.test}\n", `approvals.email.to.nobody: client "nobody" is not defined`},
		{email + "    sender: x\n", `approvals.email: unknown key "sender"`},
		{"  ntfy: {url: https://ntfy.sh}\n", "approvals.ntfy.topics: missing; map each approver's handoff user name to the ntfy topic"},
		{"  ntfy: {topics: {dana: \"my topic\"}}\n", "approvals.ntfy.topics.dana: is not an ntfy topic"},
		{"  ntfy: {topics: {dana: t1, bea: t1}}\n", "approvals.ntfy.topics.bea: is the topic of dana too; each person needs a topic of their own"},
		{"  ntfy: {topics: {dana: t1}, token_ttl: 30s}\n", "approvals.ntfy.token_ttl: 30s is outside 1m to 24h"},
		{"  ntfy: {topics: {dana: t1}, url: \"ftp://x\"}\n", "approvals.ntfy.url:"},
		{"  ntfy: {topics: {dana: t1}, token_env: UNSET}\n", "approvals.ntfy.token_env: environment variable UNSET is not set or is empty"},
	} {
		_, err := Parse([]byte(head+"approvals:\n"+b.yaml), env)
		if err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("approvals:\n%s\n got %v\n want %q", b.yaml, err, b.err)
			continue
		}
		if strings.Contains(err.Error(), "pass-1") || strings.Contains(err.Error(), "key-abc") {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
}
