package hook

import (
	"testing"
	"time"
)

// TestSentAtFromTheProvidersClock: WhatsApp's timestamp (seconds, a
// string) and Messenger's (milliseconds, a number) become the message's
// SentAt, in a pretty-printed body as the providers send it; a missing or
// nonsense timestamp leaves it zero, so the window counts from our receipt.
func TestSentAtFromTheProvidersClock(t *testing.T) {
	read := func(preset, body string) []Item {
		t.Helper()
		p, ok := LookupPreset(preset)
		if !ok {
			t.Fatalf("no preset %s", preset)
		}
		m := Mapping{MessageID: p.Fields.MessageID, Contact: p.Fields.Contact, Name: p.Fields.Name, Text: p.Fields.Text, Messages: p.Messages}
		r, err := mustParse(t, jsonType, body, nil).ReadAll(m)
		if err != nil {
			t.Fatalf("%s ReadAll: %v", preset, err)
		}
		return r.Messages
	}
	wa := read("whatsapp", `{
  "entry": [{
    "changes": [{
      "value": {
        "messages": [
          {"from": "15552490978", "id": "wamid.A", "timestamp": "1764666000", "type": "text", "text": {"body": "fish & chips <2> \"now\" 🐟"}},
          {"from": "15552490978", "id": "wamid.B", "timestamp": "soon", "type": "text", "text": {"body": "שלום"}},
          {"from": "15552490978", "id": "wamid.C", "type": "text", "text": {"body": "no time"}}
        ]
      }
    }]
  }]
}`)
	if len(wa) != 3 {
		t.Fatalf("whatsapp messages = %d, want 3", len(wa))
	}
	if want := time.Unix(1764666000, 0).UTC(); !wa[0].SentAt.Equal(want) {
		t.Errorf("whatsapp SentAt = %v, want %v", wa[0].SentAt, want)
	}
	for i := 1; i < 3; i++ {
		if !wa[i].SentAt.IsZero() {
			t.Errorf("whatsapp message %d SentAt = %v, want zero (no usable timestamp)", i+1, wa[i].SentAt)
		}
	}
	fb := read("messenger", `{
  "object": "page",
  "entry": [{
    "id": "PAGE",
    "time": 1764666000123,
    "messaging": [{
      "sender": {"id": "PSID1"},
      "recipient": {"id": "PAGE"},
      "timestamp": 1764666000123,
      "message": {"mid": "m_1", "text": "Hi & <b>bye</b> 👋"}
    }]
  }]
}`)
	if len(fb) != 1 {
		t.Fatalf("messenger messages = %d, want 1", len(fb))
	}
	if want := time.UnixMilli(1764666000123).UTC(); !fb[0].SentAt.Equal(want) {
		t.Errorf("messenger SentAt = %v, want %v", fb[0].SentAt, want)
	}
}
