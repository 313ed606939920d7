package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every stored form reads back as what was stored: decode(encode(v)) == v
// for every record type the store writes, over arbitrary strings and, for
// the event, arbitrary layouts of real-shaped bodies with the text one of
// their strings (NOTES-hard-parts: a stored form is a promise about bytes
// you did not write). What JSON itself changes is put into the value
// before, as the store documents it: strings as JSON keeps them (each byte
// of invalid UTF-8 is U+FFFD; the event's strings are put so when it is
// recorded, its body kept as bytes), times in UTC, a json.RawMessage field
// in the form CanonicalJSON gives (jobs.go and keys put theirs so), an
// empty slice or map as nil.

// source hands out the fuzzer's bytes and strings as field values.
type source struct {
	data []byte
	strs []string
}

func (s *source) byte() byte {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return b
}

func (s *source) uint64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(s.byte())
	}
	return v
}

// trickyStrings are the strings JSON encoders rewrite, beside the fuzzer's own.
var trickyStrings = []string{
	"", "fish & chips <b>", `\u0026 \/ \" \\`, "\u2028\u2029", "a\x00b", "😀 \U0001F1FA\U0001F1F8", "\xed\xa0\x80 lone surrogate",
	"مرحبا שלום", "Cafe\u0301", "line\r\nline\n", "\xff\xfe invalid", strings.Repeat("ten kb & ", 1138),
	"{\n  \"text\": \"fish & chips <b> \\\"x\\\" 😀\",\n  \"n\": [1, 2]\n}\n", // a pretty-printed body, as a person may paste one
}

func (s *source) string() string {
	b := s.byte()
	var v string
	if n := len(s.strs); n > 0 && b&1 == 0 {
		v = s.strs[int(b>>1)%n]
	} else {
		v = trickyStrings[int(b>>1)%len(trickyStrings)]
	}
	if b&0x80 != 0 && len(v) > 1 { // a piece of it, cut anywhere (through a rune too)
		i := int(s.byte()) % len(v)
		v = v[i:]
	}
	return validUTF8(v)
}

// fill gives every exported field of v (a pointer) a value from src, as
// the store would hold it; skip names fields left as they are.
func fill(v reflect.Value, src *source, skip map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if src.byte()%3 == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), src, nil)
		return
	}
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		// Years 1970 to 2100, to the nanosecond, in UTC.
		v.Set(reflect.ValueOf(time.Unix(int64(src.uint64()%(130*365*86400)), int64(src.uint64()%1e9)).UTC()))
		return
	case reflect.TypeFor[json.RawMessage]():
		if src.byte()%2 == 0 {
			v.SetZero()
			return
		}
		raw, _ := json.Marshal(map[string]any{"s": src.string(), "n": int(src.byte())})
		v.Set(reflect.ValueOf(CanonicalJSON(raw)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(src.string())
	case reflect.Bool:
		v.SetBool(src.byte()%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		u := src.uint64()
		v.SetInt(int64(u) >> (64 - v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(src.uint64() >> (64 - v.Type().Bits()))
	case reflect.Float32, reflect.Float64:
		f := math.Float64frombits(src.uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0
		}
		if v.Kind() == reflect.Float32 {
			f = float64(float32(f))
			if math.IsInf(f, 0) {
				f = 0
			}
		}
		v.SetFloat(f)
	case reflect.Slice:
		n := int(src.byte() % 4)
		if n == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(v.Index(i), src, nil)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), src, nil)
		}
	case reflect.Map:
		n := int(src.byte() % 4)
		if n == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.MakeMap(v.Type()))
		for range n {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, src, nil)
			fill(e, src, nil)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" || skip[f.Name] {
				continue
			}
			fill(v.Field(i), src, nil)
		}
	}
}

// roundTrip asserts that v, encoded the store's way, decodes to want
// (v itself, unless the type documents a change on decode).
func roundTrip[T any](t *testing.T, v, want *T) {
	t.Helper()
	raw, err := encode(v)
	if err != nil {
		t.Fatalf("encode %T: %v", *v, err)
	}
	got := new(T)
	err = decode(raw, got)
	if u, ok := any(v).(unreadableRecord); ok && u.unreadableReason() != "" {
		// A record marked unreadable reads as an error with its reason;
		// the form below it must still hold every field.
		if err == nil || err.Error() != u.unreadableReason() {
			t.Fatalf("decode %T marked unreadable = %v, want its reason %q as the error", *v, err, u.unreadableReason())
		}
		got = new(T)
		err = any(got).(recordDecoder).decodeRecord(raw, false)
	}
	if err != nil {
		t.Fatalf("decode %T: %v\nstored: %q", *v, err, raw)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("%T read back otherwise:\n got %s\nwant %s\nstored %q", *v, g, w, raw)
	}
}

// filled is a T filled from src (skip: fields left zero).
func filled[T any](src *source, skip ...string) *T {
	v := new(T)
	sk := map[string]bool{}
	for _, s := range skip {
		sk[s] = true
	}
	fill(reflect.ValueOf(v).Elem(), src, sk)
	return v
}

// sameForm is roundTrip of a T filled from src, read back as itself.
func sameForm[T any](t *testing.T, src *source) {
	t.Helper()
	v := filled[T](src)
	roundTrip(t, v, v)
}

// recordKinds is every record type the store writes, but the event (its
// own target, FuzzEventForm), each with its property.
var recordKinds = []func(t *testing.T, src *source){
	jobReadsBack, sameForm[Draft], sameForm[Outbox], handoffReadsBack, sameForm[User], sameForm[Session],
	sameForm[AuditEntry], sameForm[IdemKey], sameForm[Receipt], sameForm[BulkRun], sameForm[DigestMark],
	sameForm[BudgetHold], sameForm[SandboxMessage], sameForm[setupLink],
	func(t *testing.T, src *source) {
		// A token without a scope is one from before scopes: decoding gives
		// it its role's scope (tokens.go).
		v := filled[Token](src)
		want := *v
		if want.Scope == "" {
			switch want.Role {
			case RoleAdmin:
				want.Scope = ScopeAdmin
			case RoleApprover:
				want.Scope = ScopeApprove
			}
		}
		roundTrip(t, v, &want)
	},
	// Kinds added later go at the end, so the committed corpus's seeds keep
	// feeding the kind they were written for.
	sameForm[CanaryDecision], sameForm[FactsVersion], sameForm[FactsFile],
	sameForm[Reminder], sameForm[WebPushSubscription], sameForm[VAPIDKeys],
}

// jobReadsBack is the job's property: it reads back as stored, its attempts
// an empty list when it has none (jobform.go); and, about one time in
// two, its due and update times are its creation's, which the stored form
// writes once.
func jobReadsBack(t *testing.T, src *source) {
	t.Helper()
	v := filled[Job](src)
	switch src.byte() % 4 {
	case 0:
		v.RunAt, v.UpdatedAt = v.CreatedAt, v.CreatedAt
	case 1:
		v.RunAt = v.CreatedAt
	}
	want := *v
	if want.Attempts == nil {
		want.Attempts = []Attempt{}
	}
	roundTrip(t, v, &want)
}

// handoffReadsBack is the lead's property: it reads back as stored, and
// about one time in two its key is its channel and conversation id
// joined, and its turn's draft and last message are its turn's last,
// which the stored form leaves out (handoffform.go).
func handoffReadsBack(t *testing.T, src *source) {
	t.Helper()
	v := filled[Handoff](src)
	if src.byte()%2 == 0 {
		v.Channel = strings.ReplaceAll(v.Channel, ":", "")
		v.Key = LeadKey(v.Channel, v.ConversationID)
		if len(v.TurnEvents) > 0 {
			v.TurnDraft, v.LastEventKey = v.TurnEvents[len(v.TurnEvents)-1], v.TurnEvents[len(v.TurnEvents)-1]
		} else {
			v.TurnDraft, v.LastEventKey = "", ""
		}
	}
	roundTrip(t, v, v)
}

// FuzzRecordForms: every record kind but the event reads back as stored.
func FuzzRecordForms(f *testing.F) {
	for kind := range recordKinds {
		f.Add(uint8(kind), []byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"), "fish & chips <b>", `\u0026\/`)
		f.Add(uint8(kind), bytes.Repeat([]byte{0xff, 0x80, 0x01}, 64), "😀 \U0001F1FA\U0001F1F8 مرحبا", strings.Repeat("é", 5000))
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte, s1, s2 string) {
		recordKinds[int(kind)%len(recordKinds)](t, &source{data: data, strs: []string{s1, s2}})
	})
}

// layouts lay out a JSON document the ways senders do, each keeping every
// string value as it is (only the bytes between tokens, or the escaping
// of < > &, change).
var layouts = []func(b []byte) []byte{
	func(b []byte) []byte { return b },
	func(b []byte) []byte { var o bytes.Buffer; _ = json.Compact(&o, b); return o.Bytes() },
	func(b []byte) []byte { var o bytes.Buffer; _ = json.Indent(&o, b, "", "  "); return o.Bytes() },
	func(b []byte) []byte { // JSON.stringify(o, null, 2) on Windows
		var o bytes.Buffer
		_ = json.Indent(&o, b, "", "  ")
		return bytes.ReplaceAll(o.Bytes(), []byte("\n"), []byte("\r\n"))
	},
	func(b []byte) []byte { // Python's json.dumps
		var o bytes.Buffer
		_ = json.Compact(&o, b)
		c := o.Bytes()
		var out []byte
		spaced := func(between []byte) []byte {
			return bytes.ReplaceAll(bytes.ReplaceAll(between, []byte(":"), []byte(": ")), []byte(","), []byte(", "))
		}
		prev := 0
		for _, t := range stringTokens(c) {
			out = append(append(out, spaced(c[prev:t.start])...), c[t.start:t.end]...)
			prev = t.end
		}
		return append(out, spaced(c[prev:])...)
	},
	func(b []byte) []byte { return append(append([]byte(" \r\n\t"), b...), "\r\n\n  "...) },
	func(b []byte) []byte {
		var o bytes.Buffer
		_ = json.Indent(&o, b, "\t", "\t")
		json.HTMLEscape(&o, nil)
		return o.Bytes()
	},
	func(b []byte) []byte { var o bytes.Buffer; json.HTMLEscape(&o, b); return o.Bytes() },
}

// FuzzEventForm: an event reads back with its body byte for byte and its
// text exact, whatever the body's layout, when the text is one of the
// body's strings (so the text's place, text_at, is what is stored), and
// when the body is not JSON (body_text).
func FuzzEventForm(f *testing.F) {
	for _, b := range realBodies(f) {
		for l := range layouts {
			f.Add(b.body, uint8(l), "", []byte{byte(l), 7, 42})
		}
	}
	f.Add([]byte(`{"id":"m-1","text":"x"}`), uint8(1), "Hi, I ordered the fish & chips for delivery tonight but it never came, can you check?", []byte{})
	f.Add([]byte("Body=fish+%26+chips&From=%2B1555"), uint8(0), strings.Repeat("\xff & < > ", 20), []byte{1})
	f.Fuzz(func(t *testing.T, body []byte, layout uint8, text string, data []byte) {
		src := &source{data: data, strs: []string{text}}
		ev := filled[Event](src, "Body", "BodyText", "TextAt", "Raw")
		if src.byte()%2 == 0 { // the key as intake makes it, which the record leaves out
			ev.Key = ev.Channel + ":" + ev.MessageID
		}
		ev.canonical()
		ev.Text = ""
		switch {
		case json.Valid(body) && text != "":
			// The fuzzer's text as the body's "text", written as a sender
			// would (escapes and all, from the layout).
			var doc map[string]any
			if json.Unmarshal(body, &doc) != nil || doc == nil {
				doc = map[string]any{}
			}
			ev.Text = validUTF8(text)
			doc["text"] = ev.Text
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false) // as most senders write it; two layouts escape
			if err := enc.Encode(doc); err != nil {
				t.Fatal(err)
			}
			ev.Body = layouts[int(layout)%len(layouts)](bytes.TrimSpace(b.Bytes()))
		case json.Valid(body):
			ev.Body = layouts[int(layout)%len(layouts)](body)
			// The text is the body's longest string.
			for _, tok := range stringTokens(ev.Body) {
				var s string
				if !tok.key && json.Unmarshal(ev.Body[tok.start:tok.end], &s) == nil && len(s) > len(ev.Text) {
					ev.Text = s
				}
			}
		default:
			ev.BodyText, ev.Text = string(body), validUTF8(text)
		}
		if len(ev.Body) == 0 {
			ev.Body = nil
		}
		before := string(ev.Body)
		roundTrip(t, ev, ev)
		if string(ev.Body) != before {
			t.Fatal("encoding changed the caller's body")
		}
	})
}

// A realBody is one of testdata/bodies: a body as a provider sends it,
// and where its text is.
type realBody struct {
	name string
	body []byte
	text string // the text's member name, searched depth first; "" for a form body
}

// realBodies reads testdata/bodies: one file per provider shape, its
// text's member name after the last dot before the extension
// (whatsapp.body.json: the text is the first "body" member).
func realBodies(tb testing.TB) []realBody {
	tb.Helper()
	files, err := filepath.Glob("testdata/bodies/*")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no bodies in testdata/bodies: %v", err)
	}
	var out []realBody
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		name := filepath.Base(p)
		parts := strings.Split(name, ".")
		rb := realBody{name: name, body: b}
		if len(parts) == 3 && parts[2] == "json" {
			rb.text = parts[1]
		}
		out = append(out, rb)
	}
	return out
}

// memberText is the first string value named name in body, depth first.
func memberText(body []byte, name string) (string, bool) {
	for _, t := range stringTokens(body) {
		if !t.key && t.name == name {
			var s string
			if json.Unmarshal(body[t.start:t.end], &s) == nil {
				return s, true
			}
		}
	}
	return "", false
}

// TestRealBodiesReadBack: each real-shaped body, recorded through
// RecordEvent with its text, reads back through EventByKey with the
// body byte for byte and the text exact, and a long text is stored once.
func TestRealBodiesReadBack(t *testing.T) {
	st := openTest(t)
	for i, rb := range realBodies(t) {
		t.Run(rb.name, func(t *testing.T) {
			key := "web:real-" + strconv.Itoa(i)
			ev := newEvent(key, t0)
			if rb.text == "" {
				ev.Body, ev.BodyText, ev.Text = nil, string(rb.body), "fish & chips"
			} else {
				text, ok := memberText(rb.body, rb.text)
				if !ok {
					t.Fatalf("no %q in %s", rb.text, rb.name)
				}
				ev.Body, ev.Text = json.RawMessage(rb.body), text
			}
			if _, err := st.RecordEvent(t.Context(), ev, draftJobFor(key, 3)); err != nil {
				t.Fatal(err)
			}
			got, err := st.EventByKey(key)
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != ev.Text || !bytes.Equal(got.Body, ev.Body) || got.BodyText != ev.BodyText {
				t.Errorf("read back text %q, body %q (%q); want %q, %q (%q)", got.Text, got.Body, got.BodyText, ev.Text, ev.Body, ev.BodyText)
			}
			var raw []byte
			_ = st.View(func(tx *Tx) error { raw = bytes.Clone(tx.bucket(bucketEvents).Get([]byte(got.ID))); return nil })
			head, _, _ := bytes.Cut(raw, []byte("\n"))
			var rec map[string]any
			if err := json.Unmarshal(head, &rec); err != nil {
				t.Fatal(err)
			}
			_, place := rec["text_at"]
			_, copied := rec["text"]
			if want := len(ev.Text) >= minTextRef && bytes.Contains(rb.body, literal(ev.Text)); place != want || copied == want {
				t.Errorf("stored with text_at %v and the text %v; want the text once, as a place: %v", place, copied, want)
			}
			t.Logf("%d-byte body, %d-byte text, place %v: %d bytes stored", len(rb.body), len(ev.Text), place, len(raw))
		})
	}
}

// TestWriteFuzzCorpus writes testdata/fuzz/FuzzEventForm (each real body
// in each layout) and testdata/fuzz/FuzzRecordForms (each record kind
// with the real bodies' texts) when HANDOFF_WRITE_CORPUS is set; the
// corpus is checked in.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("HANDOFF_WRITE_CORPUS") == "" {
		t.Skip("HANDOFF_WRITE_CORPUS is not set")
	}
	write := func(fuzz, name string, args ...string) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		entry := "go test fuzz v1\n" + strings.Join(args, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(entry), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := strconv.Quote
	var texts []string
	for _, rb := range realBodies(t) {
		base := strings.TrimSuffix(rb.name, filepath.Ext(rb.name))
		for l := range layouts {
			write("FuzzEventForm", fmt.Sprintf("%s-%d", base, l), "[]byte("+q(string(rb.body))+")", fmt.Sprintf("uint8(%d)", l), `string("")`, `[]byte("\x07*")`)
		}
		if text, ok := memberText(rb.body, rb.text); ok {
			texts = append(texts, text)
		}
	}
	for kind := range recordKinds {
		a, b := texts[kind%len(texts)], texts[(kind+1)%len(texts)]
		write("FuzzRecordForms", fmt.Sprintf("kind-%02d", kind), fmt.Sprintf("uint8(%d)", kind), "[]byte("+q("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f")+")", "string("+q(a)+")", "string("+q(b)+")")
	}
}
