package store

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/handoff/handoff/testkit/corpus"
)

// TestEventFormOld: an event as the released binary stored it (its whole
// record, key and duplicates included, then its body) reads back as it
// was, for each of the corpus's bodies, strictly too; the new record is
// shorter by the key and the zero count, and holds neither.
func TestEventFormOld(t *testing.T) {
	for i, b := range corpus.All() {
		if !b.IsJSON() {
			continue
		}
		ev := newEvent("demo:m-"+strings.Repeat("7", i%5+1), t0)
		ev.Channel, ev.MessageID = "demo", ev.Key[len("demo:"):]
		ev.Body, ev.ContentType, ev.V, ev.Text = json.RawMessage(b.Raw), b.ContentType, recordVersion, b.Want.Text
		ev.canonical()
		old := ev
		old.Raw, old.Body = rawBody, nil
		if old.TextAt = textIn(b.Raw, ev.Text); old.TextAt != nil {
			old.Text = "" // a long text kept as its place in the body
		}
		head, err := json.Marshal(&old) // the released binary's record
		if err != nil {
			t.Fatal(err)
		}
		raw := append(append(head, '\n'), b.Raw...)
		for _, strict := range []bool{false, true} {
			var got Event
			if err := decodeAs(raw, &got, strict); err != nil {
				t.Fatalf("%s: decode (strict %v): %v", b.Name(), strict, err)
			}
			if !reflect.DeepEqual(got, ev) {
				t.Fatalf("%s: strict %v read back\n%+v\nwant\n%+v", b.Name(), strict, got, ev)
			}
		}
		neu, err := encode(&ev)
		if err != nil {
			t.Fatal(err)
		}
		newHead, _, _ := bytes.Cut(neu, []byte("\n"))
		if bytes.Contains(newHead, []byte(`"key"`)) || bytes.Contains(newHead, []byte(`"duplicates"`)) {
			t.Errorf("%s: the new record %s holds its key or a zero count", b.Name(), newHead)
		}
		var got Event
		if err := decodeAs(neu, &got, true); err != nil || !reflect.DeepEqual(got, ev) {
			t.Fatalf("%s: the new form read back %+v, %v", b.Name(), got, err)
		}
	}
}
