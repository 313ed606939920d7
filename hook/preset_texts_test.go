package hook

import "testing"

// TestWhatsAppTextsOfEveryType: a location, a contact card and a reaction
// are recorded as what they are, a tapped button (a template's quick
// reply, an interactive reply button or list row) by its text; never as
// an empty message.
func TestWhatsAppTextsOfEveryType(t *testing.T) {
	p, _ := LookupPreset("whatsapp")
	m := Mapping{MessageID: p.Fields.MessageID, Contact: p.Fields.Contact, Name: p.Fields.Name, Text: p.Fields.Text, Messages: p.Messages}
	const body = `{"entry":[{"changes":[{"value":{"messages":[
		{"from":"1","id":"a","type":"location","location":{"latitude":38.7,"longitude":-9.1,"name":"Shop"}},
		{"from":"1","id":"b","type":"contacts","contacts":[{"name":{"formatted_name":"Bob"}}]},
		{"from":"1","id":"c","type":"reaction","reaction":{"message_id":"wamid.X","emoji":"👍"}},
		{"from":"1","id":"d","type":"button","button":{"payload":"yes","text":"Yes, call me"}},
		{"from":"1","id":"e","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"b1","title":"Book a visit"}}},
		{"from":"1","id":"f","type":"interactive","interactive":{"type":"list_reply","list_reply":{"id":"r1","title":"Saturday","description":"10-12"}}}]}}]}]}`
	r, err := mustParse(t, jsonType, body, nil).ReadAll(m)
	if err != nil || len(r.Messages) != 6 {
		t.Fatalf("ReadAll = %+v, %v", r, err)
	}
	for i, want := range []string{"sent a location", "sent a contact card", "reacted to a message", "Yes, call me", "Book a visit", "Saturday"} {
		if got := r.Messages[i].Text; got != want {
			t.Errorf("message %d text = %q, want %q", i+1, got, want)
		}
	}
}

// TestMailgunDisplayName: a Mailgun email's lead is the bare sender, its
// name the display name of from.
func TestMailgunDisplayName(t *testing.T) {
	p, _ := LookupPreset("mailgun")
	m := Mapping{MessageID: p.Fields.MessageID, Contact: p.Fields.Contact, Name: p.Fields.Name, Text: p.Fields.Text, Messages: p.Messages}
	body := "Message-Id=" + formEscape("<m1@mail.example>") + "&sender=" + formEscape("juergen@example.com") +
		"&from=" + formEscape("Jürgen Müller <juergen@example.com>") + "&stripped-text=Hallo"
	r, err := mustParse(t, formType, body, nil).ReadAll(m)
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("ReadAll = %+v, %v", r, err)
	}
	if got := r.Messages[0]; got.Contact != "juergen@example.com" || got.Name != "Jürgen Müller" {
		t.Errorf("contact %q name %q, want juergen@example.com and Jürgen Müller", got.Contact, got.Name)
	}
}
