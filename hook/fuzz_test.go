package hook

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzParseAndMessageID checks that no body, content type or source can crash
// the inbound path or produce an id that breaks the event-key rules, and that
// the id is injective: the field values can be read back from it, so two
// different messages never share an id. sources is a comma-separated list so
// composite ids are explored too.
func FuzzParseAndMessageID(f *testing.F) {
	f.Add(jsonType, []byte(`{"id":"evt_1"}`), "/id")
	f.Add(jsonType, []byte(`{"id":12345678901234567890}`), "/id")
	f.Add(jsonType, []byte(`{"tenant":"acme","lead_id":42}`), "/tenant,/lead_id")
	f.Add(jsonType, []byte(`{"a/b":{"m~n":[" x ",{"k":null}]}}`), "/a~1b/m~0n/0")
	f.Add(jsonType, []byte(`{"id":true}`), "/id")
	f.Add(jsonType, []byte(`{"id":"   "}`), "/id")
	f.Add(jsonType, []byte(`{"id":"`+strings.Repeat("x", 257)+`"}`), "/id")
	f.Add("application/cloudevents+json; charset=utf-8", []byte(`{"data":{"id":"ce-1"}}`), "/data/id")
	f.Add("", []byte(` [{"id":"a"}]`), "/0/id")
	f.Add("text/plain", []byte(`{"id":"a"}`), "header:X-Id")
	f.Add(formType, []byte("MessageSid=SM123&From=%2B15551234567&Body=Hi"), "/MessageSid")
	f.Add(formType, []byte("MessageSid=SM123&AccountSid=AC9"), "/AccountSid,/MessageSid")
	f.Add(formType, []byte("id=%zz"), "/id")
	f.Add("application/xml", []byte(`<id>1</id>`), "/id")
	f.Add("", []byte(""), "")
	f.Add(jsonType, []byte(`{"id":"a\u0085"}`), "/id")
	f.Add(jsonType, []byte(`{"t":"acme:eu","id":"42"}`), "/t,/id")
	f.Add(jsonType, []byte(`{"t":"acme","id":"eu:42"}`), "/t,/id")
	f.Add(jsonType, []byte(`{"t":"100%","id":"a%3Ab"}`), "/t,/id")
	f.Add(jsonType, []byte(`{"id":"acme:eu:42"}`), "/id")
	f.Add(jsonType, []byte("{\"id\":\"u-\xff\"}"), "/id")
	f.Add(jsonType, []byte(`{"id":"u-\ud800","x":"\\udc00"}`), "/id")
	f.Add(jsonType, []byte(`{"id":"u-\ud83d\ude00\udfff"}`), "/id,/id")
	f.Add("multipart/form-data; boundary=b", []byte("--b\r\nContent-Disposition: form-data; name=\"headers\"\r\n\r\nMessage-ID: <a@b>\nSubject: x\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.pdf\"\r\n\r\nbytes\r\n--b--\r\n"), "mailheader:Message-ID@/headers")
	f.Add("multipart/form-data; boundary=b", []byte("--b\r\nContent-Disposition: form-data; name=\"Message-Id\"\r\n\r\n<x@y>\r\n--b--"), "/Message-Id,/Message-Id")
	f.Add("multipart/form-data", []byte("--b--"), "/a")
	f.Add(jsonType, []byte(`{"a":[{"k":"x","id":"1"},{"k":"y","id":"2"}]}`), "/a/[k=y]/id")
	f.Add(jsonType, []byte(`{"a":"","b":" x "}`), "/a | /b")
	f.Add(jsonType, []byte(`{"a":{"k":1},"b":"y"}`), "/a | /b,/b | /a")
	f.Add(formType, []byte("from=J%C3%BCrgen+M%C3%BCller+%3Cj%40example.com%3E"), "mailaddress:/from | /from")
	f.Add(formType, []byte("from=%3D%3FUTF-8%3FQ%3FJ%3DC3%3DBCrgen%3F%3D+%3Cj%40example.com%3E"), "mailname:/from")
	f.Add(formType, []byte("message-headers=%5B%5B%22Message-Id%22%2C+%22%3Cx%40y%3E%22%5D%5D"), "/Message-Id | mailheader:Message-Id@/message-headers")
	f.Add(jsonType, []byte(`{"c":[{"w":"2","n":"B"},{"w":"1","n":"A"}],"m":[{"f":"1"}]}`), "/c/[w=@/m/0/f]/n")
	f.Fuzz(func(t *testing.T, contentType string, body []byte, sources string) {
		header := http.Header{"X-Id": {" hdr-1 "}}
		p, err := Parse(contentType, body, header)
		if err != nil {
			checkClientError(t, err)
			return
		}
		srcs := strings.Split(sources, ",")
		for _, s := range srcs {
			v, ok, err := p.Field(s)
			if ValidateSource(s) != nil {
				if err == nil {
					t.Fatalf("Field(%q) accepted a source ValidateSource refuses", s)
				}
				continue
			}
			if err != nil {
				checkClientError(t, err)
			}
			if err != nil && (ok || v != "") {
				t.Fatalf("Field(%q) = %q, %v alongside error %v", s, v, ok, err)
			}
		}
		id, err := MessageID(p, srcs)
		if err != nil {
			if id != "" {
				t.Fatalf("MessageID = %q alongside error %v", id, err)
			}
			var he *Error
			if errors.As(err, &he) {
				checkClientError(t, err)
			}
			return
		}
		if id == "" || len(id) > MaxIDLen {
			t.Fatalf("MessageID = %q (%d bytes), want 1..%d bytes", id, len(id), MaxIDLen)
		}
		first, _ := utf8.DecodeRuneInString(id)
		last, _ := utf8.DecodeLastRuneInString(id)
		if unicode.IsSpace(first) || unicode.IsSpace(last) {
			t.Fatalf("MessageID = %q has surrounding white space", id)
		}
		if !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0 {
			t.Fatalf("MessageID = %q is not clean UTF-8 text", id)
		}
		// Injectivity: decoding the id gives back every field's value, so
		// the id is a one-to-one function of them.
		parts := []string{id}
		if len(srcs) > 1 {
			parts = strings.Split(id, ":")
			if len(parts) != len(srcs) {
				t.Fatalf("MessageID(%q) = %q has %d parts, want %d", srcs, id, len(parts), len(srcs))
			}
		}
		for i, s := range srcs {
			v, _, _ := p.Field(s)
			got := parts[i]
			if len(srcs) > 1 {
				if got, err = url.PathUnescape(got); err != nil {
					t.Fatalf("MessageID(%q) = %q: part %d does not unescape: %v", srcs, id, i, err)
				}
			}
			if got != v {
				t.Fatalf("MessageID(%q) = %q: part %d reads back as %q, but field %s is %q", srcs, id, i, got, s, v)
			}
		}
	})
}

func checkClientError(t *testing.T, err error) {
	t.Helper()
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if he.Status != http.StatusBadRequest || he.Msg == "" {
		t.Fatalf("error = %d %q, want 400 with a sentence", he.Status, he.Msg)
	}
}
