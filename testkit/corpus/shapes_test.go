package corpus_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestShapesReadTheWants: each shape, signed, passes its channel's
// verifier, and the channel's mapping (its preset's, through config) reads
// every message of it as Wants says, in order, or refuses it with a 400
// when it must — never a 2xx for a message that is not recorded.
func TestShapesReadTheWants(t *testing.T) {
	cfg, err := config.Parse([]byte("base_url: https://handoff.example.com\nchannels:\n"+corpus.ChannelsYAML()), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config.Parse(ChannelsYAML): %v", err)
	}
	seen := map[string]int{}
	for _, s := range corpus.Shapes() {
		seen[s.Preset]++
		ch, ok := cfg.Channel(corpus.Channel(s.Preset))
		if !ok {
			t.Fatalf("no channel %s", corpus.Channel(s.Preset))
		}
		u := "https://handoff.example.com/hooks/" + ch.Name
		h, raw := s.Signed(u, corpus.Epoch)
		v, err := hook.NewVerifier(ch.Signature.Verifying())
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(&hook.Request{URL: u, Header: h, Body: raw, Now: corpus.Epoch}); err != nil {
			t.Errorf("%s: signed body refused: %v", s.Name(), err)
		}
		p, err := hook.Parse(h.Get("Content-Type"), raw, http.Header(h))
		if err != nil {
			t.Errorf("%s: Parse: %v", s.Name(), err)
			continue
		}
		r, err := p.ReadAll(ch.Mapping())
		if s.Refused != "" {
			var he *hook.Error
			if !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(he.Msg, s.Refused) {
				t.Errorf("%s: ReadAll = %+v, %v; want a 400 naming the %s", s.Name(), r, err, s.Refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: ReadAll: %v", s.Name(), err)
			continue
		}
		var got []corpus.Want
		for _, m := range r.Messages {
			got = append(got, corpus.Want{MessageID: m.MessageID, Conversation: m.ConversationID, Contact: m.Contact, Name: m.Name, Text: m.Text, Subject: m.Subject,
				ReplyTo: corpus.ReplyTo{Chat: m.ReplyTo.Chat, MessageID: m.ReplyTo.MessageID, Thread: m.ReplyTo.Thread}})
		}
		if !slices.Equal(got, s.Wants) || r.Notifications != 0 {
			t.Errorf("%s: read %d notifications and\n%+v\nwant\n%+v", s.Name(), r.Notifications, got, s.Wants)
		}
		for _, m := range r.Messages {
			if m.Text == "" {
				t.Errorf("%s: message %s read with no text", s.Name(), m.MessageID)
			}
		}
	}
	for _, p := range []string{"whatsapp", "postmark", "mailgun", "sendgrid", "telegram", "slack"} {
		if seen[p] == 0 {
			t.Errorf("no shape of %s", p)
		}
	}
}
