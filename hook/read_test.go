package hook

import (
	"errors"
	"strings"
	"testing"
)

// TestReadAll reads a WhatsApp-shaped batch by a mapping: each message
// with its fields (the conversation falling back to the contact, then the
// id), the status items read as receipts (one without a status skipped),
// and a refused item refusing the whole payload with its place named.
func TestReadAll(t *testing.T) {
	const body = `{"entry":[{"changes":[{"value":{
		"messages":[{"id":"m1","from":"+15550001","text":{"body":"one"}},{"id":"m2","text":{"body":"two &amp; \u00e9"}}],
		"statuses":[{"id":"wamid.1","status":"read","biz_opaque_callback_data":"ref-1"},{"id":"wamid.2"}]}}]}]}`
	m := Mapping{
		MessageID: []string{"/entry/*/changes/*/value/messages/*/id"},
		Contact:   "/entry/*/changes/*/value/messages/*/from",
		Text:      "/entry/*/changes/*/value/messages/*/text/body",
		Messages:  Messages{Items: "/entry/*/changes/*/value/messages/*"},
		Receipts:  Receipts{Items: "/entry/*/changes/*/value/statuses/*", ID: "/entry/*/changes/*/value/statuses/*/id", Status: "/entry/*/changes/*/value/statuses/*/status"},
	}
	r, err := mustParse(t, jsonType, body, nil).ReadAll(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []Item{
		{MessageID: "m1", ConversationID: "+15550001", Contact: "+15550001", Text: "one"},
		{MessageID: "m2", ConversationID: "m2", Text: "two &amp; é"},
	}
	if len(r.Messages) != len(want) {
		t.Fatalf("read %d messages, want %d: %+v", len(r.Messages), len(want), r.Messages)
	}
	for i := range want {
		if r.Messages[i] != want[i] {
			t.Errorf("message %d = %+v, want %+v", i+1, r.Messages[i], want[i])
		}
	}
	// Both items of the message list are messages; the status without one
	// is skipped, never a 400.
	if r.Notifications != 0 {
		t.Errorf("%d notifications, want 0: every item of the message list is a message", r.Notifications)
	}
	if len(r.Receipts) != 1 || r.Receipts[0] != (ReceiptItem{ProviderID: "wamid.1", Status: "read", Ref: "ref-1"}) {
		t.Errorf("receipts = %+v, want wamid.1 read with its reference", r.Receipts)
	}

	bad := strings.Replace(body, `"id":"m2"`, `"id":"m\u00072"`, 1) // a control character inside
	_, err = mustParse(t, jsonType, bad, nil).ReadAll(m)
	var he *Error
	if !errors.As(err, &he) || he.Status != 400 || !strings.HasPrefix(he.Msg, "message 2 of the batch: ") {
		t.Errorf("a batch whose second message id is refused: %v, want a 400 naming message 2", err)
	}

	// A body with no item at all is one notification.
	r, err = mustParse(t, jsonType, `{"object":"whatsapp_business_account"}`, nil).ReadAll(m)
	if err != nil || len(r.Messages) != 0 || r.Notifications != 1 {
		t.Errorf("an empty body: %+v, %v; want one notification", r, err)
	}
}
