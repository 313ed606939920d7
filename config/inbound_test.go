package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
)

func TestPresets(t *testing.T) {
	env := map[string]string{"TW_OLD": "old-token", "TW_NEW": "new-token", "WA_VERIFY": "vt-1"}
	c, err := config.Parse([]byte(`
base_url: https://handoff.example.com
channels:
  - name: sms
    preset: twilio
    signature: {secrets_env: [TW_NEW, TW_OLD]}
  - name: wa
    verify_token_env: WA_VERIFY
    signature: {secret: app-secret}
    preset: whatsapp          # after the signature: the preset still gives its scheme
    fields: {text: /entry/0/changes/0/value/messages/0/type}
  - name: form
    preset: typeform
    signature: {secret: tf, prefix: ""}
    fields: {name: "/form_response/answers/[field.ref=full_name]/text"}
    answer: ok
  - name: tg
    preset: telegram
    handshake: none
    messages: {when: [/message/text], unless: [/message/via_bot]}
    receipts: {id: /x, status: /y}
`), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	sms, _ := c.Channel("sms")
	if sms.Preset != "twilio" || sms.Signature.Scheme != hook.SchemeTwilio || !slices.Equal(sms.Signature.Secrets, []string{"new-token", "old-token"}) ||
		sms.Answer != hook.AnswerTwiML || !slices.Equal(sms.Fields.MessageID, []string{"/MessageSid"}) || sms.Fields.Contact != "/From" {
		t.Errorf("sms = %+v, signature %+v", sms, sms.Signature)
	}
	wa, _ := c.Channel("wa")
	if wa.Signature.Scheme != hook.SchemeMeta || wa.VerifyToken != "vt-1" || wa.Handshake != hook.HandshakeMeta ||
		wa.Messages.Items != "/entry/*/changes/*/value/messages/*" || wa.Fields.Text != "/entry/0/changes/0/value/messages/0/type" ||
		wa.Fields.Contact != "/entry/*/changes/*/value/messages/*/from" {
		t.Errorf("wa = %+v", wa)
	}
	form, _ := c.Channel("form")
	if s := form.Signature; s.Scheme != hook.SchemeHMACSHA256 || s.Header != "Typeform-Signature" || s.Encoding != "base64" || s.Prefix != "" ||
		form.Fields.Name != "/form_response/answers/[field.ref=full_name]/text" || form.Fields.Contact != "/form_response/answers/[type=email]/email" || form.Answer != hook.AnswerOK {
		t.Errorf("form = %+v, signature %+v", form, form.Signature)
	}
	tg, _ := c.Channel("tg")
	if tg.Signature != nil || tg.Handshake != "" || !slices.Equal(tg.Messages.When, []string{"/message/text"}) || tg.Receipts.ID != "/x" {
		t.Errorf("tg = %+v", tg)
	}
	r := c.Redacted()
	for _, ch := range r.Channels {
		if ch.Signature != nil {
			for _, s := range ch.Signature.Secrets {
				if s != "[redacted]" {
					t.Errorf("Redacted kept a secret of %s", ch.Name)
				}
			}
		}
	}
	if wa, _ := r.Channel("wa"); wa.VerifyToken != "[redacted]" {
		t.Error("Redacted kept the verify token")
	}
	ws := strings.Join(c.Warnings(), "\n")
	if !strings.Contains(ws, `channel "tg" has no signature`) {
		t.Errorf("warnings = %s", ws)
	}
}

func TestPresetErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown preset", "preset: twillio\n", `channels[0].preset: "twillio" is not a preset (use generic, instagram, mailgun, messenger, postmark, sendgrid, slack, telegram, twilio, typeform or whatsapp)`},
		{"generic needs a message id", "preset: generic\n", "channels[0].fields.message_id: missing"},
		{"basic secret without a colon", "preset: postmark\n    signature: {secret: nocolon}\n", `channels[0].signature.secret: a basic secret is "user:password"`},
		{"token on a generic channel needs a header", "fields: {message_id: /id}\n    signature: {scheme: token, secret: x}\n", "channels[0].signature.header: missing; token needs"},
		{"no scheme and no preset", "fields: {message_id: /id}\n    signature: {secret: x}\n", "channels[0].signature.scheme: missing"},
		{"empty secrets", "preset: slack\n    signature: {secrets: []}\n", "channels[0].signature.secrets: must list at least one secret"},
		{"unset secrets_env", "preset: slack\n    signature: {secrets_env: [NOPE]}\n", "channels[0].signature.secrets_env[0]"},
		{"bad encoding", "preset: typeform\n    signature: {secret: x, encoding: base32}\n", `"base32" is not an encoding`},
		{"bad answer", "preset: slack\n    answer: xml\n", `channels[0].answer: "xml" is not an answer`},
		{"bad selector", "preset: typeform\n    fields: {contact: \"/a/[=x]\"}\n", "is not an array selector"},
		{"bad items", "preset: whatsapp\n    messages: {items: entry}\n", "channels[0].messages.items"},
		{"header the slack signature does not cover", "preset: slack\n    signature: {secret: s}\n    fields: {contact: header:X-User}\n", "not covered by the slack signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte("channels:\n  - name: c\n    "+tt.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "nocolon") {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}

// TestSubjectSource: the email presets read the subject an email reply
// answers, a generic channel reads it where fields.subject says, and a bad
// pointer stops the server at start.
func TestSubjectSource(t *testing.T) {
	for yaml, want := range map[string]string{
		"preset: sendgrid\n":          "/subject",
		"preset: mailgun\n":           "/subject",
		"preset: postmark\n":          "/Subject",
		"preset: twilio\n":            "",
		"fields: {message_id: /id}\n": "",
		"fields: {message_id: /id, subject: /mail/subject}\n": "/mail/subject",
		"preset: postmark\n    fields: {subject: /Title}\n":   "/Title",
	} {
		c, err := config.Parse([]byte("channels:\n  - name: c\n    "+yaml), nil)
		if err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		if got := c.Channels[0].Fields.Subject; got != want {
			t.Errorf("%s: subject source %q, want %q", yaml, got, want)
		}
	}
	if _, err := config.Parse([]byte("channels:\n  - name: c\n    fields: {message_id: /id, subject: subject}\n"), nil); err == nil || !strings.Contains(err.Error(), "channels[0].fields.subject") {
		t.Errorf("a subject that is no pointer: %v, want an error on channels[0].fields.subject", err)
	}
}

// TestSentSource: a generic channel names where its provider says when the
// customer wrote the message (messages.sent), in seconds, milliseconds or
// RFC 3339, and the item read from a pretty-printed body carries that
// time; a messages.sent_unit that is not a unit stops the server at start
// with the key named.
func TestSentSource(t *testing.T) {
	for _, tt := range []struct {
		name, keys, stamp string
		want              time.Time
	}{
		{"seconds", "messages: {sent: /at}", `1764666000`, time.Unix(1764666000, 0)},
		{"a string of seconds", "messages: {sent: /at}", `"1764666000"`, time.Unix(1764666000, 0)},
		{"milliseconds", "messages: {sent: /at, sent_unit: milliseconds}", `1764666000123`, time.UnixMilli(1764666000123)},
		{"RFC 3339", "messages: {sent: /at}", `"2026-12-02T09:30:00+01:00"`, time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)},
		{"not a time", "messages: {sent: /at}", `"yesterday, I think"`, time.Time{}},
		{"no source", "messages: {}", `1764666000`, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte("channels:\n  - name: form\n    fields: {message_id: /id, contact: /from, text: /text}\n    "+tt.keys+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			ch, _ := c.Channel("form")
			body := "{\n  \"id\": \"m-1\",\n  \"from\": \"+15552490978\",\n  \"text\": \"fish & chips <2> \\\"now\\\" 🐟 שלום\",\n  \"at\": " + tt.stamp + "\n}\n"
			p, err := hook.Parse("application/json", []byte(body), nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.ReadAll(ch.Mapping())
			if err != nil || len(r.Messages) != 1 {
				t.Fatalf("ReadAll = %+v, %v; want one message", r, err)
			}
			if got := r.Messages[0].SentAt; !got.Equal(tt.want) {
				t.Errorf("SentAt = %v, want %v", got, tt.want)
			}
		})
	}
	_, err := config.Parse([]byte("channels:\n  - name: form\n    fields: {message_id: /id}\n    messages: {sent: /at, sent_unit: hours}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "channels[0].messages.sent_unit") || !strings.Contains(err.Error(), "milliseconds") {
		t.Errorf("a bad sent_unit: error = %v, want it to name channels[0].messages.sent_unit and the units", err)
	}
}
