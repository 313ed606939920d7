package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/provider/kinds"
)

// TestProviderKinds parses the issue's own configuration, names as users
// write them, with every secret from the environment.
func TestProviderKinds(t *testing.T) {
	env := map[string]string{
		"TWILIO_AUTH_TOKEN": "tw-secret", "WHATSAPP_TOKEN": "wa-secret", "TELEGRAM_BOT_TOKEN": "123:tg-secret",
		"SLACK_BOT_TOKEN": "xoxb-secret", "SMTP_USER": "u", "SMTP_PASSWORD": "pw-secret",
		"CRM_HOOK": "https://hooks.example.com/services/T000/B000/hook-secret", "CRM_AUTH": "Bearer crm-secret",
	}
	c := mustParse(t, `providers:
  - {name: sms, kind: twilio, account_sid: ACaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, auth_token_env: TWILIO_AUTH_TOKEN, from: "+15550001111", rate: 1/s, burst: 5}
  - {name: wa, kind: whatsapp, phone_number_id: "1234567890", token_env: WHATSAPP_TOKEN}
  - {name: tg, kind: telegram, token_env: TELEGRAM_BOT_TOKEN, api_base: "http://127.0.0.1:9/"}
  - {name: team, kind: slack, token_env: SLACK_BOT_TOKEN, rate: 30/m}
  - {name: mail, kind: smtp, host: smtp.example.com, port: 587, username_env: SMTP_USER,
     password_env: SMTP_PASSWORD, from: "Agency <hello@agency.example>", tls: starttls}
  - {name: crm, kind: http, url_env: CRM_HOOK, auth_env: CRM_AUTH, body: form, fields: {to: phone}, answer_id: /data/id, success: /ok=true}
`, func(k string) string { return env[k] })
	p := map[string]config.Provider{}
	for _, x := range c.Providers {
		p[x.Name] = x
	}
	if x := p["sms"]; x.AuthToken != "tw-secret" || x.From != "+15550001111" || x.Rate != 1 || x.Burst != 5 {
		t.Errorf("twilio: %+v", x.ProviderKinds)
	}
	if x := p["team"]; x.Rate != 0.5 || x.Burst != 1 {
		t.Errorf("slack rate %v burst %d, want 0.5/s burst 1", x.Rate, x.Burst)
	}
	if x := p["tg"]; x.Token != "123:tg-secret" || x.APIBase != "http://127.0.0.1:9" {
		t.Errorf("telegram: %+v", x.ProviderKinds)
	}
	if x := p["mail"]; x.Password != "pw-secret" || x.Port != 587 || x.TLS != "starttls" {
		t.Errorf("smtp: %+v", x.ProviderKinds)
	}
	if x := p["crm"]; x.URL != env["CRM_HOOK"] || x.Auth != "Bearer crm-secret" || x.Body != "form" || x.Fields["to"] != "phone" || x.SuccessPointer != "/ok" || x.SuccessValue != "true" {
		t.Errorf("http: %q %+v", x.URL, x.ProviderKinds)
	}
	r := c.Redacted()
	for _, x := range r.Providers {
		s := strings.Join([]string{x.URL, x.AuthToken, x.Token, x.Password, x.Auth, x.Username}, " ")
		if strings.Contains(s, "secret") {
			t.Errorf("Redacted %s still holds a secret: %s", x.Name, s)
		}
	}
}

func TestProviderKindErrors(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"providers: [{name: sms, kind: twilio, from: x}]", "providers[0].account_sid: missing"},
		{"providers: [{name: sms, kind: twilio, account_sid: AC1, auth_token_env: T, from: x}]", "is not a Twilio account SID"},
		{"providers: [{name: wa, kind: whatsapp, phone_number_id: 12ab, token_env: T}]", "is not a WhatsApp phone number id"},
		{"providers: [{name: tg, kind: telegram}]", "providers[0].token_env: missing"},
		{"providers: [{name: tg, kind: telegram, token_env: T, url: \"https://x.example\"}]", "a telegram provider does not take url"},
		{"providers: [{name: tg, kind: telegram, token_env: NOPE}]", "NOPE"},
		{"providers: [{name: m, kind: smtp, host: h, from: \"not an address\"}]", "is not a mail address"},
		{"providers: [{name: c, kind: http, url: \"https://x.example\", rate: fast}]", "is not a rate"},
		{"providers: [{name: c, kind: http, url: \"https://x.example\", success: ok}]", "is not a rule of the form"},
		{"providers: [{name: c, kind: http, url: \"https://x.example\", fields: {phone: to}}]", "unknown key \"phone\""},
		{"providers: [{name: c, kind: slack, token_env: T, fail: permanent}]", "only a sandbox provider takes fail"},
	} {
		_, err := config.Parse([]byte(tt.yaml), func(k string) string {
			if k == "T" {
				return "v"
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.yaml, err, tt.want)
		}
	}
}

// TestConfigAcceptsTheBuiltKinds: a kind name config accepts is one the
// provider package builds, and every kind it builds config accepts.
func TestConfigAcceptsTheBuiltKinds(t *testing.T) {
	names := append(kinds.Names(), provider.Kinds()...)
	for _, kind := range append(names, "nope") {
		_, err := config.Parse([]byte("providers: [{name: p, kind: "+kind+"}]"), nil)
		accepted := err == nil || !strings.Contains(err.Error(), "is not a provider kind")
		built := slices.Contains(provider.Kinds(), kind)
		if accepted != built {
			t.Errorf("kind %s: config accepts it %v, provider builds it %v (%v)", kind, accepted, built, err)
		}
	}
}

// TestKindDeclarationsReachConfig: config reads every key a kind declares
// (none is an unknown key), requires each one the kind needs with the
// kind's own sentence, and refuses a key the kind does not take by naming
// what it takes.
func TestKindDeclarationsReachConfig(t *testing.T) {
	for _, k := range kinds.All() {
		for _, key := range k.Keys {
			_, err := config.Parse([]byte("providers: [{name: p, kind: "+k.Name+", "+key.Name+": x}]"), nil)
			if err != nil && strings.Contains(err.Error(), "unknown key") {
				t.Errorf("kind %s declares key %s, which config does not read: %v", k.Name, key.Name, err)
			}
		}
		_, err := config.Parse([]byte("providers: [{name: p, kind: "+k.Name+"}]"), nil)
		for _, key := range k.Keys {
			if key.Need == "" {
				continue
			}
			want := "providers[0]." + key.Name + ": missing; " + key.Need
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("kind %s without %s: %v, want %q", k.Name, key.Name, err, want)
			}
		}
		_, err = config.Parse([]byte("providers: [{name: p, kind: "+k.Name+", body: json, token_env: T, host: h}]"), nil)
		for _, key := range []string{"body", "token_env", "host"} {
			if _, takes := k.Key(key); takes {
				continue
			}
			want := "providers[0]." + key + ": a " + k.Name + " provider does not take " + key + " (it takes " + strings.Join(k.KeyNames(), ", ") + ")"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("kind %s given %s: %v, want %q", k.Name, key, err, want)
			}
		}
	}
}
