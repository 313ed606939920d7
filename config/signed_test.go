package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
)

// A signed channel must not read a field from a header its signature does
// not cover: whoever replays a captured request could change it at will.
func TestSignedChannelHeaderFields(t *testing.T) {
	const (
		mac = "channels:\n  - name: web\n    signature: {scheme: hmac-sha256, secret: s3cret, header: X-Signature}\n"
		std = "channels:\n  - name: web\n    signature: {scheme: standard-webhooks, secret: " + webSecret + "}\n"
	)
	refused := []struct {
		name string
		yaml string
		want []string // the whole error, one line each
	}{
		{"hmac contact", mac + "    fields: {message_id: /id, contact: \"header:X-Contact\"}\n", []string{
			"config: channels[0].fields.contact: header:X-Contact is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
		}},
		{"hmac message id", mac + "    fields: {message_id: \"header:X-GitHub-Delivery\"}\n", []string{
			"config: channels[0].fields.message_id: header:X-GitHub-Delivery is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
		}},
		{"hmac composite id part", mac + "    fields: {message_id: [/tenant, \"header:x-message-id\"]}\n", []string{
			"config: channels[0].fields.message_id[1]: header:x-message-id is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
		}},
		{"hmac signature header itself", mac + "    fields: {message_id: /id, text: \"header:X-Signature\"}\n", []string{
			"config: channels[0].fields.text: header:X-Signature is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
		}},
		{"hmac webhook-id", mac + "    fields: {message_id: \"header:webhook-id\"}\n", []string{
			"config: channels[0].fields.message_id: header:webhook-id is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
		}},
		{"standard webhooks contact", std + "    fields: {message_id: /id, contact: \"header:X-Contact\"}\n", []string{
			"config: channels[0].fields.contact: header:X-Contact is not covered by the standard-webhooks signature, which signs only the body and the webhook-id and webhook-timestamp headers; read it from the body or from one of those headers",
		}},
		{"standard webhooks signature header", std + "    fields: {message_id: \"header:Webhook-Signature\"}\n", []string{
			"config: channels[0].fields.message_id: header:Webhook-Signature is not covered by the standard-webhooks signature, which signs only the body and the webhook-id and webhook-timestamp headers; read it from the body or from one of those headers",
		}},
		{"every field, in file order, on the second channel",
			"channels:\n  - name: open\n    fields: {message_id: \"header:X-Id\"}\n" +
				"  - name: web\n    signature: {scheme: hmac-sha256, secret: s3cret, header: X-Signature}\n    fields:\n" +
				"      name: \"header:X-Name\"\n      message_id: [\"header:X-Tenant\", /id]\n      conversation_id: \"header:X-Conv\"\n", []string{
				"config: channels[1].fields.name: header:X-Name is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
				"config: channels[1].fields.message_id[0]: header:X-Tenant is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
				"config: channels[1].fields.conversation_id: header:X-Conv is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks",
			}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml), nil)
			if err == nil {
				t.Fatalf("Parse accepted %+v; want\n%s", c, strings.Join(tt.want, "\n"))
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}

	accepted := []struct {
		name   string
		yaml   string
		fields config.Fields
	}{
		{"standard webhooks id", std + "    fields: {message_id: \"header:webhook-id\"}\n",
			config.Fields{MessageID: []string{"header:webhook-id"}, Contact: "/from", Name: "/name", Text: "/text"}},
		{"standard webhooks headers in any case", std + "    fields: {message_id: [\"header:WEBHOOK-ID\", \"header:Webhook-Timestamp\"], conversation_id: \"header:webhook-ID\"}\n",
			config.Fields{MessageID: []string{"header:WEBHOOK-ID", "header:Webhook-Timestamp"}, ConversationID: "header:webhook-ID", Contact: "/from", Name: "/name", Text: "/text"}},
		{"hmac reading the body", mac + "    fields: {message_id: [/tenant, /id], contact: /From}\n",
			config.Fields{MessageID: []string{"/tenant", "/id"}, Contact: "/From", Name: "/name", Text: "/text"}},
		{"unsigned channel reads any header", "channels:\n  - name: web\n    fields: {message_id: \"header:X-GitHub-Delivery\", contact: \"header:X-Contact\"}\n",
			config.Fields{MessageID: []string{"header:X-GitHub-Delivery"}, Contact: "header:X-Contact", Name: "/name", Text: "/text"}},
		{"a field left out", mac + "    fields: {message_id: /id, name: \"\"}\n",
			config.Fields{MessageID: []string{"/id"}, Contact: "/from", Name: "", Text: "/text"}},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml, nil)
			if got := c.Channels[0].Fields; !reflect.DeepEqual(got, tt.fields) {
				t.Errorf("fields = %+v, want %+v", got, tt.fields)
			}
		})
	}
}
