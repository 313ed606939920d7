package delivery_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/testkit/standin"
)

// inboundEvent is body read by its preset's channel as the webhook reads
// it (config's mapping, hook's ReadAll), as the event intake records: its
// one message, with where it sits in its channel.
func inboundEvent(t *testing.T, b corpus.Body) store.Event {
	t.Helper()
	cfg, err := config.Parse([]byte("base_url: https://handoff.example.com\nchannels:\n"+corpus.ChannelsYAML()), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config.Parse(ChannelsYAML): %v", err)
	}
	ch, ok := cfg.Channel(corpus.Channel(b.Preset))
	if !ok {
		t.Fatalf("no channel for %s", b.Preset)
	}
	p, err := hook.Parse(b.ContentType, b.Raw, http.Header{})
	if err != nil {
		t.Fatalf("%s: Parse: %v", b.Name(), err)
	}
	r, err := p.ReadAll(ch.Mapping())
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("%s: ReadAll = %d messages, %v; want one", b.Name(), len(r.Messages), err)
	}
	m := r.Messages[0]
	ev := store.Event{Channel: "demo", MessageID: m.MessageID, ConversationID: m.ConversationID, Contact: m.Contact, Name: m.Name, Text: m.Text, Subject: m.Subject}
	if m.ReplyTo != (hook.ReplyTo{}) {
		ev.ReplyTo = &store.ReplyTo{Chat: m.ReplyTo.Chat, MessageID: m.ReplyTo.MessageID, Thread: m.ReplyTo.Thread}
	}
	return ev
}

// shape is the corpus shape named layout ("<shape>/<layout>").
func shape(t *testing.T, layout string) corpus.Body {
	t.Helper()
	for _, s := range corpus.Shapes() {
		if s.Layout == layout {
			return s.Body
		}
	}
	t.Fatalf("no shape %s", layout)
	return corpus.Body{}
}

// verbatimBody is preset's verbatim example (the provider's own).
func verbatimBody(t *testing.T, preset string) corpus.Body {
	t.Helper()
	for _, b := range corpus.Bodies(preset) {
		if b.Layout == "verbatim" {
			return b
		}
	}
	t.Fatalf("no verbatim %s body", preset)
	return corpus.Body{}
}

// TestReplyWhereTheMessageWasWritten: a message read from the provider's
// own shape, recorded, drafted and approved, is answered where it was
// written — a Telegram group in the group as a reply to it, a Slack
// channel message in its thread — and a private Telegram chat as before;
// the request body the stand-in got says so, and the lead stays the one
// the event names.
func TestReplyWhereTheMessageWasWritten(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		body       func(t *testing.T) corpus.Body
		to, reply  string // the chat and what the reply answers, as sent
		noReplyKey bool   // the body has no reply_parameters / thread_ts at all
	}{
		{"telegram group/compact", "telegram", func(t *testing.T) corpus.Body { return shape(t, "group/compact") }, "-1001987654321", "", false},
		{"telegram group/pretty2", "telegram", func(t *testing.T) corpus.Body { return shape(t, "group/pretty2") }, "-1001987654321", "", false},
		{"telegram private", "telegram", func(t *testing.T) corpus.Body { return verbatimBody(t, "telegram") }, "1111111", "", true},
		{"slack thread/compact", "slack", func(t *testing.T) corpus.Body { return shape(t, "channel-thread/compact") }, "C0123ABCDEF", "1767225500.000100", false},
		{"slack thread/pretty4", "slack", func(t *testing.T) corpus.Body { return shape(t, "channel-thread/pretty4") }, "C0123ABCDEF", "1767225500.000100", false},
		{"slack top/compact", "slack", func(t *testing.T) corpus.Body { return shape(t, "channel-top/compact") }, "C0123ABCDEF", "1767225601.000300", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			b := tc.body(t)
			ev := inboundEvent(t, b)
			if tc.kind == "telegram" && !tc.noReplyKey {
				tc.reply = ev.ReplyTo.MessageID // the group message's message_id
				if tc.reply == "" || ev.Contact == tc.to {
					t.Fatalf("the group message was read as %+v: want a sender apart from the chat and a message id", ev)
				}
			}
			s := standin.New(t, tc.kind)
			rowID := startEmailDelivery(t, st, standinProvider(s, 10*time.Second), 3, ev)
			var row store.Outbox
			testkit.Eventually(t, 10*time.Second, func() bool {
				var err error
				row, err = st.OutboxRow(rowID)
				return err == nil && row.Status == store.OutboxSent
			}, "the reply to be sent")
			if row.ConversationID != ev.ConversationID {
				t.Errorf("the reply's lead is %q, want the event's %q", row.ConversationID, ev.ConversationID)
			}
			sends := s.Sends()
			if len(sends) != 1 {
				t.Fatalf("the stand-in got %d sends, want 1 (malformed: %v)", len(sends), s.Malformed())
			}
			got := sends[0]
			if got.To != tc.to || got.Reply != tc.reply {
				t.Errorf("sent to %q answering %q, want to %q answering %q\nbody %s", got.To, got.Reply, tc.to, tc.reply, got.Body)
			}
			if got.Text == "" {
				t.Errorf("sent no text: %s", got.Body)
			}
			switch tc.kind {
			case "telegram":
				var body map[string]json.RawMessage
				if err := json.Unmarshal(got.Body, &body); err != nil {
					t.Fatalf("body %s: %v", got.Body, err)
				}
				_, has := body["reply_parameters"]
				if has == tc.noReplyKey {
					t.Errorf("reply_parameters present %v, want %v: %s", has, !tc.noReplyKey, got.Body)
				}
				if _, err := strconv.ParseInt(string(body["chat_id"]), 10, 64); err != nil {
					t.Errorf("chat_id %s is not the number it is", body["chat_id"])
				}
			case "slack":
				f, err := url.ParseQuery(string(got.Body))
				if err != nil || f.Get("thread_ts") != tc.reply || f.Get("channel") != tc.to {
					t.Errorf("form %s, want channel %s thread_ts %s", got.Body, tc.to, tc.reply)
				}
			}
		})
	}
}

// TestPostmarkReplyIsThreaded: a Postmark email, whose MessageID field
// is Postmark's own id, is answered with In-Reply-To and References
// naming the Message-ID its Headers[] carry; the real mail server holds
// that reply.
func TestPostmarkReplyIsThreaded(t *testing.T) {
	mp := testkit.StartMailpit(t)
	host, port, _ := net.SplitHostPort(mp.SMTP)
	for i, layout := range []string{"first-email/compact", "first-email/pretty4"} {
		t.Run(layout, func(t *testing.T) {
			st := openStore(t)
			ev := inboundEvent(t, shape(t, layout))
			if strings.HasPrefix(ev.MessageID, "<") || ev.ReplyTo == nil {
				t.Fatalf("the email was read as %+v: want Postmark's id and the header's Message-ID apart", ev)
			}
			to := "postmark" + strconv.Itoa(i) + "@lead.example"
			ev.Contact, ev.ConversationID = to, to // one lead per case in the one mail server
			p := config.Provider{Name: "out", Kind: "smtp", Timeout: 5 * time.Second}
			p.Host, p.TLS, p.From = host, "none", "Agency <hello@agency.example>"
			p.Port, _ = strconv.Atoi(port)
			rowID := startEmailDelivery(t, st, p, 3, ev)
			testkit.Eventually(t, 10*time.Second, func() bool {
				row, err := st.OutboxRow(rowID)
				return err == nil && row.Status == store.OutboxSent
			}, "the reply to be sent")
			got := mp.Search(t, "to:"+to)
			if len(got) != 1 {
				t.Fatalf("mailpit holds %d messages to %s, want 1", len(got), to)
			}
			want := ev.ReplyTo.MessageID
			h := mp.Headers(t, got[0].ID)
			if g := first(h["In-Reply-To"]); g != want {
				t.Errorf("In-Reply-To %q, want %q", g, want)
			}
			if g := first(h["References"]); g != want {
				t.Errorf("References %q, want %q", g, want)
			}
			if got[0].Subject != "Re: Angebot für Freitag" {
				t.Errorf("Subject %q, want the email's answered", got[0].Subject)
			}
		})
	}
}
