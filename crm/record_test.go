package crm_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/store"
)

// FuzzRecord: a record, built from whatever the lead holds (names, contacts
// and keys as providers send them: emoji, CRLF, \u escapes, invalid UTF-8,
// &<>), reads back from its stored form exactly as built.
func FuzzRecord(f *testing.F) {
	f.Add("web", "+1 555 0100", "Ada Lovelace", "+1 555 0100", "ana", 1, "received")
	f.Add("mail", "<CAF=x@mail.example>", "Zoë \"Z\" O'Brien 🚀", "zoe@example.com", "", 3, "replied")
	f.Add("tg", "-1001234:42", "a\r\nb\\u003c&>", "", "owner\x00", 0, "closed")
	f.Add("wa", "\xff\xfe", "\xc3\x28", "\xed\xa0\x80@x", "\xff", 7, "owned")
	f.Fuzz(func(t *testing.T, channel, conv, name, contact, owner string, cycle int, status string) {
		h := store.Handoff{Key: store.LeadKey(channel, conv), Channel: channel, ConversationID: conv, Name: name, Contact: contact, Owner: owner,
			Cycle: cycle, Status: store.HandoffStatus(status), LastEventKey: channel + ":m1"}
		r := crm.NewRecord(h, config.CRM{Owners: map[string]string{owner: "7"}}, "https://h.example", time.Date(2026, 12, 2, 6, 0, 0, 123456789, time.FixedZone("x", 3600)))
		r.LastMessage = strings.ToValidUTF8(name+contact, "\uFFFD")
		r.Stuck = cycle%2 != 0 // a stuck write's record
		if r.Lead == "" || r.Status == "" {
			return // Decode refuses a record naming no lead or status; NewRecord's callers always have both
		}
		got, err := crm.Decode(r.Encode())
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)): %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	})
}

// FuzzRowID: a row id names its lead, cycle, status and repeat back,
// whatever the lead key holds (colons too, a tail like ":r2"), an id of
// another kind of row is no CRM write's, and an id that parses is the one
// its key writes (one key, one id).
func FuzzRowID(f *testing.F) {
	f.Add("web:c1", 1, "received", 0, false, "crm:web:c1:1:received")
	f.Add("mail:<a:b@c>", 12, "owned", 1, true, "crm:x:1:owned:r01")
	f.Add("x::", 0, "closed", 3, false, "crm:x:1:r1:owned:r2")
	f.Add("web:c1:1:owned:r1", 2, "matched", 12, true, "crm:web:c1:+1:owned")
	f.Add("web:c1:1:matched:stuck", 1, "matched", 0, true, "crm:web:c1:1:matched:stuck:stuck")
	f.Add("web:c1", 1, "matched", 2, true, "crm:web:c1:1:matched:r2:stuck")
	f.Fuzz(func(t *testing.T, lead string, cycle int, status string, repeat int, stuck bool, raw string) {
		if k, ok := crm.ParseWriteKey(raw); ok && k.String() != raw {
			t.Fatalf("ParseWriteKey(%q) = %+v, whose id is %q: two ids for one key", raw, k, k.String())
		}
		if cycle < 0 || lead == "" || repeat < 0 {
			return
		}
		k := crm.WriteKey{Lead: lead, Cycle: cycle, Status: store.HandoffStatus(status), Repeat: repeat, Stuck: stuck}
		id := k.String()
		got, ok := crm.ParseWriteKey(id)
		valid := !strings.Contains(status, ":") && (status == "received" || status == "matched" || status == "owned" || status == "replied" || status == "closed")
		if ok != valid || ok && got != k {
			t.Fatalf("ParseWriteKey(%q) = %+v %v; want %+v %v", id, got, ok, k, valid)
		}
		if repeat == 0 && !stuck && id != crm.RowID(lead, cycle, store.HandoffStatus(status)) {
			t.Fatalf("a first write's id %q is not RowID's", id)
		}
	})
}

func TestParseRowIDRefuses(t *testing.T) {
	for _, id := range []string{"web:c1:01JDRAFT", "stuck:web:c1:1700000000", "digest:morning:2026-12-02", "crm:", "crm:web:c1:x:received", "crm:web:c1:1:sent", "crm::1:received",
		"crm:web:c1:1:owned:r0", "crm:web:c1:1:owned:r01", "crm:web:c1:1:owned:r", "crm:web:c1:01:owned", "crm:web:c1:+1:owned", "crm:owned:r1"} {
		if _, _, _, ok := crm.ParseRowID(id); ok {
			t.Errorf("ParseRowID(%q) = ok, want refused", id)
		}
	}
}

// TestIDsAreShort: the reference fits Pipedrive's exact search (30
// characters) and the webhook-id is the same for a row, different across rows.
func TestIDsAreShort(t *testing.T) {
	ref := crm.Reference("mail:" + strings.Repeat("long-conversation-id", 20))
	if len(ref) > 30 || !strings.HasPrefix(ref, "ho_") {
		t.Errorf("Reference = %q (%d characters), want ho_… of at most 30", ref, len(ref))
	}
	a, b := crm.RowID("web:c1", 1, "received"), crm.RowID("web:c1", 1, "matched")
	if crm.MessageID(a) != crm.MessageID(a) || crm.MessageID(a) == crm.MessageID(b) {
		t.Errorf("MessageID: want one per row")
	}
}
