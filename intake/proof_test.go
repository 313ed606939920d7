package intake_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/jsonbody"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestRecordWithProof: every JSON body of the shared corpus, recorded with
// the parser's proof of it (hook.Payload.Valid, as web passes it) and
// without, reads back byte for byte the same, with the same text.
func TestRecordWithProof(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	n := 0
	for i, b := range corpus.All() {
		if !b.IsJSON() {
			continue
		}
		n++
		p, err := hook.Parse(b.ContentType, b.Raw, nil)
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		var texts []string
		for _, valid := range []jsonbody.Valid{p.Valid(), {}} {
			m := intake.Message{
				Channel: "web", MessageID: fmt.Sprintf("m-%d-%v", i, valid.Bytes() != nil), ConversationID: fmt.Sprintf("c-%d", i),
				Text: b.Want.Text, ContentType: b.ContentType, Body: b.Raw, JSON: true, Valid: valid, ReceivedAt: t0,
			}
			if _, err := intake.Record(ctx, st, m, 3); err != nil {
				t.Fatalf("%s: %v", b.Name(), err)
			}
			ev, err := st.EventByKey(m.Key())
			if err != nil {
				t.Fatalf("%s: %v", b.Name(), err)
			}
			if !bytes.Equal(ev.Body, b.Raw) || ev.BodyText != "" {
				t.Errorf("%s (proof %v): read back %.80q, want the body as sent", b.Name(), valid.Bytes() != nil, ev.Body)
			}
			texts = append(texts, ev.Text)
		}
		if texts[0] != texts[1] {
			t.Errorf("%s: text with the proof %q, without %q", b.Name(), texts[0], texts[1])
		}
	}
	if n == 0 {
		t.Fatal("no JSON body in the corpus")
	}
}

// TestRecordProofOfOtherBytes: a proof made from other bytes, even equal
// ones, proves nothing about the body: a body that is not JSON is refused
// and nothing is stored.
func TestRecordProofOfOtherBytes(t *testing.T) {
	st := openStore(t)
	_, valid, err := jsonbody.Decode([]byte(`{"id":"m-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range [][]byte{[]byte(`{"id":"m-1"`), bytes.Clone(valid.Bytes())[:5], append(bytes.Clone(valid.Bytes()), '}')} {
		m := intake.Message{Channel: "web", MessageID: fmt.Sprintf("m-%d", i), ConversationID: "c", Text: "hi", Body: body, JSON: true, Valid: valid, ReceivedAt: t0}
		if _, err := intake.Record(context.Background(), st, m, 3); err == nil {
			t.Errorf("%q recorded as JSON on a proof of %q", body, valid.Bytes())
		}
		if _, err := st.EventByKey(m.Key()); err == nil {
			t.Errorf("%q is stored", body)
		}
	}
}
