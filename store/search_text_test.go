package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit/corpus"
)

// TestTextPrefilterKeepsEveryMatch: the text search skips decoding a
// message whose stored bytes cannot hold the needle (textMayHold). For
// every JSON body of the corpus, stored as the store stores it (its text
// kept in the record or as a place in the body), every needle the text
// holds once lower-cased — each word, and every substring of up to eight
// bytes — is one the prefilter lets through; a needle it does not hold is
// refused, so the prefilter does skip messages.
func TestTextPrefilterKeepsEveryMatch(t *testing.T) {
	checked := 0
	for _, b := range corpus.All() {
		if !b.IsJSON() || b.Want.Text == "" {
			continue
		}
		ev := Event{ID: "01KB0000000000000000000000", Key: "web:" + b.Want.MessageID, Channel: "web", Text: b.Want.Text,
			Body: b.Raw, ContentType: b.ContentType, ReceivedAt: time.Unix(0, 0)}
		ev.canonical()
		raw, err := ev.encodeRecord()
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		lower := strings.ToLower(ev.Text)
		needles := strings.Fields(lower)
		for i := 0; i < len(lower) && i < 300; i++ {
			for n := 1; n <= 8 && i+n <= len(lower); n++ {
				needles = append(needles, lower[i:i+n])
			}
		}
		for _, n := range needles {
			if !quickNeedle(n) || !containsFold(ev.Text, n) {
				continue
			}
			checked++
			if !textMayHold(raw, n) {
				t.Errorf("%s: the text holds %q but the prefilter skips the message", b.Name(), n)
			}
		}
		if textMayHold(raw, "zzyzx-not-in-any-text") && !strings.Contains(string(raw), `\u`) {
			t.Errorf("%s: the prefilter lets through a needle the message does not hold", b.Name())
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d needles checked: the corpus no longer feeds this test", checked)
	}
	// The two runes whose lower case is ASCII: the stored bytes hold no
	// ASCII "k" or "i" where the text's lower case does.
	for text, w := range map[string]string{"\u212aelvin": "kelvin", "\u0130stanbul": "istanbul"} {
		ev := Event{ID: "01KB0000000000000000000001", Key: "web:k", Channel: "web", Text: text, ReceivedAt: time.Unix(0, 0)}
		raw, err := ev.encodeRecord()
		if err != nil {
			t.Fatal(err)
		}
		if !containsFold(text, w) {
			t.Fatalf("%q does not hold %q once lower-cased: the case is moot", text, w)
		}
		if !textMayHold(raw, w) {
			t.Errorf("%q: the prefilter skips a message whose text holds %q", text, w)
		}
	}
}

// TestRawChannel: the text search reads a message's channel from its
// stored bytes; it is the event's channel, or not read at all, for every
// corpus body and for ids made to look like the field.
func TestRawChannel(t *testing.T) {
	read := 0
	for i, b := range corpus.All() {
		if !b.IsJSON() {
			continue
		}
		ch := []string{"web", "mail-2", "slack"}[i%3]
		id := b.Want.MessageID
		if i%5 == 0 {
			id = `x","channel":"evil` // a message id that writes the pattern (escaped in the record)
		}
		ev := Event{ID: "01KB0000000000000000000000", Key: ch + ":" + id, Channel: ch, MessageID: id, Text: b.Want.Text,
			Body: b.Raw, ContentType: b.ContentType, ReceivedAt: time.Unix(0, 0)}
		ev.canonical()
		raw, err := ev.encodeRecord()
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		got, ok := rawChannel(raw)
		if ok {
			read++
			if got != ch {
				t.Errorf("%s: rawChannel = %q, want %q", b.Name(), got, ch)
			}
		}
	}
	if read == 0 {
		t.Fatal("rawChannel read no channel: the text search decodes every message again")
	}
}

// TestFindEventPastSharedTerm: a conversation id that is also the name of
// more leads than FindEvent decodes is still found (its entry's lead key
// says so undecoded), and a contact is found among a few such leads; a
// person who does not see the lead's channel finds nothing.
func TestFindEventPastSharedTerm(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	err := st.Update(ctx, func(tx *Tx) error {
		for i := range findContactReads + 10 {
			ev := newEvent(fmt.Sprintf("web:s%d", i), t0)
			ev.Name, ev.ConversationID = "zeta", fmt.Sprintf("a%03d", i) // sorts before the one wanted
			e, err := EncodeEvent(ev, draftJobFor(ev.Key, 3))
			if err != nil {
				return err
			}
			if _, err := tx.Record(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvent("web:wanted", t0)
	ev.ConversationID, ev.Contact = "zeta", "+1 555 0100"
	if _, err := st.RecordEvent(ctx, ev, draftJobFor(ev.Key, 3)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"zeta", "+1 555 0100"} {
		if got, err := st.FindEvent(Everything(), q); err != nil || got != ev.Key {
			t.Errorf("FindEvent(%q) = %q, %v; want %s", q, got, err, ev.Key)
		}
		if got, err := st.FindEvent(OnlyChannels("mail"), q); err != nil || got != "" {
			t.Errorf("FindEvent(%q) of another channel = %q, %v; want nothing", q, got, err)
		}
	}
}
