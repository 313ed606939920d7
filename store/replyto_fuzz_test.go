package store

import (
	"bytes"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/testkit/corpus"
)

// FuzzEventReplyTo: an event's reply_to reads back as it was stored, and
// the same record without it — what a binary before reply_to wrote —
// reads back as the same event with ReplyTo nil: old records decode
// unchanged and no migration is needed.
func FuzzEventReplyTo(f *testing.F) {
	f.Add("-1001234567890", "4711", "", []byte(`{"update_id":1,"message":{"text":"Grüße aus der Gruppe 👋"}}`))
	f.Add("C0123456789", "1767225600.000200", "1767225500.000100", []byte(`{"event":{"text":"Moin, läuft der Export?"}}`))
	f.Add("", "<CAE-x@mail.gmail.com>", "", []byte("From=a%40b"))
	f.Add("\xff\xfe", "a\x00b", "\u2028", []byte{})
	// The bodies the presets that read a reply_to receive, in every layout
	// (pretty-printed and compact) and text (& < > " \, emoji, RTL, long).
	for _, preset := range []string{"telegram", "slack"} {
		for _, b := range corpus.Bodies(preset) {
			f.Add("-1001234567890", "4711", "1767225500.000100", b.Raw)
		}
	}
	f.Fuzz(func(t *testing.T, chat, msgID, thread string, body []byte) {
		ev := Event{
			V: recordVersion, ID: "01JDEVENT0000000000000000", Key: "tg:1", Channel: "tg", MessageID: "1",
			CorrelationID: "01JDCORR00000000000000000", ConversationID: "42", Contact: "42", Name: "Zoë",
			Text: "Grüße aus der Gruppe 👋", ReceivedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			ReplyTo: &ReplyTo{Chat: chat, MessageID: msgID, Thread: thread},
		}
		if bytes.HasPrefix(body, []byte("{")) {
			ev.Body = append([]byte(nil), body...)
		} else {
			ev.BodyText = string(body)
		}
		caller := ev.ReplyTo
		ev.canonical()
		if r := ev.ReplyTo; !utf8.ValidString(r.Chat) || !utf8.ValidString(r.MessageID) || !utf8.ValidString(r.Thread) {
			t.Fatalf("canonical left invalid UTF-8 in reply_to: %+v", r)
		}
		if caller.Chat != chat || caller.MessageID != msgID || caller.Thread != thread {
			t.Fatal("canonical changed the caller's reply_to")
		}
		raw, err := ev.encodeRecord()
		if err != nil {
			return // a body that is not JSON: refused, as every event's
		}
		var got Event
		if err := got.decodeRecord(raw, true); err != nil {
			t.Fatalf("decode: %v\nstored %q", err, raw)
		}
		if got.ReplyTo == nil || *got.ReplyTo != *ev.ReplyTo {
			t.Fatalf("reply_to read back as %+v, want %+v\nstored %q", got.ReplyTo, ev.ReplyTo, raw)
		}

		// The same event as written before reply_to existed.
		old := ev
		old.ReplyTo = nil
		oldRaw, err := old.encodeRecord()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(oldRaw[:bytes.IndexByte(oldRaw, '\n')], []byte(`"reply_to"`)) {
			t.Fatalf("an event without reply_to stores one: %q", oldRaw)
		}
		var gotOld Event
		if err := gotOld.decodeRecord(oldRaw, true); err != nil {
			t.Fatalf("decode old form: %v", err)
		}
		got.ReplyTo = nil
		if !reflect.DeepEqual(gotOld, got) {
			t.Fatalf("the old form reads otherwise:\n got %+v\nwant %+v", gotOld, got)
		}
	})
}
