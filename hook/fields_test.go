package hook

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// TestAlternatives: "/a | /b" reads the first alternative that finds a
// non-empty value; an empty one falls through; all empty is empty, all
// absent is absent; an object in the first does not hide the second.
func TestAlternatives(t *testing.T) {
	p := mustParse(t, jsonType, `{"stripped":"", "blank":"  ", "text":"Grüße, Jürgen", "obj":{"k":1}, "n":42, "nul":null}`, nil)
	tests := []struct {
		source, want string
		ok           bool
	}{
		{"/stripped | /text", "Grüße, Jürgen", true},
		{"/blank | /stripped | /text", "Grüße, Jürgen", true},
		{"/missing | /text", "Grüße, Jürgen", true},
		{"/nul | /n", "42", true},
		{"/obj | /text", "Grüße, Jürgen", true},
		{"/text | /n", "Grüße, Jürgen", true},
		{"/stripped | /blank", "", true},
		{"/missing | /nul", "", false},
	}
	for _, tt := range tests {
		v, ok, err := p.Field(tt.source)
		if err != nil || v != tt.want || ok != tt.ok {
			t.Errorf("Field(%q) = %q, %v, %v; want %q, %v", tt.source, v, ok, err, tt.want, tt.ok)
		}
	}
	if _, _, err := p.Field("/obj | /missing"); err == nil {
		t.Errorf("an object and nothing else: no error, want the not-a-string 400")
	}
	for _, bad := range []string{"/a | ", " | /a", "/a | b", "/a |  | /b", "/a | header:X-Id", "mailaddress:header:From | /from"} {
		if err := ValidateSource(bad); err == nil {
			t.Errorf("ValidateSource(%q) = nil, want an error", bad)
		}
	}
	if items, err := p.Items("/a | /b"); err != nil || len(items) != 0 {
		t.Errorf("Items of alternatives = %v, %v; want none", items, err)
	}
}

// TestMailAddress: mailaddress: and mailname: read an RFC 5322 address
// however the sender wrote it; what is not an address is absent, so an
// alternative can take the raw value.
func TestMailAddress(t *testing.T) {
	tests := []struct{ from, addr, name string }{
		{"Jürgen Müller <j@example.com>", "j@example.com", "Jürgen Müller"},
		{"=?UTF-8?Q?J=C3=BCrgen_M=C3=BCller?= <j@example.com>", "j@example.com", "Jürgen Müller"},
		{`"Müller, Jürgen" <j@example.com>`, "j@example.com", "Müller, Jürgen"},
		{"j@example.com", "j@example.com", ""},
		{" <j@example.com> ", "j@example.com", ""},
	}
	for _, tt := range tests {
		p := mustParse(t, formType, "from="+formEscape(tt.from), nil)
		addr, ok, err := p.Field("mailaddress:/from")
		if err != nil || !ok || addr != tt.addr {
			t.Errorf("mailaddress of %q = %q, %v, %v; want %q", tt.from, addr, ok, err, tt.addr)
		}
		name, _, _ := p.Field("mailname:/from")
		if name != tt.name {
			t.Errorf("mailname of %q = %q, want %q", tt.from, name, tt.name)
		}
	}
	p := mustParse(t, formType, "from="+formEscape("Fish & Chips Ltd")+"&headers="+formEscape("From: Ada <ada@example.com>\nSubject: x\n"), nil)
	if v, ok, _ := p.Field("mailaddress:/from"); ok || v != "" {
		t.Errorf("mailaddress of a name with no address = %q, %v; want absent", v, ok)
	}
	if v, _, _ := p.Field("mailaddress:/from | /from"); v != "Fish & Chips Ltd" {
		t.Errorf("mailaddress:/from | /from = %q, want the raw value", v)
	}
	if v, _, _ := p.Field("mailaddress:mailheader:From@/headers"); v != "ada@example.com" {
		t.Errorf("the address of a header = %q, want ada@example.com", v)
	}
	for _, bad := range []string{"mailaddress:", "mailname:x", "mailaddress:mailname:/from"} {
		if err := ValidateSource(bad); err == nil {
			t.Errorf("ValidateSource(%q) = nil, want an error", bad)
		}
	}
}

// TestItemSelector: [path=@/pointer] picks the array element whose path
// equals what the pointer reads for the same batch item: each WhatsApp
// message takes its own sender's contact, whatever the contacts' order.
func TestItemSelector(t *testing.T) {
	const body = `{"entry":[{"changes":[{"value":{
		"contacts":[{"profile":{"name":"Jürgen Müller"},"wa_id":"4930"},{"profile":{"name":"Zoë"},"wa_id":"1650"}],
		"messages":[{"from":"1650","id":"m1"},{"from":"4930","id":"m2"},{"from":"999","id":"m3"},{"id":"m4"}]}}]}]}`
	p := mustParse(t, jsonType, body, nil)
	src := "/entry/*/changes/*/value/contacts/[wa_id=@/entry/*/changes/*/value/messages/*/from]/profile/name"
	if err := ValidateSource(src); err != nil {
		t.Fatal(err)
	}
	items, err := p.Items("/entry/*/changes/*/value/messages/*")
	if err != nil || len(items) != 4 {
		t.Fatalf("items = %v, %v", items, err)
	}
	for i, want := range []string{"Zoë", "Jürgen Müller", "", ""} {
		v, ok, err := p.FieldAt(src, items[i])
		if err != nil || v != want || ok != (want != "") {
			t.Errorf("message %d: name = %q, %v, %v; want %q", i+1, v, ok, err, want)
		}
	}
	for _, bad := range []string{"/c/[w=@/m/0/f/n", "/c/[=@/m]/n", "/c/[w=@/m/~2]/n"} {
		if err := ValidateSource(bad); err == nil {
			t.Errorf("ValidateSource(%q) = nil, want an error", bad)
		}
	}
	// A static value starting with @ is still a value.
	p = mustParse(t, jsonType, `{"c":[{"w":"@x","n":"at"}]}`, nil)
	if v, _, _ := p.Field("/c/[w=@x]/n"); v != "at" {
		t.Errorf("[w=@x] = %q, want the element whose w is @x", v)
	}
}

// TestMailHeaderJSONPairs: mailheader: reads Mailgun's message-headers, a
// JSON list of [name, value] pairs, by name in any case.
func TestMailHeaderJSONPairs(t *testing.T) {
	h := `[["Received", "by mxa"], ["X-Odd", 7], ["message-id", " <a@mg.example.com> "], ["Message-Id", "<second@x>"], ["Subject", "Grüße"]]`
	p := mustParse(t, formType, "message-headers="+formEscape(h)+"&bad="+formEscape("[[1,"), nil)
	if v, ok, _ := p.Field("mailheader:Message-Id@/message-headers"); !ok || v != "<a@mg.example.com>" {
		t.Errorf("Message-Id = %q, %v; want the first, trimmed", v, ok)
	}
	if v, _, _ := p.Field("mailheader:Subject@/message-headers"); v != "Grüße" {
		t.Errorf("Subject = %q", v)
	}
	if _, ok, _ := p.Field("mailheader:X-Odd@/message-headers"); ok {
		t.Errorf("a header whose value is not a string was read")
	}
	if _, ok, _ := p.Field("mailheader:Message-Id@/bad"); ok {
		t.Errorf("a broken JSON list was read")
	}
	id, err := MessageID(p, []string{"/Message-Id | mailheader:Message-Id@/message-headers"})
	if err != nil || id != "<a@mg.example.com>" {
		t.Errorf("MessageID = %q, %v; want the header's", id, err)
	}
	_, err = MessageID(mustParse(t, formType, "sender=a%40b.c", nil), []string{"/Message-Id | mailheader:Message-Id@/message-headers"})
	var he *Error
	if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Msg, "message id") {
		t.Errorf("no id anywhere: %v, want a 400 naming the message id", err)
	}
}

// TestReadAllMedia: a message without text takes its media kind's text
// (a location's too, preset.go); one the preset does not name (an
// unsupported type) is read as before.
func TestReadAllMedia(t *testing.T) {
	p, _ := LookupPreset("whatsapp")
	m := Mapping{MessageID: p.Fields.MessageID, Contact: p.Fields.Contact, Name: p.Fields.Name, Text: p.Fields.Text, Messages: p.Messages}
	const body = `{"entry":[{"changes":[{"value":{"messages":[
		{"from":"1","id":"a","type":"image","image":{"id":"i","caption":"Menü?"}},
		{"from":"1","id":"b","type":"image","image":{"id":"i"}},
		{"from":"1","id":"c","type":"unsupported","unsupported":{"type":"poll"}}]}}]}]}`
	r, err := mustParse(t, jsonType, body, nil).ReadAll(m)
	if err != nil || len(r.Messages) != 3 {
		t.Fatalf("ReadAll = %+v, %v", r, err)
	}
	for i, want := range []string{"Menü?", "sent a photo", ""} {
		if r.Messages[i].Text != want {
			t.Errorf("message %d text = %q, want %q", i+1, r.Messages[i].Text, want)
		}
	}
}

func formEscape(s string) string { return url.QueryEscape(s) }
