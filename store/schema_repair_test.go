package store

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/handoff/handoff/store/engine"
)

// sentEvent is one entry of testdata/schema8-1591ed6.sent.json: what the
// fixture's script POSTed to the demo of handoff at 1591ed6.
type sentEvent struct {
	Key, Text, Body string
	Expect          string // "as_sent" or "unreadable"
}

// fixture8 copies the schema 8 fixture into a temp dir and returns the dir
// and what was sent to make it.
func fixture8(t *testing.T) (string, []sentEvent) {
	t.Helper()
	gz, err := os.ReadFile("testdata/schema8-1591ed6.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var db bytes.Buffer
	if _, err := db.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), db.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/schema8-1591ed6.sent.json")
	if err != nil {
		t.Fatal(err)
	}
	var sent []sentEvent
	if err := json.Unmarshal(raw, &sent); err != nil {
		t.Fatal(err)
	}
	return dir, sent
}

// eventValues is every stored value of the events bucket, by key.
func eventValues(t *testing.T, st *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := st.View(func(tx *Tx) error {
		return tx.bucket(bucketEvents).ForEach(func(k, v []byte) error { out[string(k)] = string(v); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrationRepairsSchema8: a file written by handoff at 1591ed6, some
// of whose events could not be read (their text_at measured on the body
// as received, their body stored compacted and HTML-escaped), checks as
// what it is, and at open every event reads back the text that was sent,
// except the one whose text cannot be told apart, which is kept and
// marked unreadable. Check passes, and a second open changes nothing.
func TestMigrationRepairsSchema8(t *testing.T) {
	boltOnly(t)
	dir, sent := fixture8(t)
	path := filepath.Join(dir, FileName)

	old, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); err != nil {
		t.Errorf("Check of the schema 8 file (serve's start-up check runs it before the migration): %v", err)
	}
	broken := 0
	for _, s := range sent {
		if _, err := old.EventByKey(s.Key); err != nil {
			broken++
		}
	}
	old.Close()
	if broken < 10 {
		t.Fatalf("%d of the fixture's %d events fail to read before the migration; the fixture no longer shows the bug", broken, len(sent))
	}

	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ms := st.Migrations(); len(ms) != len(migrations)-7 || ms[0].From != 8 || ms[len(ms)-1].To != SchemaVersion {
		t.Errorf("migrations run %+v, want each from 8 → 9 to %d", ms, SchemaVersion)
	}
	reps := st.Repairs()
	if len(reps) != 1 || reps[0].Migration != 8 || reps[0].Repaired != broken-1 || reps[0].Unreadable != 1 {
		t.Errorf("repairs %+v, want migration 8: %d repaired, 1 unreadable", reps, broken-1)
	}
	t.Logf("%d events sent, %d unreadable before the migration; %v", len(sent), broken, reps)
	var marked []string
	for _, s := range sent {
		ev, err := st.EventByKey(s.Key)
		if s.Expect == "unreadable" {
			// Kept, and every read of it says why it cannot be read.
			u, ok := AsUnreadable(err)
			if !ok || u.Kind != "event" || !strings.Contains(u.Reason, "could not be read back") {
				t.Errorf("%s: %v; want an *Unreadable event with the repair's reason", s.Key, err)
			} else {
				marked = append(marked, u.ID)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.Key, err)
			continue
		}
		switch s.Expect {
		default:
			if ev.Text != s.Text || ev.Unreadable != "" {
				t.Errorf("%s: text %.80q… (%d bytes; unreadable %q), want %.80q… (%d bytes)", s.Key, ev.Text, len(ev.Text), ev.Unreadable, s.Text, len(s.Text))
			}
		}
		var got, want any
		if json.Unmarshal(ev.Body, &got) != nil || json.Unmarshal([]byte(s.Body), &want) != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: body %s, want the JSON sent, %s", s.Key, ev.Body, s.Body)
		}
	}
	// Sound, with the one event it could not recover as its only
	// record-level problem (served as one unreadable row).
	r, err := st.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Damaged) != 0 {
		t.Errorf("Check after the migration: damage %v", r.Damaged)
	}
	if len(r.Unreadable) != 1 || len(marked) != 1 || r.Unreadable[0].ID != marked[0] {
		t.Errorf("Check after the migration: unreadable %+v, want only the event marked (%v)", r.Unreadable, marked)
	}
	before := eventValues(t, st)
	st.Close()

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ms := st.Migrations(); len(ms) != 0 {
		t.Errorf("the second open ran migrations %+v", ms)
	}
	if reps := st.Repairs(); len(reps) != 0 {
		t.Errorf("the second open repaired %+v", reps)
	}
	if after := eventValues(t, st); !reflect.DeepEqual(after, before) {
		t.Errorf("the second open rewrote events")
	}
}

// TestTextFor: a schema 8 event's text is re-derived from its stored
// (compacted, HTML-escaped) body by the length of its literal as
// received; of several values that long, the one under a known text
// field; where that does not decide, nothing is chosen and why is said.
func TestTextFor(t *testing.T) {
	fish := "Hi, I ordered the fish & chips for delivery tonight but it never came, can you check?"
	fis2 := "Hi, I ordered the fish & chips for delivery tonight but it never came, can you chuck?"
	stored := func(doc string) []byte { // as schema 8 kept a body
		b, err := json.Marshal(json.RawMessage(doc))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n := len(literal(fish))
	tests := []struct {
		name, body, want, whyNot string
	}{
		{"one value that long", `{"id": "m-1", "text": ` + mustJSON(t, fish) + `}`, fish, ""},
		{"the same value twice", `{"text": ` + mustJSON(t, fish) + `, "echo": ` + mustJSON(t, fish) + `}`, fish, ""},
		{"a known field decides", `{"note": ` + mustJSON(t, fis2) + `, "message": {"caption": ` + mustJSON(t, fish) + `}}`, fish, ""},
		{"the first known field decides", `{"caption": ` + mustJSON(t, fis2) + `, "text": ` + mustJSON(t, fish) + `}`, fish, ""},
		{"two under one known field", `{"text": ` + mustJSON(t, fish) + `, "quoted": {"text": ` + mustJSON(t, fis2) + `}}`, "", `named "text"`},
		{"none named like a text", `{"a": ` + mustJSON(t, fish) + `, "b": [` + mustJSON(t, fis2) + `]}`, "", "none is named like a text"},
		{"none that long", `{"text": "short & sweet"}`, "", "no string value"},
		{"a name is no value", `{` + mustJSON(t, fish) + `: 1}`, "", "no string value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, whyNot := textFor(stored(tt.body), n)
			if got != tt.want || (tt.whyNot == "") != (whyNot == "") || !bytes.Contains([]byte(whyNot), []byte(tt.whyNot)) {
				t.Errorf("textFor = %q, %q; want %q, %q", got, whyNot, tt.want, tt.whyNot)
			}
		})
	}
	// The check of a place: exactly one string value, nothing else.
	body := stored(`{"id":"m-1","text":` + mustJSON(t, fish) + `}`)
	at := bytes.Index(body, []byte(`"Hi,`))
	for _, p := range []struct {
		at [2]int
		ok bool
	}{
		{[2]int{at, len(body) - 1 - at}, true},
		{[2]int{at, n}, false},         // the received length: the stored literal is longer (\u0026)
		{[2]int{1, 4}, false},          // a member name
		{[2]int{at + 1, 5}, false},     // inside a string
		{[2]int{at, len(body)}, false}, // past the end
	} {
		if why := placeProblem(body, p.at); (why == "") != p.ok {
			t.Errorf("placeProblem(%v) = %q, want ok %v", p.at, why, p.ok)
		}
	}
}

// TestCheckSchema8PlaceAfterMigration: after migration 8 every schema 8
// event left as it was has its text's place on exactly one string value
// of its body; Check proves it, naming one that does not (a value decoding
// to the wrong text would otherwise read as a text), and accepts one that does.
func TestCheckSchema8PlaceAfterMigration(t *testing.T) {
	st := openTest(t)
	rec := record(t, st, "web:legacy-1", t0)
	body := `{"id":"legacy-1","note":"say \"hi\" ok","text":"9876543210"}`
	put := func(at [2]int) {
		ev := rec.Event
		ev.Text, ev.Body, ev.TextAt = "", json.RawMessage(body), &at
		raw, err := json.Marshal(&ev) // the schema 8 form
		if err != nil {
			t.Fatal(err)
		}
		if err := st.raw(func(tx engine.Tx) error { return tx.Bucket(bucketEvents).Put([]byte(ev.ID), raw) }); err != nil {
			t.Fatal(err)
		}
	}
	put([2]int{bytes.Index([]byte(body), []byte(`"9876`)), 12})
	if err := st.Check(); err != nil {
		t.Errorf("Check of a schema 8 event whose place is its text: %v", err)
	}
	if got, err := st.EventByKey("web:legacy-1"); err != nil || got.Text != "9876543210" {
		t.Errorf("read %q, %v", got.Text, err)
	}
	put([2]int{bytes.Index([]byte(body), []byte(`" ok"`)), 5}) // `" ok"`: a string, but not one of the body's
	if got, err := st.EventByKey("web:legacy-1"); err != nil || got.Text != " ok" {
		t.Fatalf("the place inside a string reads %q, %v; the test needs it to read as a text", got.Text, err)
	}
	if err := st.Check(); err == nil {
		t.Error("Check passed a schema 8 event whose place is inside a string")
	}
	put([2]int{bytes.Index([]byte(body), []byte(`"9876`)), 12})
}
