package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/handoff/handoff/jsonbody"
	"github.com/handoff/handoff/testkit/corpus"
)

// encodeRecordB705 and textInB705 are the event's encoding as commit
// b705f7d wrote it (a json.Valid scan of every JSON body, a decode of the
// text's literal to check it): the reference the faster encoding (a
// jsonbody.Valid standing in for the scan, no decode of a literal the
// encoder wrote from valid UTF-8) must match byte for byte.
func (ev *Event) encodeRecordB705() ([]byte, error) {
	e := *ev
	var raw []byte
	e.Raw, e.TextAt = "", nil
	switch {
	case len(ev.Body) > 0:
		if !json.Valid(ev.Body) {
			return nil, fmt.Errorf("event %s: its body is not valid JSON", ev.ID)
		}
		e.Raw, raw, e.Body = rawBody, ev.Body, nil
	case ev.BodyText != "":
		e.Raw, raw, e.BodyText = rawBodyText, []byte(ev.BodyText), ""
	}
	if e.TextAt = textInB705(raw, ev.Text); e.TextAt != nil {
		e.Text = ""
	}
	head, err := json.Marshal(e.head())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+1+len(raw))
	return append(append(append(out, head...), '\n'), raw...), nil
}

func textInB705(body []byte, text string) *[2]int {
	if len(text) < minTextRef || len(body) < len(text) {
		return nil
	}
	want := literal(text)
	off := bytes.Index(body, want)
	if off < 0 {
		return nil
	}
	var got string
	if json.Unmarshal(body[off:off+len(want)], &got) != nil || got != text {
		return nil
	}
	return &[2]int{off, len(want)}
}

// proofCase is one event to encode: its body as received, whether it is
// kept as JSON, and its text.
type proofCase struct {
	name string
	body []byte
	json bool
	text string
}

// proofCases: every body of the shared corpus with the text its preset
// reads, each real body of testdata/bodies, and the edges: lone surrogate
// escapes (kept as sent, the text read with U+FFFD), a text the body holds
// only escaped, invalid UTF-8 in the text, a long text beside a short one.
func proofCases(t testing.TB) []proofCase {
	var out []proofCase
	for _, b := range corpus.All() {
		out = append(out, proofCase{b.Name(), b.Raw, b.IsJSON(), b.Want.Text})
	}
	for _, rb := range realBodies(t) {
		text := "fish & chips"
		if rb.text != "" {
			text, _ = memberText(rb.body, rb.text)
		}
		out = append(out, proofCase{rb.name, rb.body, rb.text != "", text})
	}
	long := string(bytes.Repeat([]byte("fish & chips <b>\"ok\"</b> \\ 🐟 مرحبا "), 8))
	lit := string(literal(long))
	for i, c := range []proofCase{
		{body: []byte(`{"id":"u-\ud800","text":"lone \udfff high and low, then a pair \ud83d\ude00 ` + lit[1:] + `}`), json: true, text: "lone \ufffd high and low, then a pair 😀 " + long},
		{body: []byte("{\n  \"text\": " + lit + "\n}"), json: true, text: long},
		{body: []byte(`{"text":"` + string(bytes.Repeat([]byte(`\u0066`), 80)) + `"}`), json: true, text: string(bytes.Repeat([]byte("f"), 80))},
		{body: []byte(`{"text":` + lit + `}`), json: true, text: long + "\xff"},
		{body: []byte(`{"text":` + lit + `}`), json: true, text: long[:70]},
		{body: []byte("Body=" + long), text: long},
	} {
		c.name = "edge-" + strconv.Itoa(i)
		out = append(out, c)
	}
	return out
}

// TestEncodeSameAsBefore: for every case, the event's stored bytes are
// the ones b705f7d wrote, through EncodeEvent and, for a JSON body with
// the parser's proof, through EncodeEventJSON; and each reads back with
// the body byte for byte and the text exact.
func TestEncodeSameAsBefore(t *testing.T) {
	st := openTest(t)
	for i, c := range proofCases(t) {
		key := "web:proof-" + strconv.Itoa(i)
		ev := newEvent(key, t0)
		ev.Text = c.text
		if c.json {
			ev.Body = json.RawMessage(c.body)
		} else {
			ev.BodyText = string(c.body)
		}
		want := ev
		want.V = recordVersion
		want.canonical()
		wantRaw, err := want.encodeRecordB705()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e, err := EncodeEvent(ev, draftJobFor(key, 3))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(e.evRaw, wantRaw) {
			t.Errorf("%s: EncodeEvent wrote\n%q\nb705f7d wrote\n%q", c.name, e.evRaw, wantRaw)
		}
		if c.json {
			_, proof, err := jsonbody.Decode(c.body)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			noBody := ev
			noBody.Body = nil
			if e, err = EncodeEventJSON(noBody, proof, draftJobFor(key, 3)); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !bytes.Equal(e.evRaw, wantRaw) {
				t.Errorf("%s: EncodeEventJSON wrote\n%q\nb705f7d wrote\n%q", c.name, e.evRaw, wantRaw)
			}
		}
		if _, err := st.Record(t.Context(), e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := st.EventByKey(key)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Text != want.Text || !bytes.Equal(got.Body, want.Body) || got.BodyText != want.BodyText {
			t.Errorf("%s: read back text %q, body %.80q (%.80q); want %q, %.80q (%.80q)", c.name, got.Text, got.Body, got.BodyText, want.Text, want.Body, want.BodyText)
		}
	}
}

// TestInvalidJSONStillRefused: a JSON body that is not JSON is refused by
// every way into the store that has no proof of it, as before; a proof is
// only ever of the bytes it was made from, and never of a body_text.
func TestInvalidJSONStillRefused(t *testing.T) {
	st := openTest(t)
	for i, body := range []string{`{"text":"fish`, `{"a":1}{"b":2}`, `not json`, `{"a":1},`} {
		key := "web:invalid-" + strconv.Itoa(i)
		ev := newEvent(key, t0)
		ev.Body = json.RawMessage(body)
		if _, err := EncodeEvent(ev, draftJobFor(key, 3)); err == nil {
			t.Errorf("EncodeEvent kept %q as JSON", body)
		}
		if _, err := st.RecordEvent(t.Context(), ev, draftJobFor(key, 3)); err == nil {
			t.Errorf("RecordEvent kept %q as JSON", body)
		}
		if _, err := st.EventByKey(key); err == nil {
			t.Errorf("%q is stored", body)
		}
		old := ev
		old.Body = json.RawMessage(`{}`)
		if _, err := old.encodeRecord(); err != nil {
			t.Fatal(err)
		}
		if _, err := ev.encodeRecord(); err == nil {
			t.Errorf("a rewrite of an event (encode) kept %q as JSON", body)
		}
	}
	_, proof, err := jsonbody.Decode([]byte(`{"text":"fish"}`))
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvent("web:both", t0)
	ev.BodyText = "fish"
	if _, err := EncodeEventJSON(ev, proof, draftJobFor(ev.Key, 3)); err == nil {
		t.Error("EncodeEventJSON took a body_text beside a proven body")
	}
	ev.BodyText = ""
	if _, err := EncodeEventJSON(ev, jsonbody.Valid{}, draftJobFor(ev.Key, 3)); err == nil {
		t.Error("EncodeEventJSON took the zero proof")
	}
}

// FuzzTextIn: textIn finds the text's place exactly where b705f7d's,
// which decoded the literal to check it, did, for any body and text.
func FuzzTextIn(f *testing.F) {
	for _, c := range proofCases(f) {
		f.Add(c.body, c.text)
	}
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		got, want := textIn(body, text), textInB705(body, text)
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Fatalf("textIn(%q, %q) = %v, b705f7d's %v", body, text, got, want)
		}
	})
}

// BenchmarkEncodeEvent: the event's encoding on the corpus's longest JSON
// body, as b705f7d did it, through EncodeEvent, and with the parser's proof.
func BenchmarkEncodeEvent(b *testing.B) {
	var c corpus.Body
	for _, x := range corpus.All() {
		if x.IsJSON() && len(x.Raw) > len(c.Raw) {
			c = x
		}
	}
	ev := newEvent("web:bench", t0)
	ev.Text, ev.Body = c.Want.Text, json.RawMessage(c.Raw)
	ev.V = recordVersion
	_, proof, err := jsonbody.Decode(c.Raw)
	if err != nil {
		b.Fatal(err)
	}
	job := draftJobFor(ev.Key, 3)
	b.Run("b705f7d", func(b *testing.B) {
		b.SetBytes(int64(len(c.Raw)))
		for b.Loop() {
			e := ev
			e.canonical()
			if _, err := e.encodeRecordB705(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeEvent", func(b *testing.B) {
		b.SetBytes(int64(len(c.Raw)))
		for b.Loop() {
			if _, err := EncodeEvent(ev, job); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeEventJSON", func(b *testing.B) {
		b.SetBytes(int64(len(c.Raw)))
		for b.Loop() {
			if _, err := EncodeEventJSON(ev, proof, job); err != nil {
				b.Fatal(err)
			}
		}
	})
}
