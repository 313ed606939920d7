package hook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// typeformSkipped is a Typeform response whose optional phone question was
// skipped: the e-mail answer is at index 1, not 2.
const typeformSkipped = `{"form_response":{"token":"tok1","answers":[
 {"type":"text","text":"Laura","field":{"id":"f1","type":"short_text","ref":"name"}},
 {"type":"email","email":"laura@example.com","field":{"id":"f3","type":"email","ref":"email"}},
 {"type":"number","number":42,"field":{"id":"f5","type":"number","ref":"seats"}},
 {"type":"text","text":"a=b]","field":{"id":"f6","type":"short_text","ref":"odd=ref]"}}]}}`

func TestSelector(t *testing.T) {
	p := mustParse(t, jsonType, typeformSkipped, nil)
	tests := []struct {
		source, want string
		ok           bool
	}{
		{"/form_response/answers/[field.ref=email]/email", "laura@example.com", true},
		{"/form_response/answers/[type=email]/email", "laura@example.com", true},
		{"/form_response/answers/[field.ref=name]/text", "Laura", true},
		{"/form_response/answers/[number=42]/field/ref", "seats", true},    // numbers compare as written
		{"/form_response/answers/[field.ref=odd=ref]]/text", "a=b]", true}, // the value runs to the last ]
		{"/form_response/answers/[field.ref=phone]/text", "", false},       // skipped: absent, not the next answer
		{"/form_response/answers/[field.ref=email]/text", "", false},
		{"/form_response/answers/[field.nope=email]/email", "", false},
		{"/form_response/[token=tok1]", "", false}, // a selector on an object reads nothing
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			if err := ValidateSource(tt.source); err != nil {
				t.Fatalf("ValidateSource: %v", err)
			}
			got, ok, err := p.Field(tt.source)
			if err != nil || got != tt.want || ok != tt.ok {
				t.Errorf("Field = %q, %v, %v; want %q, %v", got, ok, err, tt.want, tt.ok)
			}
		})
	}
	for _, bad := range []string{"/a/[=x]", "/a/[x]", "/a/[.b=x]", "/a/[b..c=x]", "/a/[b=x", "mailheader:Message-ID", "mailheader:@/h", "mailheader:Bad Name@/h", "mailheader:X@h"} {
		if ValidateSource(bad) == nil {
			t.Errorf("ValidateSource(%q) = nil, want an error", bad)
		}
	}
}

const waBatch = `{"entry":[
 {"changes":[{"value":{"contacts":[{"profile":{"name":"A"}}],"messages":[{"id":"m1","text":{"body":"one"}},{"id":"m2","text":{"body":"two"}}]}},
             {"value":{"statuses":[{"id":"s1","status":"read"}]}}]},
 {"changes":[{"value":{"messages":[null,{"id":"m3"}]}}]}]}`

func TestItems(t *testing.T) {
	p := mustParse(t, jsonType, waBatch, nil)
	items, err := p.Items("/entry/*/changes/*/value/messages/*")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, at := range items {
		id, err := MessageIDAt(p, []string{"/entry/*/changes/*/value/messages/*/id"}, at)
		if err != nil {
			t.Fatalf("item %v: %v", at, err)
		}
		ids = append(ids, id)
	}
	if got := strings.Join(ids, ","); got != "m1,m2,m3" {
		t.Errorf("ids = %s, want m1,m2,m3 (a null element is no item)", got)
	}
	if text, _, _ := p.FieldAt("/entry/*/changes/*/value/messages/*/text/body", items[1]); text != "two" {
		t.Errorf("text of item 2 = %q", text)
	}
	if name, _, _ := p.FieldAt("/entry/*/changes/*/value/contacts/0/profile/name", items[0]); name != "A" {
		t.Errorf("name beside item 1 = %q", name)
	}
	if p.Present("/entry/*/changes/*/value/messages/*/text", items[2]) {
		t.Error("item 3 has no text but Present says it has")
	}
	statuses, _ := p.Items("/entry/*/changes/*/value/statuses/*")
	if len(statuses) != 1 {
		t.Errorf("statuses = %v, want one", statuses)
	}
	if one, _ := p.Items(""); len(one) != 1 || one[0] != nil {
		t.Errorf(`Items("") = %v, want the whole body once`, one)
	}
	if none, _ := p.Items("/nope/*"); len(none) != 0 {
		t.Errorf("Items of a missing array = %v", none)
	}
	big := `{"m":[` + strings.Repeat(`{"id":1},`, MaxItems) + `{"id":1}]}`
	if _, err := mustParse(t, jsonType, big, nil).Items("/m/*"); err == nil {
		t.Errorf("Items accepted %d items", MaxItems+1)
	} else {
		wantError(t, err, http.StatusBadRequest, "more than 1000 items")
	}
}

func multipartBody(boundary string, parts ...[3]string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + p[0] + "\"")
		if p[1] != "" {
			b.WriteString("; filename=\"" + p[1] + "\"\r\nContent-Type: application/pdf")
		}
		b.WriteString("\r\n\r\n" + p[2] + "\r\n")
	}
	return b.String() + "--" + boundary + "--\r\n"
}

func TestMultipart(t *testing.T) {
	body := multipartBody("b0", [3]string{"headers", "", "Received: x\nMessage-ID: <id-1@example.com>\nSubject: Hi\n"},
		[3]string{"from", "", "Jane <jane@example.com>"}, [3]string{"text", "", " Hello \n"},
		[3]string{"attachment1", "plan.pdf", "%PDF secret bytes"}, [3]string{"from", "", "second"})
	p := mustParse(t, "multipart/form-data; boundary=b0", body, nil)
	for src, want := range map[string]string{"/from": "Jane <jane@example.com>", "/text": "Hello", "mailheader:Message-ID@/headers": "<id-1@example.com>", "mailheader:subject@/headers": "Hi"} {
		if got, ok, err := p.Field(src); !ok || err != nil || got != want {
			t.Errorf("Field(%s) = %q, %v, %v; want %q", src, got, ok, err, want)
		}
	}
	if _, ok, _ := p.Field("/attachment1"); ok {
		t.Error("a file reads as a field")
	}
	if _, ok, _ := p.Field("mailheader:In-Reply-To@/headers"); ok {
		t.Error("an absent email header reads as present")
	}
	kept, isJSON, err := p.Stored([]byte(body))
	if err != nil || !isJSON {
		t.Fatalf("Stored = %v, %v", isJSON, err)
	}
	if strings.Contains(string(kept), "secret bytes") {
		t.Errorf("the stored body holds the attachment's bytes: %s", kept)
	}
	var doc struct {
		Fields      map[string][]string `json:"fields"`
		Attachments []Attachment        `json:"attachments"`
	}
	if err := json.Unmarshal(kept, &doc); err != nil {
		t.Fatal(err)
	}
	want := Attachment{Field: "attachment1", Filename: "plan.pdf", ContentType: "application/pdf", Size: int64(len("%PDF secret bytes"))}
	if len(doc.Attachments) != 1 || doc.Attachments[0] != want || len(doc.Fields["from"]) != 2 {
		t.Errorf("stored %+v, want fields and %+v", doc, want)
	}
	// A form or JSON body is kept as received.
	if kept, isJSON, _ := mustParse(t, formType, "a=1", nil).Stored([]byte("a=1")); string(kept) != "a=1" || isJSON {
		t.Errorf("a form is kept as %q, json %v", kept, isJSON)
	}
}

// FuzzSelector checks the selector and wildcard syntax: no source or body
// crashes; every item Items finds is present when its own pattern is read
// at its indices; and a value found through a selector belongs to an
// element whose property has the selected value.
func FuzzSelector(f *testing.F) {
	f.Add(typeformSkipped, "/form_response/answers/[field.ref=email]/email", "/form_response/answers/*")
	f.Add(waBatch, "/entry/*/changes/*/value/messages/*/id", "/entry/*/changes/*/value/messages/*")
	f.Add(`[[1,2],[3]]`, "/*/*", "/*/*")
	f.Add(`{"a":[{"b":{"c":"x"},"v":1}]}`, "/a/[b.c=x]/v", "/a/*")
	f.Add(`{"*":{"k":"v"}}`, "/*/k", "/*")
	f.Add(`{"a":[{"k":"]"}]}`, "/a/[k=]]/k", "/a/[k=]]")
	f.Fuzz(func(t *testing.T, body, source, pattern string) {
		p, err := Parse(jsonType, []byte(body), nil)
		if err != nil {
			return
		}
		v, ok, err := p.Field(source)
		if ValidateSource(source) != nil {
			if err == nil {
				t.Fatalf("Field(%q) accepted a source ValidateSource refuses", source)
			}
		} else if ok && strings.Contains(source, "[") {
			r, _ := parseSource(source)
			var cur any = p.doc
			for _, tok := range r.tokens {
				if arr, isArr := cur.([]any); isArr {
					if sel, isSel := parseSelector(tok); isSel {
						el, picked := sel.pick(arr)
						if !picked {
							t.Fatalf("Field(%q) found %q through a selector that picks nothing", source, v)
						}
						if got, res := lookupJSON(el, sel.path); res != found || got != strings.TrimSpace(sel.value) {
							t.Fatalf("selector %q picked an element whose property is %q", tok, got)
						}
						cur = el
						continue
					}
				}
				next, ok := walkJSON(cur, []string{tok})
				if !ok {
					t.Fatalf("Field(%q) found %q, but the walk stops at %q", source, v, tok)
				}
				cur = next
			}
		}
		items, err := p.Items(pattern)
		if err != nil {
			if ValidateSource(pattern) == nil {
				checkClientError(t, err)
			}
			return
		}
		pr, _ := parseSource(pattern)
		stars := 0
		for _, tok := range pr.tokens {
			if tok == "*" {
				stars++
			}
		}
		for _, at := range items {
			if pattern != "" && len(at) > stars {
				t.Fatalf("Items(%q) gave %v, more indices than its %d wildcards", pattern, at, stars)
			}
			if pattern != "" && !p.Present(pattern, at) {
				t.Fatalf("Items(%q) gave %v, which its own pattern does not find", pattern, at)
			}
		}
	})
}
