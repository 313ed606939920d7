package store

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
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
	reps := st.Repairs()
	if len(reps) != 1 || reps[0].Migration != 8 || reps[0].Repaired != broken-1 || reps[0].Unreadable != 1 {
		t.Errorf("repairs %+v, want migration 8: %d repaired, 1 unreadable", reps, broken-1)
	}
	t.Logf("%d events sent, %d unreadable before the migration; %v", len(sent), broken, reps)
	for _, s := range sent {
		ev, err := st.EventByKey(s.Key)
		if err != nil {
			t.Errorf("%s: %v", s.Key, err)
			continue
		}
		switch s.Expect {
		case "unreadable":
			if ev.Text != "" || ev.Unreadable == "" {
				t.Errorf("%s: text %q, unreadable %q; want it marked unreadable", s.Key, ev.Text, ev.Unreadable)
			}
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
	if err := st.Check(); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
	before := eventValues(t, st)
	st.Close()

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if reps := st.Repairs(); len(reps) != 0 {
		t.Errorf("the second open repaired %+v", reps)
	}
	if after := eventValues(t, st); !reflect.DeepEqual(after, before) {
		t.Errorf("the second open rewrote events")
	}
}
