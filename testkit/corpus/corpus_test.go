package corpus_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestCoversEveryPreset: the corpus has bodies for every preset hook knows
// and for the demo channel, each in every layout with every text.
func TestCoversEveryPreset(t *testing.T) {
	want := append(hook.PresetNames(), corpus.Demo)
	slices.Sort(want)
	if got := corpus.Presets(); !slices.Equal(got, want) {
		t.Fatalf("corpus presets %v, want hook's %v and demo", got, want)
	}
	for _, p := range corpus.Presets() {
		n := 0
		for _, b := range corpus.Bodies(p) {
			if b.Layout != "verbatim" {
				n++
			}
		}
		if want := len(corpus.Layouts(p)) * len(corpus.Texts()); n != want || len(corpus.Layouts(p)) < 2 {
			t.Errorf("%s: %d generated bodies in %d layouts, want %d (at least two layouts)", p, n, len(corpus.Layouts(p)), want)
		}
	}
	for _, tx := range corpus.Texts() {
		if tx.Name != "short" && len(tx.Body) <= 64 {
			t.Errorf("text %s is %d bytes; every text but short is over 64, where the store keeps a reference", tx.Name, len(tx.Body))
		}
		if tx.Name == "long" && utf8.RuneCountInString(tx.Body) != corpus.LongRunes {
			t.Errorf("the long text is %d characters, want %d", utf8.RuneCountInString(tx.Body), corpus.LongRunes)
		}
	}
}

// TestDeterministic: two calls make the same bytes, and no two bodies of a
// preset share a message id.
func TestDeterministic(t *testing.T) {
	for _, p := range corpus.Presets() {
		a, b := corpus.Bodies(p), corpus.Bodies(p)
		ids := map[string]string{}
		for i := range a {
			if !bytes.Equal(a[i].Raw, b[i].Raw) {
				t.Fatalf("%s: two calls made different bytes", a[i].Name())
			}
			if prev, dup := ids[a[i].Want.MessageID]; dup {
				t.Errorf("%s and %s share message id %s", prev, a[i].Name(), a[i].Want.MessageID)
			}
			ids[a[i].Want.MessageID] = a[i].Name()
		}
	}
}

// TestLayoutsAreOneDocument: every JSON layout of a template decodes to a
// document of the same shape (keys, nesting, types; the ids differ) that
// holds the text exactly, and the layouts differ in bytes.
func TestLayoutsAreOneDocument(t *testing.T) {
	for _, p := range corpus.Presets() {
		docs := map[string]any{}
		raws := map[string]map[string]bool{}
		for _, b := range corpus.Bodies(p) {
			if !b.IsJSON() || b.Layout == "verbatim" {
				continue
			}
			var v any
			d := json.NewDecoder(bytes.NewReader(b.Raw))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				t.Fatalf("%s: %v\n%s", b.Name(), err, b.Raw)
			}
			if !holds(v, b.Want.Text) {
				t.Errorf("%s: no string of the document is the text %q", b.Name(), b.Want.Text)
			}
			if first, ok := docs[b.Text]; !ok {
				docs[b.Text] = shape(v)
			} else if !reflect.DeepEqual(first, shape(v)) {
				t.Errorf("%s decodes to another document than the first layout", b.Name())
			}
			if raws[b.Text] == nil {
				raws[b.Text] = map[string]bool{}
			}
			raws[b.Text][string(b.Raw)] = true
		}
		for text, set := range raws {
			if len(set) != len(corpus.Layouts(p)) {
				t.Errorf("%s/%s: %d distinct bodies for %d layouts", p, text, len(set), len(corpus.Layouts(p)))
			}
		}
	}
}

// TestSpecificLayouts pins a few bytes each layout promises.
func TestSpecificLayouts(t *testing.T) {
	pick := func(layout, text string) string {
		for _, b := range corpus.Bodies(corpus.Demo) {
			if b.Layout == layout && b.Text == text {
				return string(b.Raw)
			}
		}
		t.Fatalf("no demo body %s/%s", layout, text)
		return ""
	}
	for _, c := range []struct{ layout, text, want string }{
		{"compact", "fish", `"text":"Do you still have fish & chips? 2 < 3 > 1, a \"quoted\" word, a back\\slash`},
		{"pretty2", "short", "{\n  \"id\": \"corpus-pretty2-short\",\n"},
		{"pretty4", "short", "{\n    \"id\": "},
		{"python", "emoji", `"text": "Thanks \ud83d\udc4d\ud83c\udffd!`},
		{"python", "short", `{"id": "corpus-python-short", "conversation_id": `},
		{"crlf", "short", "{\r\n  \"id\": "},
		{"goescaped", "fish", `fish \u0026 chips? 2 \u003c 3 \u003e 1`},
		{"php", "slashes", `https:\/\/shop.example\/menu\/fish&chips`},
		{"php", "arabic", `"\u0645\u0631\u062d`},
	} {
		if got := pick(c.layout, c.text); !strings.Contains(got, c.want) {
			t.Errorf("%s/%s does not contain %q:\n%s", c.layout, c.text, c.want, got)
		}
	}
	if got := pick("newline", "short"); !strings.HasSuffix(got, "}\n") || strings.Contains(got, `": `) || strings.Contains(got, `", `) {
		t.Errorf("newline layout: %q", got)
	}
}

// TestPresetsReadTheWants: each body, signed, passes its channel's
// verifier, and the preset's sources read the body's Want from it (the
// whole server checks the same in web/hooks_corpus_test.go).
func TestPresetsReadTheWants(t *testing.T) {
	cfg, err := config.Parse([]byte("base_url: https://handoff.example.com\nchannels:\n"+corpus.ChannelsYAML()+
		"  - {name: demo, fields: {message_id: /id, conversation_id: /conversation_id}}\n"), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config.Parse(ChannelsYAML): %v", err)
	}
	for _, b := range corpus.All() {
		ch, ok := cfg.Channel(corpus.Channel(b.Preset))
		if !ok {
			t.Fatalf("no channel %s", corpus.Channel(b.Preset))
		}
		u := "https://handoff.example.com/hooks/" + ch.Name
		h, raw := b.Signed(u, corpus.Epoch)
		if ch.Signature != nil {
			v, err := hook.NewVerifier(ch.Signature.Verifying())
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(&hook.Request{URL: u, Header: h, Body: raw, Now: corpus.Epoch}); err != nil {
				t.Errorf("%s: signed body refused: %v", b.Name(), err)
			}
		} else if b.Preset != corpus.Demo {
			t.Errorf("%s: channel %s is unsigned", b.Name(), ch.Name)
		}
		p, err := hook.Parse(h.Get("Content-Type"), raw, http.Header(h))
		if err != nil {
			t.Errorf("%s: Parse: %v", b.Name(), err)
			continue
		}
		items, err := p.Items(ch.Messages.Items)
		if err != nil || len(items) != 1 {
			t.Errorf("%s: %d items, %v; want one", b.Name(), len(items), err)
			continue
		}
		at := items[0]
		id, err := hook.MessageIDAt(p, ch.Fields.MessageID, at)
		read := func(src string) string {
			if src == "" {
				return ""
			}
			v, _, err := p.FieldAt(src, at)
			if err != nil {
				t.Errorf("%s: %s: %v", b.Name(), src, err)
			}
			return v
		}
		got := corpus.Want{MessageID: id, Conversation: b.Want.Conversation, Contact: read(ch.Fields.Contact), Name: read(ch.Fields.Name),
			Text: read(ch.Fields.Text), Subject: read(ch.Fields.Subject)}
		rt := ch.Messages.ReplyTo
		got.ReplyTo = corpus.ReplyTo{Chat: read(rt.Chat), MessageID: read(rt.MessageID), Thread: read(rt.Thread)}
		if err != nil || got != b.Want {
			t.Errorf("%s: read %+v, %v\nwant %+v", b.Name(), got, err, b.Want)
		}
	}
}

// shape is v with every scalar replaced by its type's name.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = shape(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = shape(x)
		}
		return out
	default:
		return reflect.TypeOf(v)
	}
}

// holds says some string in v is s.
func holds(v any, s string) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			if holds(x, s) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if holds(x, s) {
				return true
			}
		}
	case string:
		return v == s
	}
	return false
}

// TestMessage: Message puts the given ids in, and 72 consecutive n cover
// every layout and text of the demo channel.
func TestMessage(t *testing.T) {
	seen := map[string]bool{}
	for n := range 72 {
		b := corpus.Message(n, fmt.Sprintf("m-%d", n), "conv-x", "+15550001234")
		seen[b.Layout+"/"+b.Text] = true
		var doc map[string]any
		if err := json.Unmarshal(b.Raw, &doc); err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		if doc["id"] != b.Want.MessageID || b.Want.MessageID != fmt.Sprintf("m-%d", n) || doc["conversation_id"] != "conv-x" ||
			doc["from"] != "+15550001234" || doc["text"] != b.Want.Text || b.Want.Contact != "+15550001234" || b.Want.Conversation != "conv-x" {
			t.Errorf("%s: %s, want %+v", b.Name(), b.Raw, b.Want)
		}
	}
	if len(seen) != len(corpus.Layouts(corpus.Demo))*len(corpus.Texts()) {
		t.Errorf("72 messages cover %d layout × text pairs, want all %d", len(seen), len(corpus.Layouts(corpus.Demo))*len(corpus.Texts()))
	}
	// "" keeps the corpus's own ids, and Want says them.
	for n := range 9 {
		b := corpus.Message(n, "", "", "")
		var doc map[string]any
		if err := json.Unmarshal(b.Raw, &doc); err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		if doc["id"] == "" || doc["id"] != b.Want.MessageID || doc["from"] != b.Want.Contact || doc["conversation_id"] != b.Want.Conversation {
			t.Errorf("%s with the corpus's own ids: %s, want %+v", b.Name(), b.Raw, b.Want)
		}
	}
}
