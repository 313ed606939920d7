package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/handoff/handoff/testkit/corpus"
)

// TestBodyStoredOnce: an event whose text is a string of its JSON body
// keeps that text once on disk, and reads back exactly as recorded,
// through every way an event is read, and through a duplicate's rewrite.
// Besides the rows below, every text of the corpus in demo bodies of mixed
// layouts: the text is kept once where the body holds it as the store
// writes it (raw UTF-8, no \u or HTML escapes) and is long enough, and
// reads back exactly in every case.
func TestBodyStoredOnce(t *testing.T) {
	st := openTest(t)
	big := strings.Repeat("a kitchen, a hallway, \"quoted\", é ü 日本 \\ and a garden office; ", 16<<10) // about 1 MiB
	tests := []struct {
		name, text string
		body       string
		once       bool
	}{
		// Exact on purpose: a size, a text escaped as a body, a text the body lacks.
		{"1 MiB text in the body", big, `{"id":"m1","text":` + mustJSON(t, big) + `}`, true},
		{"text written with \\u escapes", "hello there, this text is long enough to be worth a reference: ünïcödé!", `{"text":"hello there, this text is long enough to be worth a reference: \u00fcn\u00efc\u00f6d\u00e9!"}`, false},
		{"text from elsewhere", strings.Repeat("not in the body ", 10), `{"id":"m3"}`, false},
	}
	for _, b := range corpus.Sample(corpus.Demo, 2*len(corpus.Texts())) {
		// minTextRef: below it no reference is worth it.
		once := len(b.Want.Text) >= minTextRef && strings.Contains(string(b.Raw), mustJSON(t, b.Want.Text))
		tests = append(tests, struct {
			name, text string
			body       string
			once       bool
		}{b.Name(), b.Want.Text, string(b.Raw), once})
	}
	var onceSeen, notSeen bool
	for _, tt := range tests[3:] {
		onceSeen, notSeen = onceSeen || tt.once, notSeen || !tt.once
	}
	if !onceSeen || !notSeen {
		t.Fatalf("the corpus rows keep the text once: %v, not: %v; want some of each", onceSeen, notSeen)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "web:once-" + string(rune('a'+i))
			ev := newEvent(key, t0)
			ev.Text, ev.Body = tt.text, json.RawMessage(tt.body)
			if _, err := st.RecordEvent(t.Context(), ev, draftJobFor(key, 3)); err != nil {
				t.Fatal(err)
			}
			var raw []byte
			if err := st.View(func(tx *Tx) error {
				id, err := tx.EventByKey(key)
				if err != nil {
					return err
				}
				raw = bytes.Clone(tx.bucket(bucketEvents).Get([]byte(id.ID)))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// Once: the record before the body refers to the text (text_at)
			// and does not hold it.
			var head map[string]json.RawMessage
			if err := json.Unmarshal(raw[:max(bytes.IndexByte(raw, '\n'), 0)], &head); err != nil {
				t.Fatalf("the stored record's head: %v", err)
			}
			_, at := head["text_at"]
			_, text := head["text"]
			if once := at && !text; once != tt.once {
				t.Errorf("stored %d bytes for a %d-byte body and %d-byte text: once = %v (text_at %v, text %v), want %v", len(raw), len(tt.body), len(tt.text), once, at, text, tt.once)
			}
			if tt.once && len(raw) >= len(tt.body)+len(tt.text) && len(tt.text) > 1024 {
				t.Errorf("stored %d bytes for a %d-byte body and %d-byte text: the text is not saved", len(raw), len(tt.body), len(tt.text))
			}
			if tt.once && len(raw) > len(tt.body)+1024 {
				t.Errorf("stored %d bytes for a %d-byte body", len(raw), len(tt.body))
			}
			got, err := st.EventByKey(key)
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != tt.text || got.TextAt != nil || string(got.Body) != tt.body {
				t.Errorf("read back text %d bytes (equal %v), text_at %v", len(got.Text), got.Text == tt.text, got.TextAt)
			}
			// A duplicate rewrites the record through put.
			dup := newEvent(key, t0)
			dup.Text, dup.Body = tt.text, json.RawMessage(tt.body)
			rec, err := st.RecordEvent(t.Context(), dup, draftJobFor(key, 3))
			if err != nil || rec.Created {
				t.Fatalf("duplicate: %+v %v", rec.Created, err)
			}
			again, err := st.EventByKey(key)
			if err != nil || again.Text != tt.text || again.Duplicates != 1 {
				t.Errorf("after the duplicate: text equal %v, duplicates %d, %v", again.Text == tt.text, again.Duplicates, err)
			}
			conv, err := st.Conversation(again.Channel+":"+again.ConversationID, "", 10)
			if err == nil {
				for _, c := range conv {
					if c.Key == key && c.Text != tt.text {
						t.Errorf("the conversation shows another text")
					}
				}
			}
		})
	}
}

// TestTextRefDamage: a reference that points outside the body is damage,
// reported by Check and by the read, never a wrong text. The records are
// exact on purpose: each is one damaged stored form, byte for byte.
func TestTextRefDamage(t *testing.T) {
	for _, raw := range []string{
		`{"id":"x","body":{"text":"hi"},"text_at":[8,40]}`,                      // schema 8
		"{\"id\":\"x\",\"raw\":\"body\",\"text_at\":[8,40]}\n{\"text\":\"hi\"}", // schema 9
		"{\"id\":\"x\",\"raw\":\"body\",\"text_at\":[2,4]}\n{\"text\":\"hi\"}",  // not a string there
		"{\"id\":\"x\",\"raw\":\"lead\"}\n{}",                                   // no such field
		"{\"id\":\"x\"}\n{}",                                                    // bytes for no field
		`{"id":"x","raw":"body"}`,                                               // a body named, none after
	} {
		var ev Event
		if err := decode([]byte(raw), &ev); err == nil {
			t.Errorf("%q decoded: %+v", raw, ev)
		}
	}
}

func mustJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}
