package outbound_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/testkit/corpus"
)

// FuzzEventForm: an event's stored form (the row's Text, posted as the
// body) reads back as written, for any strings: decode(encode(v)) == v,
// and encoding the decoded event gives the same bytes, so every resend
// is the body first stored. JSON keeps strings as valid UTF-8 (each bad
// byte U+FFFD) and times in UTC: the hooks put them so before encoding.
func FuzzEventForm(f *testing.F) {
	for _, tx := range corpus.Texts() {
		f.Add(config.EventDraftApproved, tx.Body, tx.From, "web:"+tx.Name, 3, int64(1767225600123456789))
	}
	f.Add(config.EventDeadLetterAdded, "\xff\xfe invalid", "\u2028\u2029", "a\x00b", 0, int64(0))
	f.Add(config.EventLeadStatusChanged, "{\n  \"text\": \"fish & chips <b>\"\n}\n", `\u0026 \/`, "line\r\nline", -1, int64(-62135596800))
	f.Fuzz(func(t *testing.T, typ, text, name, lead string, cycle int, nanos int64) {
		at := time.Unix(0, nanos).UTC()
		valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		v := outbound.Event{Type: valid(typ), Timestamp: at, Data: outbound.Data{
			Key: valid(lead) + "#1", Client: valid(name), Lead: valid(lead), Channel: valid(name), ConversationID: valid(text), Status: valid(name), From: valid(typ),
			Cycle: cycle, Owner: valid(name), DraftID: valid(lead), OutboxID: valid(lead), ApprovedBy: valid(name), Text: valid(text), ProviderID: valid(name),
			Error: valid(text), DeadLetterID: valid(lead), DeadLetterKind: valid(typ), What: valid(typ), State: valid(name), Link: valid(text),
		}}
		if v.Type == "" {
			v.Type = config.EventReplySent
		}
		enc := v.Encode()
		got, err := outbound.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(v)): %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("decode(encode(v)) =\n %#v\nwant\n %#v", got, v)
		}
		if again := got.Encode(); again != enc {
			t.Fatalf("re-encoding changed the bytes:\n%s\n%s", enc, again)
		}
	})
}
