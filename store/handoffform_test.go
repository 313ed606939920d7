package store

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit/corpus"
)

// TestHandoffFormOld: a lead as the released binary stored it (every
// field written) reads back as it was, strictly too, in the shapes a lead
// takes: new with its first message, in a turn of several (its draft
// the last message's), replied with no open turn, on a channel name with
// a ":" in it, a turn drafted by an earlier message, named from the
// corpus's texts; the new form is never longer and leaves the derivable fields out.
func TestHandoffFormOld(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	var leads []Handoff
	for i, tx := range corpus.Texts() {
		h := NewHandoff("demo", "+1555000"+tx.Name)
		h.Status, h.Since, h.Contact, h.Name = "received", at, "+1555000"+tx.Name, tx.Body
		e1, e2 := "demo:m-"+tx.Name, "demo:m2-"+tx.Name
		h.History = []Transition{{Cycle: 1, Status: "received", At: at, EventKey: e1, Note: "message received"}}
		h.Turn, h.TurnEvents, h.TurnDraft, h.LastEventKey, h.DraftJob = 1, []string{e1}, e1, e1, "01JOB"
		switch i % 5 {
		case 1: // a turn of two messages: the second took over its draft
			h.TurnEvents, h.LastEventKey, h.TurnDraft = []string{e1, e2}, e2, e2
		case 2: // replied: no open turn, its last message kept
			h.Status, h.TurnEvents, h.TurnDraft = "replied", nil, ""
			h.History = append(h.History, Transition{Cycle: 1, Status: "replied", At: at.Add(time.Minute), EventKey: e1, Note: tx.Body})
		case 3: // a channel whose name holds ":" (none may, but a record's form must not care)
			h.Channel, h.Key = "de:mo", "de:mo:"+h.ConversationID
		case 4: // a turn whose draft is not its last message's (none is, but a record's form must not care)
			h.TurnEvents, h.LastEventKey = []string{e1, e2}, e2
		}
		leads = append(leads, h)
	}
	for _, h := range leads {
		t.Run(h.Key, func(t *testing.T) {
			raw, err := json.Marshal(h) // the released binary's stored form
			if err != nil {
				t.Fatal(err)
			}
			for _, strict := range []bool{false, true} {
				var got Handoff
				if err := decodeAs(raw, &got, strict); err != nil {
					t.Fatalf("decode (strict %v): %v", strict, err)
				}
				if !reflect.DeepEqual(got, h) {
					t.Fatalf("strict %v: read back\n%+v\nwant\n%+v", strict, got, h)
				}
			}
			neu, err := encode(&h)
			if err != nil {
				t.Fatal(err)
			}
			var got Handoff
			if err := decodeAs(neu, &got, true); err != nil || !reflect.DeepEqual(got, h) {
				t.Fatalf("new form %s read back %+v, %v; want %+v", neu, got, err, h)
			}
			if len(neu) > len(raw) {
				t.Errorf("the new form is %d bytes, the old %d", len(neu), len(raw))
			}
			if h.Channel == "demo" && (bytes.Contains(neu, []byte(`"channel"`)) || bytes.Contains(neu, []byte(`"conversation_id"`))) {
				t.Errorf("the new form %s writes the key's halves", neu)
			}
		})
	}
}
