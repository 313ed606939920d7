package hook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

// nestedDoc exercises pointers: nesting, escapes, arrays, numbers, white space and non-scalars.
const nestedDoc = `{
	"id": "  evt_1 \n",
	"big": 12345678901234567890,
	"float": 1.50,
	"neg": -7,
	"lead": {"contact": {"email": "a@example.com"}, "tags": ["x", "y"]},
	"a/b": "slash",
	"m~n": "tilde",
	"~1": "literal tilde one",
	"": "empty key",
	"items": [{"sku": "first"}, {"sku": "second"}],
	"flag": true,
	"obj": {},
	"arr": [],
	"nothing": null,
	"blank": "   "
}`

// wantError fails t unless err is an *Error with status and a message containing msg.
func wantError(t *testing.T, err error, status int, msg string) {
	t.Helper()
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T), want *Error", err, err)
	}
	if he.Status != status {
		t.Errorf("status = %d, want %d", he.Status, status)
	}
	if !strings.Contains(he.Msg, msg) {
		t.Errorf("msg = %q, want it to contain %q", he.Msg, msg)
	}
	if he.Error() != he.Msg {
		t.Errorf("Error() = %q, want the message %q", he.Error(), he.Msg)
	}
}

func mustParse(t *testing.T, contentType, body string, header http.Header) *Payload {
	t.Helper()
	p, err := Parse(contentType, []byte(body), header)
	if err != nil {
		t.Fatalf("Parse(%q, %q) = %v", contentType, body, err)
	}
	return p
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name, contentType, body, source, want string
	}{
		{"json", jsonType, `{"id":"a"}`, "/id", "a"},
		{"json with charset", "application/json; charset=utf-8", `{"id":"a"}`, "/id", "a"},
		{"json upper case type", "Application/JSON", `{"id":"a"}`, "/id", "a"},
		{"json suffix", "application/vnd.acme+json", `{"id":"a"}`, "/id", "a"},
		{"json bad parameter tolerated", "application/json; charset", `{"id":"a"}`, "/id", "a"},
		{"no content type, object", "", ` {"id":"a"}`, "/id", "a"},
		{"no content type, array", "", "\n[\"a\"]", "/0", "a"},
		{"text/plain sniffed", "text/plain; charset=utf-8", `{"id":"a"}`, "/id", "a"},
		{"json top-level scalar", jsonType, `"  whole "`, "", "whole"},
		{"json trailing white space", jsonType, "{\"id\":\"a\"}\n\n", "/id", "a"},
		{"form", formType, "MessageSid=SM123&From=%2B15551234567&Body=Hi", "/From", "+15551234567"},
		{"form with charset", formType + "; charset=UTF-8", "id=a", "/id", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.contentType, tt.body, nil)
			got, ok, err := p.Field(tt.source)
			if err != nil || !ok || got != tt.want {
				t.Errorf("Field(%q) = %q, %v, %v; want %q, true, nil", tt.source, got, ok, err, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, contentType, body, msg string
	}{
		{"xml", "application/xml", `<id>1</id>`, "the body is neither JSON, form-encoded nor multipart/form-data"},
		{"xml body without type", "", `<id>1</id>`, "the body is neither JSON, form-encoded nor multipart/form-data"},
		{"plain text not json", "text/plain", `hello`, "the body is neither JSON, form-encoded nor multipart/form-data"},
		{"multipart without a boundary", "multipart/form-data", "--x--", "names no boundary"},
		{"multipart cut short", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue", "not valid multipart/form-data"},
		{"empty body no type", "", "", "the body is neither JSON, form-encoded nor multipart/form-data"},
		{"garbage content type", "/;;", `{"id":"a"}`, "the body is neither JSON, form-encoded nor multipart/form-data"},
		{"empty json body", jsonType, "", "the body is empty"},
		{"blank json body", jsonType, " \n\t", "the body is empty"},
		{"invalid json", jsonType, `{"id":}`, "the body is not valid JSON: invalid character '}'"},
		{"truncated json", jsonType, `{"id":"a"`, "the body is not valid JSON: it ends too early"},
		{"sniffed invalid json", "", `{id:1}`, "the body is not valid JSON"},
		{"two json values", jsonType, `{"id":"a"}{"id":"b"}`, "there is data after the top-level value"},
		{"bad form escape", formType, "id=%zz", "the body is not valid form data"},
		{"invalid UTF-8 in the id", jsonType, "{\"id\":\"u-\xff\"}", "the body is not valid JSON: it is not valid UTF-8"},
		{"invalid UTF-8 in the text", jsonType, "{\"id\":\"a\",\"text\":\"hi \xfe\"}", "the body is not valid JSON: it is not valid UTF-8"},
		{"invalid UTF-8 in a key", jsonType, "{\"id\":\"a\",\"\xc0\":1}", "the body is not valid JSON: it is not valid UTF-8"},
		{"encoded surrogate (CESU-8)", jsonType, "{\"id\":\"u-\xed\xa0\x80\"}", "the body is not valid JSON: it is not valid UTF-8"},
		{"sniffed invalid UTF-8", "", "{\"id\":\"u-\xff\"}", "the body is not valid JSON: it is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.contentType, []byte(tt.body), nil)
			if p != nil {
				t.Errorf("Parse returned a payload for a refused body")
			}
			wantError(t, err, http.StatusBadRequest, tt.msg)
		})
	}
}

func TestFieldJSON(t *testing.T) {
	p := mustParse(t, jsonType, nestedDoc, nil)
	tests := []struct {
		source string
		want   string
		ok     bool
		errMsg string // non-empty: an *Error with this message is expected
	}{
		{source: "/id", want: "evt_1", ok: true},
		{source: "/big", want: "12345678901234567890", ok: true},
		{source: "/float", want: "1.50", ok: true},
		{source: "/neg", want: "-7", ok: true},
		{source: "/lead/contact/email", want: "a@example.com", ok: true},
		{source: "/lead/tags/1", want: "y", ok: true},
		{source: "/items/0/sku", want: "first", ok: true},
		{source: "/items/1/sku", want: "second", ok: true},
		{source: "/a~1b", want: "slash", ok: true},
		{source: "/m~0n", want: "tilde", ok: true},
		{source: "/~01", want: "literal tilde one", ok: true},
		{source: "/", want: "empty key", ok: true},
		{source: "/blank", want: "", ok: true},
		{source: "/missing"},
		{source: "/nothing"},
		{source: "/items/2/sku"},
		{source: "/items/-"},
		{source: "/items/01"},
		{source: "/items/x"},
		{source: "/items/99999999999999999999999"},
		{source: "/id/deeper"},
		{source: "/a/b"},
		{source: "/flag", errMsg: "field /flag is not a string or number"},
		{source: "/obj", errMsg: "field /obj is not a string or number"},
		{source: "/arr", errMsg: "field /arr is not a string or number"},
		{source: "/lead", errMsg: "field /lead is not a string or number"},
		{source: "", errMsg: "field  is not a string or number"},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			got, ok, err := p.Field(tt.source)
			if tt.errMsg != "" {
				wantError(t, err, http.StatusBadRequest, tt.errMsg)
				return
			}
			if err != nil {
				t.Fatalf("Field(%q) error = %v", tt.source, err)
			}
			if got != tt.want || ok != tt.ok {
				t.Errorf("Field(%q) = %q, %v; want %q, %v", tt.source, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestFieldFormAndHeader(t *testing.T) {
	header := http.Header{}
	header.Set("X-Request-Id", "  req-9 ")
	header.Set("X-Empty", "")
	header.Add("X-Twice", "first")
	header.Add("X-Twice", "second")
	p := mustParse(t, formType, "MessageSid=SM123&From=%2B15551234567&Body=+Hi+there+&a%2Fb=esc&Empty=&Dup=1&Dup=2", header)
	tests := []struct {
		source string
		want   string
		ok     bool
	}{
		{"/MessageSid", "SM123", true},
		{"/From", "+15551234567", true},
		{"/Body", "Hi there", true},
		{"/a~1b", "esc", true},
		{"/Empty", "", true},
		{"/Dup", "1", true},
		{"/messagesid", "", false}, // form fields are case-sensitive
		{"/Missing", "", false},
		{"/MessageSid/0", "", false},
		{"header:X-Request-Id", "req-9", true},
		{"header:x-request-id", "req-9", true},
		{"header:X-Empty", "", true},
		{"header:X-Twice", "first", true},
		{"header:X-Absent", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			got, ok, err := p.Field(tt.source)
			if err != nil {
				t.Fatalf("Field(%q) error = %v", tt.source, err)
			}
			if got != tt.want || ok != tt.ok {
				t.Errorf("Field(%q) = %q, %v; want %q, %v", tt.source, got, ok, tt.want, tt.ok)
			}
		})
	}
	t.Run("whole form is not a string", func(t *testing.T) {
		_, _, err := p.Field("")
		wantError(t, err, http.StatusBadRequest, "is not a string or number")
	})
}

func TestParseCopiesHeader(t *testing.T) {
	header := http.Header{"X-Id": {"before"}}
	p := mustParse(t, jsonType, `{}`, header)
	header.Set("X-Id", "after")
	got, _, _ := p.Field("header:X-Id")
	if got != "before" {
		t.Errorf("Field(header:X-Id) = %q after the caller changed its map, want %q", got, "before")
	}
}

func TestFieldBadSource(t *testing.T) {
	p := mustParse(t, jsonType, `{"id":"a"}`, nil)
	for _, src := range []string{"id", "/a~2", "header:"} {
		t.Run(src, func(t *testing.T) {
			_, ok, err := p.Field(src)
			if err == nil || ok {
				t.Fatalf("Field(%q) = ok %v, err %v; want an error", src, ok, err)
			}
			var he *Error
			if errors.As(err, &he) {
				t.Errorf("Field(%q) error is an *Error (%v); a bad source is a configuration mistake, not the client's", src, err)
			}
		})
	}
}

func TestValidateSource(t *testing.T) {
	tests := []struct {
		source string
		ok     bool
	}{
		{"", true},
		{"/", true},
		{"/id", true},
		{"/a/b/0", true},
		{"/a~0b~1c", true},
		{"/~01", true},
		{"//", true},
		{"header:X-Signature", true},
		{"header:x_custom.id", true},
		{"id", false},
		{"a/b", false},
		{"/a~", false},
		{"/a~2", false},
		{"/~x", false},
		{"header:", false},
		{"header:X Id", false},
		{"header:X:Id", false},
		{"Header:X-Id", false},
		{"header:X-Id\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			err := ValidateSource(tt.source)
			if got := err == nil; got != tt.ok {
				t.Errorf("ValidateSource(%q) = %v, want ok=%v", tt.source, err, tt.ok)
			}
		})
	}
}

func TestMarkLoneSurrogates(t *testing.T) {
	tests := []struct {
		name, body, want string // want "": nothing to mark
	}{
		{"none", `{"id":"plain é"}`, ""},
		{"pair", `{"id":"\ud83d\ude00"}`, ""},
		{"escaped backslash", `{"id":"\\ud800"}`, ""},
		{"escaped quote then lone", `{"id":"\"\ud800"}`, `{"id":"\"\u0000"}`},
		{"lone high", `{"id":"u-\ud800"}`, `{"id":"u-\u0000"}`},
		{"lone low", `{"id":"u-\uDFFF"}`, `{"id":"u-\u0000"}`},
		{"high before a non-surrogate", `["\ud800\u0041"]`, `["\u0000\u0041"]`},
		{"high, then a pair", `["\ud800\ud800\udc00"]`, `["\u0000\ud800\udc00"]`},
		{"high at the end of a string", `["\udbff","\udc00"]`, `["\u0000","\u0000"]`},
		{"in a key", `{"\udc00":1}`, `{"\u0000":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := markLoneSurrogates([]byte(tt.body))
			if string(got) != tt.want {
				t.Errorf("markLoneSurrogates(%s) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}
