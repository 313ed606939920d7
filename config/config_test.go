package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
)

// Secrets used across the tests; none of them may ever show up in an error,
// in Redacted() or in its %+v.
const (
	webSecret     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	smsSecret     = "sms-hmac-secret-7f3a"
	crmSecret     = "whsec_Q1JNc2lnbmluZ1NlY3JldDEyMw=="
	openaiKey     = "sk-test-0123456789abcdef"
	urlPassword   = "url-pass-98765"
	badB64Secret  = "zz%not-base64-secret%zz"
	badEnvSecret  = "env-value-not-base64!!"
	plainPassword = "hunter2-plain"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func mustParse(t *testing.T, yaml string, getenv func(string) string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml), getenv)
	if err != nil {
		t.Fatalf("Parse: unexpected error:\n%v\nconfig:\n%s", err, yaml)
	}
	return c
}

// allDefaults spells out every default; it must parse to exactly Default().
const allDefaults = `
addr: "127.0.0.1:8080"
data_dir: ./data
workers: 4
channels:
  - name: demo
    fields:
      message_id: /id
      conversation_id: /conversation_id
      contact: /from
      name: /name
      text: /text
    provider: sandbox
    auto_approve: false
    max_body: 1048576
drafter:
  kind: template
  prompt_version: v1
  template: "Hi {{.Name}}, thanks for your message. We will get back to you shortly."
  timeout: 30s
routing:
  version: r1
  default_owner: sales
retry:
  max_attempts: 8
  base_delay: 2s
  max_delay: 1h
stuck:
  received: 10m
  matched: 30m
  owned: 4h
backups:
  schedule: "0 * * * *"
  keep: 24
retention:
  events: 720h
  keys: 72h
`

func TestDefault(t *testing.T) {
	want := mustParse(t, allDefaults, nil)
	tests := []struct {
		name string
		got  func(t *testing.T) *config.Config
	}{
		{"Default", func(*testing.T) *config.Config { return config.Default() }},
		{"Parse nil", func(t *testing.T) *config.Config { return mustParse(t, "", nil) }},
		{"Parse comment only", func(t *testing.T) *config.Config { return mustParse(t, "# nothing yet\n", nil) }},
		{"Parse empty mapping", func(t *testing.T) *config.Config { return mustParse(t, "{}", nil) }},
		{"Parse empty channel list", func(t *testing.T) *config.Config { return mustParse(t, "channels: []\n", nil) }},
		{"Parse null values", func(t *testing.T) *config.Config {
			return mustParse(t, "addr:\nchannels:\ndrafter:\nretry: {max_delay: ~}\n", nil)
		}},
		{"Load no path", func(t *testing.T) *config.Config {
			c, err := config.Load("", nil)
			if err != nil {
				t.Fatalf("Load(\"\"): %v", err)
			}
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.got(t)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}

	t.Run("demo channel", func(t *testing.T) {
		c := config.Default()
		ch, ok := c.Channel("demo")
		if !ok {
			t.Fatal(`Channel("demo") not found`)
		}
		if ch.Signature != nil || ch.Provider != "sandbox" || !reflect.DeepEqual(ch.Fields.MessageID, []string{"/id"}) {
			t.Errorf("demo channel = %+v", *ch)
		}
		if _, ok := c.Channel("web"); ok {
			t.Error(`Channel("web") found in the default config`)
		}
	})

	t.Run("fresh copy each call", func(t *testing.T) {
		a := config.Default()
		a.Channels[0].Name = "changed"
		a.Channels[0].Fields.MessageID[0] = "/changed"
		if b := config.Default(); b.Channels[0].Name != "demo" || b.Channels[0].Fields.MessageID[0] != "/id" {
			t.Errorf("Default() shares state between calls: %+v", b.Channels[0])
		}
	})
}

// fullExample follows the spec's example file, with real secrets supplied
// and a second, hmac-signed channel.
const fullExample = `
addr: "0.0.0.0:9090"
data_dir: /var/lib/handoff
base_url: https://handoff.example.com/
workers: 8
channels:
  - name: web                             # [a-z0-9-]+
    signature:
      scheme: standard-webhooks
      secret: ` + webSecret + `
      tolerance: 2m
    fields:
      message_id: /id
      conversation_id: /conversation_id
      contact: /from
      name: /name
      text: /text
    provider: sandbox
    auto_approve: false
  - name: sms-2
    signature:
      scheme: hmac-sha256
      secret_env: SMS_SECRET
      header: X-Signature
    fields:
      message_id: [/tenant, /MessageSid]
      contact: /From
      name: ""
      text: /Body
    provider: crm-webhook
    auto_approve: true
    max_body: 65536
drafter:
  kind: openai                            # any OpenAI-compatible endpoint
  base_url: http://127.0.0.1:11434/v1
  model: llama3.1
  api_key_env: OPENAI_API_KEY
  prompt_version: v2
  system_prompt: "You write short, friendly replies."
  template: "Hi {{.Name}}, thanks for your message. {{.Owner}} will get back to you shortly."
  timeout: 45s
  delay: 0s
routing:
  version: r7
  default_owner: sales
  rules:
    - {when: {text_contains: refund}, owner: billing}
    - {when: {intent: support}, owner: support}
    - {when: {channel: sms-2, has: phone}, owner: mobile}
providers:
  - name: crm-webhook
    kind: http
    url: https://crm.example.com/messages
    signing_secret_env: CRM_SIGNING_SECRET
    supports_idempotency_key: true
    lookup_url: https://crm.example.com/messages?client_ref={ref}
    timeout: 15s
  - name: test-sink
    kind: sandbox
retry:
  max_attempts: 5
  base_delay: 1s
  max_delay: 10m
stuck:
  received: 5m
  matched: 20m
  owned: 2h
backups:
  schedule: "@daily"
  keep: 14
retention:
  events: 1000h
  keys: 48h
`

func TestParseFullExample(t *testing.T) {
	got := mustParse(t, fullExample, env(map[string]string{
		"SMS_SECRET":         smsSecret,
		"OPENAI_API_KEY":     openaiKey,
		"CRM_SIGNING_SECRET": crmSecret,
	}))
	want := &config.Config{
		Addr:    "0.0.0.0:9090",
		DataDir: "/var/lib/handoff",
		BaseURL: "https://handoff.example.com",
		Workers: 8,
		Channels: []config.Channel{
			{
				Name:      "web",
				Signature: &config.Signature{Scheme: "standard-webhooks", Secret: webSecret, Secrets: []string{webSecret}, Tolerance: 2 * time.Minute},
				Fields: config.Fields{
					MessageID:      []string{"/id"},
					ConversationID: "/conversation_id",
					Contact:        "/from", Name: "/name", Text: "/text",
				},
				Provider: "sandbox",
				MaxBody:  1 << 20,
				Coalesce: 10 * time.Second,
			},
			{
				Name:        "sms-2",
				Signature:   &config.Signature{Scheme: "hmac-sha256", Secret: smsSecret, Secrets: []string{smsSecret}, SecretEnv: "SMS_SECRET", Header: "X-Signature"},
				Fields:      config.Fields{MessageID: []string{"/tenant", "/MessageSid"}, Contact: "/From", Name: "", Text: "/Body"},
				Provider:    "crm-webhook",
				AutoApprove: true,
				MaxBody:     65536,
				Coalesce:    10 * time.Second,
			},
		},
		Drafter: config.Drafter{
			Kind:          "openai",
			BaseURL:       "http://127.0.0.1:11434/v1",
			Model:         "llama3.1",
			APIKeyEnv:     "OPENAI_API_KEY",
			APIKey:        openaiKey,
			PromptVersion: "v2",
			SystemPrompt:  "You write short, friendly replies.",
			Template:      "Hi {{.Name}}, thanks for your message. {{.Owner}} will get back to you shortly.",
			Timeout:       45 * time.Second,
			Structured:    "json_schema", // the defaults the example leaves alone
			ContextTokens: 1000,
			Price:         config.Price{Currency: "USD"},
		},
		Routing: config.Routing{
			Version:      "r7",
			DefaultOwner: "sales",
			Rules: []config.Rule{
				{When: config.When{TextContains: "refund"}, Owner: "billing"},
				{When: config.When{Intent: "support"}, Owner: "support"},
				{When: config.When{Channel: "sms-2", Has: "phone"}, Owner: "mobile"},
			},
		},
		Providers: []config.Provider{
			{
				Name:                   "crm-webhook",
				Kind:                   "http",
				URL:                    "https://crm.example.com/messages",
				SigningSecretEnv:       "CRM_SIGNING_SECRET",
				SigningSecret:          crmSecret,
				SupportsIdempotencyKey: true,
				LookupURL:              "https://crm.example.com/messages?client_ref={ref}",
				Timeout:                15 * time.Second,
				LookupSettle:           90 * time.Second, // the default: 6 × timeout
			},
			{Name: "test-sink", Kind: "sandbox", Timeout: 10 * time.Second},
		},
		Retry:     config.Retry{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 10 * time.Minute},
		Stuck:     config.Stuck{Received: 5 * time.Minute, Matched: 20 * time.Minute, Owned: 2 * time.Hour},
		Backups:   config.Backups{Schedule: "@daily", Keep: 14},
		Retention: config.Retention{Events: 1000 * time.Hour, Keys: 48 * time.Hour},

		ProxyHeader: config.HeaderXForwardedFor,
		UndoWindow:  config.DefaultUndoWindow,
		Limits:      config.Limits{Memory: config.DefaultMemoryLimit, BodiesInFlight: config.DefaultBodiesInFlight, BodyWait: config.DefaultBodyWait},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
		for i := range min(len(got.Channels), len(want.Channels)) {
			if !reflect.DeepEqual(got.Channels[i], want.Channels[i]) {
				t.Errorf("channels[%d]: got %+v (signature %+v), want %+v (signature %+v)",
					i, got.Channels[i], got.Channels[i].Signature, want.Channels[i], want.Channels[i].Signature)
			}
		}
	}

	ch, ok := got.Channel("sms-2")
	if !ok || ch != &got.Channels[1] {
		t.Errorf(`Channel("sms-2") = %p, %v; want a pointer to Channels[1]`, ch, ok)
	}
}

// TestParseValid covers accepted spellings that the full example does not.
func TestParseValid(t *testing.T) {
	const chHead = "channels:\n  - name: web\n"
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		check func(t *testing.T, c *config.Config)
	}{
		{
			name: "message_id list",
			yaml: chHead + "    fields: {message_id: [/tenant, /lead_id]}\n",
			check: func(t *testing.T, c *config.Config) {
				f := c.Channels[0].Fields
				if !reflect.DeepEqual(f.MessageID, []string{"/tenant", "/lead_id"}) {
					t.Errorf("message_id = %q", f.MessageID)
				}
				if f.Contact != "/from" || f.Name != "/name" || f.Text != "/text" || f.ConversationID != "" {
					t.Errorf("field defaults = %+v", f)
				}
			},
		},
		{
			name: "pointer escapes and header source",
			yaml: chHead + "    fields: {message_id: \"/a~1b/c~0d\", contact: \"header:X-From\"}\n",
			check: func(t *testing.T, c *config.Config) {
				if f := c.Channels[0].Fields; f.MessageID[0] != "/a~1b/c~0d" || f.Contact != "header:X-From" {
					t.Errorf("fields = %+v", f)
				}
			},
		},
		{
			name: "listed channels replace the demo channel",
			yaml: chHead + "    fields: {message_id: /id}\n",
			check: func(t *testing.T, c *config.Config) {
				if _, ok := c.Channel("demo"); ok || len(c.Channels) != 1 {
					t.Errorf("channels = %+v", c.Channels)
				}
			},
		},
		{
			name: "standard-webhooks defaults and base64 secret from env",
			yaml: chHead + "    fields: {message_id: /id}\n    signature: {scheme: standard-webhooks, secret_env: WEB_SECRET}\n",
			env:  map[string]string{"WEB_SECRET": "c2VjcmV0LWJ5dGVz"},
			check: func(t *testing.T, c *config.Config) {
				s := c.Channels[0].Signature
				if s.Tolerance != 5*time.Minute || s.Secret != "c2VjcmV0LWJ5dGVz" || s.SecretEnv != "WEB_SECRET" {
					t.Errorf("signature = %+v", *s)
				}
			},
		},
		{
			name: "quoted numbers and YAML anchors",
			yaml: "workers: \"16\"\nchannels:\n  - name: a\n    fields: &f {message_id: /id}\n  - name: b\n    fields: *f\n",
			check: func(t *testing.T, c *config.Config) {
				if c.Workers != 16 || len(c.Channels) != 2 || c.Channels[1].Fields.MessageID[0] != "/id" {
					t.Errorf("got workers %d, channels %+v", c.Workers, c.Channels)
				}
			},
		},
		{
			name: "routing rule on the demo channel",
			yaml: "routing: {rules: [{when: {channel: demo}, owner: ops}]}\n",
			check: func(t *testing.T, c *config.Config) {
				if len(c.Routing.Rules) != 1 || c.Routing.Rules[0].When.Channel != "demo" || c.Routing.DefaultOwner != "sales" {
					t.Errorf("routing = %+v", c.Routing)
				}
			},
		},
		{
			name: "provider defined after the channel that uses it",
			yaml: chHead + "    fields: {message_id: /id}\n    provider: crm\nproviders: [{name: crm, kind: http, url: \"http://crm.local:8000/in\"}]\n",
			check: func(t *testing.T, c *config.Config) {
				if c.Channels[0].Provider != "crm" || c.Providers[0].Timeout != 10*time.Second {
					t.Errorf("channel %+v, providers %+v", c.Channels[0], c.Providers)
				}
			},
		},
		{
			name: "cron descriptor, drafter delay and api key env unset",
			yaml: "backups: {schedule: \"@every 6h\"}\ndrafter: {kind: openai, base_url: \"http://localhost:8081/v1/\", model: m, api_key_env: NOPE, delay: 250ms}\n",
			check: func(t *testing.T, c *config.Config) {
				if c.Backups.Schedule != "@every 6h" || c.Drafter.Delay != 250*time.Millisecond || c.Drafter.APIKey != "" {
					t.Errorf("backups %+v, drafter %+v", c.Backups, c.Drafter)
				}
				if c.Drafter.BaseURL != "http://localhost:8081/v1" {
					t.Errorf("drafter.base_url = %q, want the trailing slash dropped", c.Drafter.BaseURL)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustParse(t, tt.yaml, env(tt.env)))
		})
	}
}

func TestParseErrors(t *testing.T) {
	// ch is a valid channel to hang a bad key on.
	const ch = "channels:\n  - name: web\n    fields: {message_id: /id}\n"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // each must appear in the error
	}{
		{"unknown top-level key", "workers: 2\nchanels: []\n",
			nil, []string{`config: unknown key "chanels" at line 2`, `did you mean "channels"`}},
		{"unknown nested key", ch + "    auto_aprove: true\n",
			nil, []string{`config: channels[0]: unknown key "auto_aprove" at line 4`}},
		{"unknown key deep down", "routing: {rules: [{when: {text: x}, owner: a}]}\n",
			nil, []string{`routing.rules[0].when: unknown key "text"`}},
		{"repeated key", "workers: 2\nworkers: 3\n",
			nil, []string{`key "workers" appears twice (lines 1 and 2)`}},
		{"not a mapping", "- a\n- b\n",
			nil, []string{"config: the file must be a mapping", "not a list"}},
		{"invalid YAML", "workers: [\n",
			nil, []string{"config: yaml: line"}},
		{"two documents", "workers: 2\n---\nworkers: 3\n",
			nil, []string{"more than one YAML document"}},
		{"duplicate channel", ch + "  - name: web\n    fields: {message_id: /id}\n",
			nil, []string{`config: channels[1].name: duplicate channel name "web"`}},
		{"bad channel name", "channels:\n  - name: Web_1\n    fields: {message_id: /id}\n",
			nil, []string{`channels[0].name: "Web_1" is not a valid channel name`}},
		{"channel without name", "channels:\n  - fields: {message_id: /id}\n",
			nil, []string{"channels[0].name: missing"}},
		{"bad pointer", "channels:\n  - name: web\n    fields: {message_id: id}\n",
			nil, []string{`config: channels[0].fields.message_id: "id" is not a JSON pointer (it must start with "/") or header:Name`}},
		{"bad pointer escape", "channels:\n  - name: web\n    fields: {message_id: /a~2b}\n",
			nil, []string{`channels[0].fields.message_id: "/a~2b" is not a valid JSON pointer: "~" must be followed by 0 or 1`}},
		{"repeated key in a channel", ch + "    fields: {message_id: /x}\n",
			nil, []string{`config: channels[0]: key "fields" appears twice (lines 3 and 4)`}},
		{"bad pointer escape in list", "channels:\n  - name: web\n    fields: {message_id: [/ok, /a~2b]}\n",
			nil, []string{`channels[0].fields.message_id[1]: "/a~2b" is not a valid JSON pointer`}},
		{"bad header source", "channels:\n  - name: web\n    fields: {message_id: /id, contact: \"header:\"}\n",
			nil, []string{`channels[0].fields.contact: "header:" does not name a request header`}},
		{"missing message_id", "channels:\n  - name: web\n    fields: {contact: /from}\n",
			nil, []string{"channels[0].fields.message_id: missing"}},
		{"missing fields", "channels:\n  - name: web\n",
			nil, []string{"channels[0].fields.message_id: missing"}},
		{"empty message_id list", "channels:\n  - name: web\n    fields: {message_id: []}\n",
			nil, []string{"channels[0].fields.message_id: must list at least one source"}},
		{"message_id a mapping", "channels:\n  - name: web\n    fields: {message_id: {a: b}}\n",
			nil, []string{"channels[0].fields.message_id: must be a list, not a mapping"}},
		{"undefined provider", ch + "    provider: crm\n",
			nil, []string{`config: channels[0].provider: provider "crm" is not defined`}},
		{"max_body zero", ch + "    max_body: 0\n",
			nil, []string{"channels[0].max_body: must be a positive number of bytes"}},
		{"bad duration", "retry:\n  base_delay: 5x\n",
			nil, []string{`config: retry.base_delay: "5x" is not a duration (use e.g. 30s, 5m, 2h)`}},
		{"number as duration", "drafter: {timeout: 30}\n",
			nil, []string{`drafter.timeout: "30" is not a duration`}},
		{"negative duration", "stuck: {owned: -4h}\n",
			nil, []string{"stuck.owned: -4h is negative"}},
		{"zero duration", "retention: {keys: 0s}\n",
			nil, []string{"retention.keys: must be more than zero"}},
		{"negative delay", "drafter: {delay: -1s}\n",
			nil, []string{"drafter.delay: -1s is negative"}},
		{"bad cron", "backups: {schedule: \"61 * * * *\"}\n",
			nil, []string{`config: backups.schedule: "61 * * * *" is not a cron expression: `}},
		{"cron with seconds field", "backups: {schedule: \"0 0 3 * * *\"}\n",
			nil, []string{`backups.schedule: "0 0 3 * * *" is not a cron expression`}},
		{"backups keep zero", "backups: {keep: 0}\n",
			nil, []string{"backups.keep: must be between 1 and"}},
		{"missing secret env", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret_env: WEB_SECRET}\n",
			nil, []string{"channels[0].signature.secret_env: environment variable WEB_SECRET is not set or is empty"}},
		{"empty secret env", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret_env: WEB_SECRET}\n",
			map[string]string{"WEB_SECRET": ""}, []string{"channels[0].signature.secret_env: environment variable WEB_SECRET is not set"}},
		{"bad secret env name", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret_env: \"my secret\"}\n",
			nil, []string{`channels[0].signature.secret_env: is not an environment variable name (9 characters`}},
		{"both secret and secret_env", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret: " + plainPassword + ", secret_env: WEB_SECRET}\n",
			map[string]string{"WEB_SECRET": smsSecret}, []string{"channels[0].signature: secret and secret_env are both set"}},
		{"no secret", ch + "    signature: {scheme: hmac-sha256, header: X-Sig}\n",
			nil, []string{"channels[0].signature.secret: missing"}},
		{"unknown scheme", ch + "    signature: {scheme: hmac-sha1, secret: " + plainPassword + "}\n",
			nil, []string{`channels[0].signature.scheme: "hmac-sha1" is not a signature scheme (use standard-webhooks, hmac-sha256, twilio, meta, slack, stripe, token, basic or mailgun)`}},
		{"missing scheme", ch + "    signature: {secret: " + plainPassword + "}\n",
			nil, []string{"channels[0].signature.scheme: missing"}},
		{"hmac without header", ch + "    signature: {scheme: hmac-sha256, secret: " + plainPassword + "}\n",
			nil, []string{"channels[0].signature.header: missing; hmac-sha256 needs"}},
		{"standard-webhooks secret not base64", ch + "    signature: {scheme: standard-webhooks, secret: \"" + badB64Secret + "\"}\n",
			nil, []string{"channels[0].signature.secret: the secret is not a Standard Webhooks secret"}},
		{"standard-webhooks secret from env not base64", ch + "    signature: {scheme: standard-webhooks, secret_env: WEB_SECRET}\n",
			map[string]string{"WEB_SECRET": badEnvSecret}, []string{"channels[0].signature.secret_env: the secret is not a Standard Webhooks secret"}},
		{"signature not a mapping", ch + "    signature: true\n",
			nil, []string{"channels[0].signature: must be a mapping of keys to values, not true or false"}},
		{"openai without base_url", "drafter: {kind: openai, model: llama3.1}\n",
			nil, []string{"drafter.base_url: missing; the openai drafter needs"}},
		{"openai without model", "drafter: {kind: openai, base_url: \"http://127.0.0.1:11434/v1\"}\n",
			nil, []string{"drafter.model: missing; the openai drafter needs a model name"}},
		{"unknown drafter kind", "drafter: {kind: gpt}\n",
			nil, []string{`drafter.kind: "gpt" is not a drafter kind (use template or openai)`}},
		{"bad template", "drafter: {template: \"Hi {{.Name\"}\n",
			nil, []string{"drafter.template: not a valid text/template"}},
		{"misspelt template field", "drafter: {template: \"Hi {{.Nmae}}\"}\n",
			nil, []string{"drafter.template: not a valid text/template", "can't evaluate field Nmae"}},
		{"workers 0", "workers: 0\n",
			nil, []string{"config: workers: must be between 1 and 256, not 0"}},
		{"workers 257", "workers: 257\n",
			nil, []string{"workers: must be between 1 and 256, not 257"}},
		{"wrong YAML type", "workers: many\n",
			nil, []string{`config: workers: "many" is not a whole number`}},
		{"list where a number goes", "workers: [4]\n",
			nil, []string{"workers: must be a whole number, not a list"}},
		{"auto_approve on a mailgun signature", ch + "    signature: {scheme: mailgun, secret: " + plainPassword + "}\n    auto_approve: true\n",
			nil, []string{"channels[0].auto_approve: a mailgun signature does not cover the body"}},
		{"auto_approve on a basic signature", ch + "    auto_approve: true\n    signature: {scheme: basic, secret: \"u:" + plainPassword + "\"}\n",
			nil, []string{"channels[0].auto_approve: a basic signature does not cover the body"}},
		{"auto_approve on a token signature", ch + "    signature: {scheme: token, header: X-Token, secret: " + plainPassword + "}\n    auto_approve: true\n",
			nil, []string{"channels[0].auto_approve: a token signature does not cover the body", "turn auto_approve off"}},
		{"string where a bool goes", ch + "    auto_approve: \"true\"\n",
			nil, []string{`channels[0].auto_approve: "true" is not true or false`}},
		{"channels not a list", "channels: {name: web}\n",
			nil, []string{"channels: must be a list, not a mapping"}},
		{"bad base_url", "base_url: handoff.example.com\n",
			nil, []string{`base_url: "handoff.example.com" is not an absolute http or https URL`}},
		{"ftp base_url", "base_url: ftp://handoff.example.com\n",
			nil, []string{`base_url: "ftp://handoff.example.com" is not an absolute http or https URL`}},
		{"bad addr", "addr: localhost\n",
			nil, []string{`addr: "localhost" is not a host:port address`}},
		{"empty data_dir", "data_dir: \"\"\n",
			nil, []string{"data_dir: must not be empty"}},
		{"lookup_url without {ref}", "providers: [{name: crm, kind: http, url: \"https://crm.example.com/m\", lookup_url: \"https://crm.example.com/m?ref=1\"}]\n",
			nil, []string{`providers[0].lookup_url: "https://crm.example.com/m?ref=[redacted]" has no {ref} placeholder`}},
		{"negative lookup_settle", "providers: [{name: crm, kind: http, url: \"https://crm.example.com/m\", lookup_settle: -5s}]\n",
			nil, []string{"providers[0].lookup_settle: -5s is negative; use 0 or more"}},
		{"lookup_settle not a duration", "providers: [{name: crm, kind: http, url: \"https://crm.example.com/m\", lookup_settle: soon}]\n",
			nil, []string{`providers[0].lookup_settle: "soon" is not a duration`}},
		{"provider without url", "providers: [{name: crm, kind: http}]\n",
			nil, []string{"providers[0].url: missing"}},
		{"provider without kind", "providers: [{name: crm, url: \"https://crm.example.com/m\"}]\n",
			nil, []string{"providers[0].kind: missing; use one of http, sandbox, twilio, whatsapp, meta, telegram, slack, smtp"}},
		{"provider named sandbox", "providers: [{name: sandbox, kind: sandbox}]\n",
			nil, []string{`providers[0].name: "sandbox" is the built-in provider`}},
		{"duplicate provider", "providers: [{name: crm, kind: sandbox}, {name: crm, kind: sandbox}]\n",
			nil, []string{`providers[1].name: duplicate provider name "crm"`}},
		{"missing signing secret env", "providers: [{name: crm, kind: http, url: \"https://crm.example.com/m\", signing_secret_env: CRM_SIGNING_SECRET}]\n",
			nil, []string{"providers[0].signing_secret_env: environment variable CRM_SIGNING_SECRET is not set or is empty"}},
		{"rule with no condition", "routing: {rules: [{when: {}, owner: billing}]}\n",
			nil, []string{"routing.rules[0].when: needs at least one condition"}},
		{"rule without when", "routing: {rules: [{owner: billing}]}\n",
			nil, []string{"routing.rules[0].when: needs at least one condition"}},
		{"rule without owner", "routing: {rules: [{when: {intent: support}}]}\n",
			nil, []string{"routing.rules[0].owner: missing; every rule needs an owner"}},
		{"rule on unknown channel", ch + "routing: {rules: [{when: {channel: sms}, owner: a}]}\n",
			nil, []string{`config: routing.rules[0].when.channel: channel "sms" is not defined`}},
		{"rule has unknown field", "routing: {rules: [{when: {has: address}, owner: a}]}\n",
			nil, []string{`routing.rules[0].when.has: "address" is not a field name (use name, email, phone or contact)`}},
		{"empty default owner", "routing: {default_owner: \"\"}\n",
			nil, []string{"routing.default_owner: must not be empty"}},
		{"max_attempts 0", "retry: {max_attempts: 0}\n",
			nil, []string{"config: retry.max_attempts: must be between 1 and 100, not 0"}},
		{"max_delay < base_delay", "retry: {base_delay: 10m, max_delay: 1m}\n",
			nil, []string{"retry.max_delay: 1m is shorter than base_delay (10m)"}},
		{"base_delay above default max_delay", "retry: {base_delay: 2h}\n",
			nil, []string{"retry.max_delay: 1h is shorter than base_delay (2h)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml), env(tt.env))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want an error containing %q", c, tt.want)
			}
			if c != nil {
				t.Errorf("Parse returned a config along with the error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "config: ") {
					t.Errorf("error line %q does not start with \"config: \"", line)
				}
			}
		})
	}
}

func TestParseErrorsAllInFileOrder(t *testing.T) {
	const bad = `
retry:
  base_delay: 5x
channels:
  - name: web
    fields: {message_id: id}
    provider: crm
  - name: web
workers: 0
`
	want := []string{
		`config: retry.base_delay: "5x" is not a duration (use e.g. 30s, 5m, 2h)`,
		`config: channels[0].fields.message_id: "id" is not a JSON pointer (it must start with "/") or header:Name`,
		`config: channels[0].provider: provider "crm" is not defined (define it under providers, or use sandbox)`,
		`config: channels[1].name: duplicate channel name "web"`,
		`config: channels[1].fields.message_id: missing; every channel needs the JSON pointer of the provider's message id (e.g. /id), or a list of them`,
		`config: workers: must be between 1 and 256, not 0`,
	}
	for i := range 3 {
		_, err := config.Parse([]byte(bad), nil)
		if err == nil {
			t.Fatal("Parse succeeded; want errors")
		}
		if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: got errors\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "handoff.yaml")
	if err := os.WriteFile(path, []byte(fullExample), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := env(map[string]string{"SMS_SECRET": smsSecret, "CRM_SIGNING_SECRET": crmSecret})
	c, err := config.Load(path, getenv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Workers != 8 || len(c.Channels) != 2 {
		t.Errorf("Load parsed workers %d, %d channels; want 8, 2", c.Workers, len(c.Channels))
	}

	missing := filepath.Join(dir, "nope.yaml")
	if _, err := config.Load(missing, getenv); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing file) error = %v; want one naming %s", err, missing)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // substrings, one per expected warning, in order
	}{
		{"default demo", "", nil, []string{`channel "demo" has no signature`}},
		{
			name: "signed channel on loopback, nothing to say",
			yaml: "channels: [{name: web, fields: {message_id: /id}, signature: {scheme: standard-webhooks, secret: " + webSecret + "}}]\n",
		},
		{
			name: "unsigned auto-approve and public address",
			yaml: "addr: \":8080\"\nchannels: [{name: web, fields: {message_id: /id}, auto_approve: true}]\n",
			want: []string{"base_url is not set", `channel "web" has no signature`, `channel "web" auto-approves drafts without a signature`},
		},
		{
			name: "https base_url without trusted_proxies",
			yaml: "base_url: https://handoff.example.com\nchannels: [{name: web, fields: {message_id: /id}, signature: {scheme: standard-webhooks, secret: " + webSecret + "}}]\n",
			want: []string{"base_url is https but trusted_proxies is empty"},
		},
		{
			name: "https base_url behind a trusted proxy, nothing to say",
			yaml: "base_url: https://handoff.example.com\ntrusted_proxies: [127.0.0.1]\nchannels: [{name: web, fields: {message_id: /id}, signature: {scheme: standard-webhooks, secret: " + webSecret + "}}]\n",
		},
		{
			name: "openai without key",
			yaml: "drafter: {kind: openai, base_url: \"http://127.0.0.1:11434/v1\", model: m, api_key_env: OPENAI_API_KEY}\n",
			want: []string{`channel "demo"`, "drafter.api_key_env: environment variable OPENAI_API_KEY is not set"},
		},
		{
			name: "openai with key",
			yaml: "drafter: {kind: openai, base_url: \"http://127.0.0.1:11434/v1\", model: m, api_key_env: OPENAI_API_KEY}\n",
			env:  map[string]string{"OPENAI_API_KEY": openaiKey},
			want: []string{`channel "demo"`},
		},
		{
			name: "ignored keys, delay and unsigned provider",
			yaml: "channels: [{name: web, fields: {message_id: /id}, signature: {scheme: standard-webhooks, secret: " + webSecret + ", header: X-Signature}}]\n" +
				"drafter: {delay: 2s}\nproviders: [{name: crm, kind: http, url: \"https://crm.example.com\"}, {name: sb, kind: sandbox, url: \"https://x.example.com\"}]\n",
			want: []string{
				"channels[0].signature.header is ignored",
				"drafter.delay is 2s",
				`provider "crm" has no signing_secret_env`,
				`provider "crm" has neither supports_idempotency_key nor lookup_url`,
				"providers[1]: url and lookup_url are ignored",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParse(t, tt.yaml, env(tt.env)).Warnings()
			if len(got) != len(tt.want) {
				t.Fatalf("got %d warnings %q; want %d matching %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q; want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestSecretsNeverShown(t *testing.T) {
	getenv := env(map[string]string{
		"SMS_SECRET":         smsSecret,
		"OPENAI_API_KEY":     openaiKey,
		"CRM_SIGNING_SECRET": crmSecret,
		"BAD_SECRET":         badEnvSecret,
	})
	secrets := []string{webSecret, smsSecret, crmSecret, openaiKey, urlPassword, badB64Secret, badEnvSecret, plainPassword}

	withURLPassword := strings.Replace(fullExample,
		"url: https://crm.example.com/messages\n",
		"url: https://bot:"+urlPassword+"@crm.example.com/messages\n", 1)
	c := mustParse(t, withURLPassword, getenv)

	t.Run("Redacted", func(t *testing.T) {
		r := c.Redacted()
		if got := r.Channels[0].Signature.Secret; got != "[redacted]" {
			t.Errorf("channels[0] secret = %q", got)
		}
		if got := r.Channels[1].Signature.Secret; got != "[redacted]" {
			t.Errorf("channels[1] secret = %q", got)
		}
		if r.Drafter.APIKey != "[redacted]" || r.Providers[0].SigningSecret != "[redacted]" {
			t.Errorf("drafter key %q, provider secret %q", r.Drafter.APIKey, r.Providers[0].SigningSecret)
		}
		if r.Providers[1].SigningSecret != "" {
			t.Errorf("unset secret redacted to %q; want it left empty", r.Providers[1].SigningSecret)
		}
		if want := "https://bot:[redacted]@crm.example.com/messages"; r.Providers[0].URL != want {
			t.Errorf("provider url = %q, want %q", r.Providers[0].URL, want)
		}
		// The names of the variables are configuration, not secrets.
		if r.Channels[1].Signature.SecretEnv != "SMS_SECRET" || r.Drafter.APIKeyEnv != "OPENAI_API_KEY" {
			t.Errorf("env names changed: %q, %q", r.Channels[1].Signature.SecretEnv, r.Drafter.APIKeyEnv)
		}
		for _, out := range []string{fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), fmt.Sprintf("%+v", r.Channels)} {
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("formatted Redacted() contains secret %q:\n%s", s, out)
				}
			}
		}
		for _, sig := range []*config.Signature{r.Channels[0].Signature, r.Channels[1].Signature} {
			out := fmt.Sprintf("%+v", *sig)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("formatted signature contains secret %q: %s", s, out)
				}
			}
		}
	})

	t.Run("Redacted leaves the original alone", func(t *testing.T) {
		_ = c.Redacted()
		if c.Channels[0].Signature.Secret != webSecret || c.Drafter.APIKey != openaiKey ||
			c.Providers[0].SigningSecret != crmSecret || !strings.Contains(c.Providers[0].URL, urlPassword) {
			t.Errorf("Redacted() changed the original config: %+v", c)
		}
	})

	const ch = "channels:\n  - name: web\n    fields: {message_id: /id}\n"
	bad := []struct{ name, yaml string }{
		{"secret not base64", ch + "    signature: {scheme: standard-webhooks, secret: \"" + badB64Secret + "\"}\n"},
		{"env secret not base64", ch + "    signature: {scheme: standard-webhooks, secret_env: BAD_SECRET}\n"},
		{"signing secret not base64", "providers: [{name: crm, kind: http, url: \"https://crm.example.com\", signing_secret_env: BAD_SECRET}]\n"},
		{"secret and secret_env", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret: " + plainPassword + ", secret_env: SMS_SECRET}\n"},
		{"secret with unknown scheme", ch + "    signature: {scheme: hmac-md5, secret: " + plainPassword + "}\n"},
		{"secret as a number", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret: [" + plainPassword + "]}\n"},
		{"misspelt secret key", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secrte: " + plainPassword + "}\n"},
		{"bad url with password", "base_url: \"https://bot:" + urlPassword + "@exa mple.com/\"\n"},
		{"ftp url with password", "drafter: {kind: openai, model: m, base_url: \"ftp://bot:" + urlPassword + "@example.com/\"}\n"},
		{"lookup_url with password", "providers: [{name: crm, kind: http, url: \"https://crm.example.com\", lookup_url: \"https://bot:" + urlPassword + "@crm.example.com/x\"}]\n"},
		{"whole example broken", strings.Replace(withURLPassword, "workers: 8", "workers: 0", 1)},
	}
	for _, tt := range bad {
		t.Run("error/"+tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml), getenv)
			if err == nil {
				t.Fatal("Parse succeeded; want an error")
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error contains secret %q:\n%v", s, err)
				}
			}
		})
	}
}

// TestLookupSettle: unset, it follows the timeout (never under a minute);
// set, it is taken as given, 0 included (a provider whose lookup is
// immediately consistent).
func TestLookupSettle(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       time.Duration
	}{
		{"default at the default timeout", "", time.Minute},
		{"default follows a long timeout", "timeout: 30s", 3 * time.Minute},
		{"default never under a minute", "timeout: 2s", time.Minute},
		{"set", "lookup_settle: 5s", 5 * time.Second},
		{"zero", "lookup_settle: 0s", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := ""
			if tt.yaml != "" {
				extra = ", " + tt.yaml
			}
			cfg, err := config.Parse([]byte("providers: [{name: crm, kind: http, url: \"https://crm.example.com/m\", lookup_url: \"https://crm.example.com/m/{ref}\""+extra+"}]\n"), func(string) string { return "" })
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := cfg.Providers[0].LookupSettle; got != tt.want {
				t.Errorf("lookup_settle = %s, want %s", got, tt.want)
			}
		})
	}
}
