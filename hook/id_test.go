package hook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestMessageID(t *testing.T) {
	header := http.Header{"X-Delivery": {" del-7 "}, "X-Urn": {"urn:msg:7"}}
	tests := []struct {
		name        string
		contentType string
		body        string
		sources     []string
		want        string
		errMsg      string // non-empty: a 400 *Error containing this is expected
	}{
		{name: "string", contentType: jsonType, body: `{"id":"evt_1"}`, sources: []string{"/id"}, want: "evt_1"},
		{name: "trimmed", contentType: jsonType, body: `{"id":" \t evt_1\n"}`, sources: []string{"/id"}, want: "evt_1"},
		{name: "number", contentType: jsonType, body: `{"id":42}`, sources: []string{"/id"}, want: "42"},
		{name: "20-digit number keeps its digits", contentType: jsonType, body: `{"id":98765432109876543210}`, sources: []string{"/id"}, want: "98765432109876543210"},
		{name: "nested", contentType: jsonType, body: `{"data":{"message":{"id":"m-1"}}}`, sources: []string{"/data/message/id"}, want: "m-1"},
		{name: "array element", contentType: jsonType, body: `{"events":[{"id":"e0"},{"id":"e1"}]}`, sources: []string{"/events/1/id"}, want: "e1"},
		{name: "composite", contentType: jsonType, body: `{"tenant":"acme","lead_id":42}`, sources: []string{"/tenant", "/lead_id"}, want: "acme:42"},
		{name: "composite trimmed", contentType: jsonType, body: `{"tenant":" acme ","lead_id":" 42 "}`, sources: []string{"/tenant", "/lead_id"}, want: "acme:42"},
		{name: "form", contentType: formType, body: "MessageSid=SM123&From=%2B15551234567&Body=Hi", sources: []string{"/MessageSid"}, want: "SM123"},
		{name: "header", contentType: jsonType, body: `{}`, sources: []string{"header:X-Delivery"}, want: "del-7"},
		{name: "body and header", contentType: jsonType, body: `{"id":"a"}`, sources: []string{"/id", "header:x-delivery"}, want: "a:del-7"},
		{name: "unicode", contentType: jsonType, body: `{"id":"né-✓"}`, sources: []string{"/id"}, want: "né-✓"},
		{name: "256 bytes", contentType: jsonType, body: `{"id":"` + strings.Repeat("a", 256) + `"}`, sources: []string{"/id"}, want: strings.Repeat("a", 256)},
		{name: "composite of 256 bytes", contentType: jsonType, body: `{"a":"` + strings.Repeat("a", 127) + `","b":"` + strings.Repeat("b", 128) + `"}`, sources: []string{"/a", "/b"}, want: strings.Repeat("a", 127) + ":" + strings.Repeat("b", 128)},

		{name: "missing", contentType: jsonType, body: `{"other":"x"}`, sources: []string{"/id"}, errMsg: "the message id field /id is missing"},
		{name: "null", contentType: jsonType, body: `{"id":null}`, sources: []string{"/id"}, errMsg: "the message id field /id is missing"},
		{name: "missing header", contentType: jsonType, body: `{}`, sources: []string{"header:X-Nope"}, errMsg: "the message id field header:X-Nope is missing"},
		{name: "missing form field", contentType: formType, body: "Body=Hi", sources: []string{"/MessageSid"}, errMsg: "the message id field /MessageSid is missing"},
		{name: "second part missing", contentType: jsonType, body: `{"tenant":"acme"}`, sources: []string{"/tenant", "/lead_id"}, errMsg: "the message id field /lead_id is missing"},
		{name: "bool", contentType: jsonType, body: `{"id":true}`, sources: []string{"/id"}, errMsg: "the message id field /id is not a string or number"},
		{name: "object", contentType: jsonType, body: `{"id":{"v":1}}`, sources: []string{"/id"}, errMsg: "the message id field /id is not a string or number"},
		{name: "array", contentType: jsonType, body: `{"id":[1]}`, sources: []string{"/id"}, errMsg: "the message id field /id is not a string or number"},
		{name: "empty string", contentType: jsonType, body: `{"id":""}`, sources: []string{"/id"}, errMsg: "the message id field /id is empty"},
		{name: "white space only", contentType: jsonType, body: `{"id":" \t\n "}`, sources: []string{"/id"}, errMsg: "the message id field /id is empty"},
		{name: "empty form field", contentType: formType, body: "MessageSid=&Body=Hi", sources: []string{"/MessageSid"}, errMsg: "the message id field /MessageSid is empty"},
		{name: "257 bytes", contentType: jsonType, body: `{"id":"` + strings.Repeat("a", 257) + `"}`, sources: []string{"/id"}, errMsg: "the message id is longer than 256 bytes"},
		{name: "composite of 257 bytes", contentType: jsonType, body: `{"a":"` + strings.Repeat("a", 128) + `","b":"` + strings.Repeat("b", 128) + `"}`, sources: []string{"/a", "/b"}, errMsg: "the message id is longer than 256 bytes"},
		{name: "257 bytes before trimming is fine", contentType: jsonType, body: `{"id":" ` + strings.Repeat("a", 256) + `"}`, sources: []string{"/id"}, want: strings.Repeat("a", 256)},
		{name: "control character", contentType: jsonType, body: `{"id":"a\u0000b"}`, sources: []string{"/id"}, errMsg: "the message id field /id contains control characters"},
		{name: "invalid UTF-8 in a form", contentType: formType, body: "id=a%FFb", sources: []string{"/id"}, errMsg: "the message id field /id is not valid UTF-8"},

		// Composite ids escape ':' and '%' inside each part; one source is never escaped.
		{name: "composite, colon in the first part", contentType: jsonType, body: `{"tenant":"acme:eu","lead_id":"42"}`, sources: []string{"/tenant", "/lead_id"}, want: "acme%3Aeu:42"},
		{name: "composite, colon in the second part", contentType: jsonType, body: `{"tenant":"acme","lead_id":"eu:42"}`, sources: []string{"/tenant", "/lead_id"}, want: "acme:eu%3A42"},
		{name: "composite, percent in a part", contentType: jsonType, body: `{"tenant":"100%","lead_id":"a%3Ab"}`, sources: []string{"/tenant", "/lead_id"}, want: "100%25:a%253Ab"},
		{name: "composite, form part with a colon", contentType: formType, body: "AccountSid=AC%3A9&MessageSid=SM1", sources: []string{"/AccountSid", "/MessageSid"}, want: "AC%3A9:SM1"},
		{name: "single source keeps its colons", contentType: jsonType, body: `{"id":"acme:eu:42"}`, sources: []string{"/id"}, want: "acme:eu:42"},
		{name: "single source keeps its percent signs", contentType: jsonType, body: `{"id":"a%3Ab%"}`, sources: []string{"/id"}, want: "a%3Ab%"},
		{name: "single header keeps its colons", contentType: jsonType, body: `{}`, sources: []string{"header:X-Urn"}, want: "urn:msg:7"},
		{name: "composite of 256 bytes once escaped", contentType: jsonType, body: `{"a":"` + strings.Repeat(":", 84) + `","b":"abc"}`, sources: []string{"/a", "/b"}, want: strings.Repeat("%3A", 84) + ":abc"},
		{name: "composite of 257 bytes once escaped", contentType: jsonType, body: `{"a":"` + strings.Repeat(":", 84) + `","b":"abcd"}`, sources: []string{"/a", "/b"}, errMsg: "the message id is longer than 256 bytes once its parts are joined"},

		// Lone surrogates decode to U+FFFD, so "u-\ud800" and "u-\udbff" would share an id.
		{name: "lone high surrogate", contentType: jsonType, body: `{"id":"u-\ud800"}`, sources: []string{"/id"}, errMsg: "the message id field /id holds an escaped lone UTF-16 surrogate"},
		{name: "lone low surrogate in a composite part", contentType: jsonType, body: `{"t":"acme","id":"\udfff-1"}`, sources: []string{"/t", "/id"}, errMsg: "the message id field /id holds an escaped lone UTF-16 surrogate"},
		{name: "surrogate pair", contentType: jsonType, body: `{"id":"u-\ud83d\ude00"}`, sources: []string{"/id"}, want: "u-\U0001F600"},
		{name: "a real U+FFFD", contentType: jsonType, body: `{"id":"u-\ufffd","x":"\ud800"}`, sources: []string{"/id"}, want: "u-\uFFFD"},
		{name: "escaped backslash before u", contentType: jsonType, body: `{"id":"u-\\ud800"}`, sources: []string{"/id"}, want: `u-\ud800`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.contentType, tt.body, header)
			got, err := MessageID(p, tt.sources)
			if tt.errMsg != "" {
				wantError(t, err, http.StatusBadRequest, tt.errMsg)
				if got != "" {
					t.Errorf("MessageID returned %q alongside an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("MessageID(%v) error = %v", tt.sources, err)
			}
			if got != tt.want {
				t.Errorf("MessageID(%v) = %q, want %q", tt.sources, got, tt.want)
			}
		})
	}
}

func TestMessageIDConfigMistakes(t *testing.T) {
	p := mustParse(t, jsonType, `{"id":"a"}`, nil)
	for _, tt := range []struct {
		name    string
		sources []string
	}{
		{"no sources", nil},
		{"bad pointer", []string{"id"}},
		{"bad second pointer", []string{"/id", "/x~9"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MessageID(p, tt.sources)
			if err == nil {
				t.Fatalf("MessageID(%v) = %q, want an error", tt.sources, got)
			}
			var he *Error
			if errors.As(err, &he) {
				t.Errorf("MessageID(%v) error %v is an *Error; a configuration mistake must not be blamed on the client", tt.sources, err)
			}
		})
	}
}
