// Package corpus is the inbound bodies every test sends: for each preset
// of hook/preset.go and the demo channel, its provider's documented
// payload (field names, nesting, form, JSON or multipart) written in every
// layout that provider's senders use, each carrying every text of Texts,
// with what the preset must read from it. The bodies are generated from
// templates, deterministically; a few of the providers' own examples are
// kept verbatim in testdata/.
//
// The rule: a test that sends a message takes it from here. One-line ASCII
// JSON, which every test used to send, is the one shape no provider sends,
// and a store that broke on anything else went unnoticed.
package corpus

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Epoch is the time the bodies carry (timestamps in the payloads, and the
// signature time of Raw); sign with the real time through Body.Signed.
var Epoch = time.Unix(1767225600, 0).UTC() // 2026-01-01

// Demo is the preset name the corpus gives the zero-config demo channel
// (config.Default's "demo": /id, /conversation_id, /from, /name, /text,
// unsigned).
const Demo = "demo"

// Body is one request body as a provider sends it.
type Body struct {
	Preset      string // a hook preset, or Demo
	Layout      string // how it is written: see Layouts
	Text        string // which of Texts it carries
	ContentType string
	Raw         []byte // as sent; a mailgun body is signed with Secret at Epoch
	// Fields are a form or multipart body's fields as sent (nil for JSON).
	Fields url.Values
	Want   Want // what the preset reads from it

	render func(ts int64) []byte // mailgun: the body signed at ts
}

// Want is what a channel of the body's preset must store for it. The event
// key is the channel's name, ":" and MessageID.
type Want struct {
	MessageID    string
	Conversation string
	Contact      string
	Name         string
	Text         string
	Subject      string
	ReplyTo      ReplyTo
}

// ReplyTo is where a message sits in its channel, as the preset reads it
// (hook.ReplyTo): the reply goes there.
type ReplyTo struct {
	Chat, MessageID, Thread string
}

// Name names the body in test output: preset/layout/text.
func (b Body) Name() string { return b.Preset + "/" + b.Layout + "/" + b.Text }

// IsJSON says the body is JSON (kept as JSON by the store).
func (b Body) IsJSON() bool { return strings.HasPrefix(b.ContentType, "application/json") }

// IsMultipart says the body is multipart/form-data.
func (b Body) IsMultipart() bool { return strings.HasPrefix(b.ContentType, "multipart/form-data") }

// Text is one message text.
type Text struct {
	Name string // short, for test names
	Body string // the message
	From string // the sender's display name that goes with it
}

// Texts are the message texts every preset's bodies carry: each is what
// broke, or could break, a stored form or a page. All but "short" are
// longer than 64 bytes, where the store starts keeping the text by
// reference into the body.
func Texts() []Text {
	return []Text{
		{"fish", `Do you still have fish & chips? 2 < 3 > 1, a "quoted" word, a back\slash and <b>bold</b> &amp; more`, `Fish & "Chips" <Ltd>`},
		{"emoji", "Thanks 👍🏽! Family 👨‍👩‍👧‍👦, flags 🇵🇹 🇯🇵, rainbow 🏳️‍🌈 and a 🐟 & 🍟 combo", "Zoë 🌸"},
		{"arabic", "مرحباً، هل السمك والبطاطا متوفرة اليوم؟ أريد طلبين من فضلك (2)", "سارة الأحمد"},
		{"hebrew", "שלום! האם יש לכם היום דגים וצ'יפס? אני רוצה שתי מנות, בבקשה.", "דנה כהן"},
		{"combining", "Cafe\u0301 cre\u0300me bru\u0302le\u0301e, pin\u0303a colada and the re\u0301sume\u0301 of Zoe\u0308", "Rene\u0301e"},
		{"long", longText(), "Ada Lovelace"},
		{"newlines", "Hello,\nI have two questions:\n\t1. opening hours?\r\n\t2. parking?\n\nThanks,\nAda", "Ada"},
		{"slashes", `Menu at https://shop.example/menu/fish&chips?size=large&sauce=tartare, then </script> and C:\temp\new`, "Ada / Bob"},
		{"short", "hi", "Al"},
	}
}

// LongRunes is the length of the "long" text in characters.
const LongRunes = 2000

// longText is 2,000 characters (runes) of a sentence with &, <, > and an
// accented letter in it.
func longText() string {
	const s = "Fish & chips for <2> please, s'il vous plaît; "
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < LongRunes {
		b.WriteString(s)
	}
	r := []rune(b.String())[:LongRunes]
	r[len(r)-1] = '.'
	return string(r)
}

// jsonLayouts are the ways senders write one JSON document.
var jsonLayouts = []struct {
	name string
	s    style
}{
	{"compact", style{comma: ",", colon: ":"}},                                // JSON.stringify(x): Meta, Slack, Telegram
	{"pretty2", style{indent: "  ", newline: "\n"}},                           // JSON.stringify(x, null, 2)
	{"pretty4", style{indent: "    ", newline: "\n"}},                         // json.dumps(x, indent=4, ensure_ascii=False)
	{"python", style{comma: ", ", colon: ": ", esc: escASCII}},                // json.dumps(x): ", " and ": ", \uXXXX
	{"crlf", style{indent: "  ", newline: "\r\n", trailer: "\r\n"}},           // pretty, CRLF line ends
	{"newline", style{comma: ",", colon: ":", trailer: "\n"}},                 // one line and a trailing newline
	{"goescaped", style{comma: ",", colon: ":", esc: escHTML}},                // Go's json.Marshal: \u0026, \u003c, \u003e
	{"php", style{indent: "    ", newline: "\n", trailer: "\n", esc: escPHP}}, // json_encode(x, JSON_PRETTY_PRINT): \/ and \uXXXX
}

// Layouts lists the layouts preset's bodies come in.
func Layouts(preset string) []string {
	g, ok := generators[preset]
	if !ok {
		return nil
	}
	if g.json != nil {
		var out []string
		for _, l := range jsonLayouts {
			out = append(out, l.name)
		}
		return out
	}
	var out []string
	for _, l := range g.forms {
		out = append(out, l.name)
	}
	return out
}

// Presets lists every preset the corpus covers, sorted, Demo among them.
func Presets() []string {
	out := make([]string, 0, len(generators))
	for p := range generators {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Bodies returns every body of preset: each layout with each text, then
// the provider's verbatim examples (layout "verbatim"). It panics on a
// preset it does not know (a test's mistake).
func Bodies(preset string) []Body {
	g, ok := generators[preset]
	if !ok {
		panic(fmt.Sprintf("corpus: no bodies for preset %q", preset))
	}
	var out []Body
	for ti, tx := range Texts() {
		n := ti + 1
		if g.json != nil {
			for li, l := range jsonLayouts {
				id := ident{preset: preset, layout: l.name, text: tx.Name, n: n*100 + li}
				doc, want := g.json(id, tx)
				out = append(out, Body{
					Preset: preset, Layout: l.name, Text: tx.Name, ContentType: "application/json",
					Raw: l.s.encode(doc), Want: want,
				})
			}
			continue
		}
		for li, l := range g.forms {
			id := ident{preset: preset, layout: l.name, text: tx.Name, n: n*100 + li}
			out = append(out, l.make(id, tx))
		}
	}
	return append(out, verbatim(preset)...)
}

// All returns every body of every preset.
func All() []Body {
	var out []Body
	for _, p := range Presets() {
		out = append(out, Bodies(p)...)
	}
	return out
}

// Sample returns n bodies of preset spread over its layouts and texts (every
// layout and every text appear once n reaches the larger of their counts),
// for the tests that run the real binary and cannot send them all.
func Sample(preset string, n int) []Body {
	all := Bodies(preset)
	var gen []Body
	for _, b := range all {
		if b.Layout != "verbatim" {
			gen = append(gen, b)
		}
	}
	layouts := len(Layouts(preset))
	out := make([]Body, 0, n)
	for i := range n {
		// text i, layout i (mod their counts, which share no factor): every
		// pair once in texts × layouts steps.
		t, l := i%len(Texts()), i%layouts
		out = append(out, gen[t*layouts+l])
	}
	return out
}

// ident is what makes one body's ids unique and stable.
type ident struct {
	preset, layout, text string
	n                    int // text*100 + layout, from 100
}

// tag is the body's ids' distinguishing part: "pretty2-emoji".
func (id ident) tag() string { return id.layout + "-" + id.text }

// phone is a phone number of the body's own: one lead per body.
func (id ident) phone(prefix string) string { return fmt.Sprintf("%s%07d", prefix, 5550000+id.n) }

// Message is a demo-channel body with the given message id, conversation
// and sender ("" keeps the corpus's own), in the layout and with the text
// that n picks: text n mod 9, layout n mod 8, so consecutive n differ in
// both and 72 consecutive n cover every pair. The tests that run the real
// binary send these.
func Message(n int, id, conversation, from string) Body {
	texts := Texts()
	return message(n, texts[n%len(texts)], jsonLayouts[n%len(jsonLayouts)].name, id, conversation, from)
}

// MessageAs is Message with the text and the layout named.
func MessageAs(text, layout string, id, conversation, from string) Body {
	for n := range len(Texts()) * len(jsonLayouts) {
		if Texts()[n%len(Texts())].Name == text && jsonLayouts[n%len(jsonLayouts)].name == layout {
			return message(n, TextNamed(text), layout, id, conversation, from)
		}
	}
	panic("corpus: no demo layout " + layout)
}

func message(n int, tx Text, layout string, id, conversation, from string) Body {
	var st style
	for _, l := range jsonLayouts {
		if l.name == layout {
			st = l.s
		}
	}
	doc, want := generic(ident{preset: Demo, layout: layout, text: tx.Name, n: n}, tx)
	set := func(k, v string) {
		for i := range doc {
			if doc[i].k == k && v != "" {
				doc[i].v = v
			}
		}
	}
	set("id", id)
	set("conversation_id", conversation)
	set("from", from)
	if id != "" {
		want.MessageID = id
	}
	if conversation != "" {
		want.Conversation = conversation
	}
	if from != "" {
		want.Contact = from
	}
	return Body{Preset: Demo, Layout: layout, Text: tx.Name, ContentType: "application/json", Raw: st.encode(doc), Want: want}
}

// TextNamed returns the text called name; it panics on another (a test's
// mistake).
func TextNamed(name string) Text {
	for _, tx := range Texts() {
		if tx.Name == name {
			return tx
		}
	}
	panic("corpus: no text " + name)
}
