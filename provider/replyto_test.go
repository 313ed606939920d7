package provider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/testkit/standin"
)

// TestReplyToChatAndThread: the telegram kind answers a message of
// another chat than the sender's (a group) in that chat as a reply to it,
// and one of the sender's own chat as a plain message to them; the slack
// kind posts in the message's channel and thread. Without a reply_to both
// send to To, as before.
func TestReplyToChatAndThread(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		m          provider.Message
		to, reply  string
		body       string // a piece the request body must hold
	}{
		{"telegram group", "telegram", provider.Message{To: "2222001", ReplyTo: provider.ReplyTo{Chat: "-1001987654321", MessageID: "4711"}},
			"-1001987654321", "4711", `"reply_parameters":{"allow_sending_without_reply":true,"message_id":4711}`},
		{"telegram private", "telegram", provider.Message{To: "2222001", ReplyTo: provider.ReplyTo{Chat: "2222001", MessageID: "4711"}},
			"2222001", "", `"chat_id":2222001,"text"`},
		{"telegram no message id", "telegram", provider.Message{To: "2222001", ReplyTo: provider.ReplyTo{Chat: "-100123", MessageID: "x"}},
			"-100123", "", `"chat_id":-100123,"text"`},
		{"telegram no reply_to", "telegram", provider.Message{To: "2222001"}, "2222001", "", `"chat_id":2222001,"text"`},
		{"slack thread", "slack", provider.Message{To: "U000000001", ReplyTo: provider.ReplyTo{Chat: "C0123ABCDEF", Thread: "1767225500.000100"}},
			"C0123ABCDEF", "1767225500.000100", "thread_ts=1767225500.000100"},
		{"slack channel, no thread", "slack", provider.Message{To: "U000000001", ReplyTo: provider.ReplyTo{Chat: "C0123ABCDEF"}},
			"C0123ABCDEF", "", "channel=C0123ABCDEF"},
		{"slack no reply_to", "slack", provider.Message{To: "U000000001"}, "U000000001", "", "channel=U000000001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := standin.New(t, tc.kind)
			tc.m.Ref, tc.m.Text = "r1", "Gern, Samstag um 19 Uhr für 8 — bis dann! 🍻"
			if _, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), tc.m); err != nil {
				t.Fatal(err)
			}
			sends := s.Sends()
			if len(sends) != 1 {
				t.Fatalf("%s got %d sends, want 1 (malformed: %v)", tc.kind, len(sends), s.Malformed())
			}
			got := sends[0]
			if got.To != tc.to || got.Reply != tc.reply || got.Text != tc.m.Text {
				t.Errorf("sent %q to %q answering %q, want to %q answering %q", got.Text, got.To, got.Reply, tc.to, tc.reply)
			}
			if !strings.Contains(string(got.Body), tc.body) {
				t.Errorf("body %s, want it to hold %s", got.Body, tc.body)
			}
			if tc.reply == "" && (strings.Contains(string(got.Body), "reply_parameters") || strings.Contains(string(got.Body), "thread_ts")) {
				t.Errorf("body %s answers a message; want a plain one", got.Body)
			}
		})
	}
}
