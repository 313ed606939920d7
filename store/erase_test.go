package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// recordLead stores one event on channel in its own conversation, with a
// job that is not a draft job (so the lead is not busy).
func recordLead(t testing.TB, st *Store, channel string, i int) Event {
	t.Helper()
	k := fmt.Sprintf("%s:msg-%04d", channel, i)
	ev := newEvent(k, t0.Add(time.Duration(i)*time.Millisecond))
	ev.Channel, ev.ConversationID, ev.Contact = channel, fmt.Sprintf("c-%04d", i), fmt.Sprintf("person-%04d@example.com", i)
	ev.Body = json.RawMessage(`{"text":"secret words ` + k + `"}`)
	ev.Text = "secret words " + k
	if _, err := st.RecordEvent(context.Background(), ev, NewJob{ID: ulid.Make().String(), Kind: "k", Key: k, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestEraseChunksKeepsDedup: erasing a client with more leads than one
// transaction takes removes every customer's words over several
// transactions, leaves the other channel alone, writes one audit entry at
// the start and one with the counts at the end, and a redelivery of an
// erased message (racing with the erase) is still a duplicate. The file
// passes Check (openTest's cleanup).
func TestEraseChunksKeepsDedup(t *testing.T) {
	st := openTest(t)
	const n = 3 * eraseChunk / 2 // each lead costs two of the chunk's budget: several transactions
	var evs []Event
	for i := range n {
		evs = append(evs, recordLead(t, st, "web", i))
	}
	other := recordLead(t, st, "sms", 0)

	var res EraseResult
	var eraseErr error
	together(9, func(i int) {
		if i == 0 {
			res, eraseErr = st.Erase(context.Background(), Subject{Client: "acme", Channels: []string{"web"}},
				AuditEntry{At: t0, Who: "ann", From: "127.0.0.1", Action: "erase", Target: "client acme"})
			return
		}
		// Webhooks redelivered meanwhile: every one is a duplicate.
		for j := i; j < n; j += 8 {
			ev := evs[j]
			ev.ID = ulid.Make().String()
			rec, err := st.RecordEvent(context.Background(), ev, NewJob{ID: ulid.Make().String(), Kind: "k", Key: ev.Key, MaxAttempts: 1})
			if err != nil || rec.Created {
				t.Errorf("redelivery of %s: created %v, %v; want a duplicate", ev.Key, rec.Created, err)
			}
		}
	})
	if eraseErr != nil {
		t.Fatal(eraseErr)
	}
	if res.Leads != n || res.Events != n || len(res.Busy) != 0 {
		t.Errorf("Erase = %+v, want %d leads and events", res, n)
	}
	for _, ev := range evs {
		got, err := st.EventByKey(ev.Key)
		if err != nil {
			t.Fatalf("%s after the erase: %v", ev.Key, err)
		}
		if got.Text != Erased || got.Body != nil || got.Contact != "" || got.ID != ev.ID || got.Duplicates > 1 {
			t.Fatalf("%s after the erase: %+v", ev.Key, got)
		}
	}
	if got, _ := st.EventByKey(other.Key); got.Text != other.Text || got.Contact != other.Contact {
		t.Errorf("the other channel's event was touched: %+v", got)
	}
	// Redelivered after the erase: still a duplicate.
	again := evs[0]
	again.ID = ulid.Make().String()
	if rec, err := st.RecordEvent(context.Background(), again, NewJob{ID: ulid.Make().String(), Kind: "k", Key: again.Key, MaxAttempts: 1}); err != nil || rec.Created {
		t.Errorf("redelivery after the erase: created %v, %v", rec.Created, err)
	}
	log, err := st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range log {
		actions = append(actions, e.Action+": "+e.Detail)
	}
	if len(log) != 2 || !strings.Contains(strings.Join(actions, "|"), fmt.Sprintf("erase done: %d leads: %d events", n, n)) {
		t.Errorf("audit after the erase: %q, want the erase and its counts", actions)
	}
	// A second erase finds nothing left to rewrite.
	res, err = st.Erase(context.Background(), Subject{Client: "acme", Channels: []string{"web"}}, AuditEntry{At: t0, Who: "ann", Action: "erase"})
	if err != nil || res.Events != 0 || res.Leads != n {
		t.Errorf("a second erase: %+v %v, want no event rewritten", res, err)
	}
}

// TestExportSubject: a channel's export holds its leads, a contact's only
// theirs, in valid JSON, with the header first.
func TestExportSubject(t *testing.T) {
	st := openTest(t)
	for i := range 3 {
		recordLead(t, st, "web", i)
	}
	recordLead(t, st, "sms", 7)
	for _, tt := range []struct {
		sub   Subject
		leads int
	}{
		{Subject{Client: "a", Channels: []string{"web"}}, 3},
		{Subject{Client: "a", Channels: []string{"web", "sms"}}, 4},
		{Subject{Client: "a", Channels: []string{"web"}, Contact: "person-0001@example.com"}, 1},
		{Subject{Client: "a", Channels: []string{"web"}, Contact: "person-0007@example.com"}, 0},
		{Subject{Client: "a"}, 0},
	} {
		var b bytes.Buffer
		n, err := st.Export(&b, tt.sub, t0)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			V      int          `json:"v"`
			Client string       `json:"client"`
			Leads  []ExportLead `json:"leads"`
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%+v: %v: %s", tt.sub, err, b.String())
		}
		if n != tt.leads || len(got.Leads) != tt.leads || got.V != 1 || got.Client != "a" {
			t.Errorf("%+v: %d leads (%d decoded), v %d; want %d", tt.sub, n, len(got.Leads), got.V, tt.leads)
		}
		for _, l := range got.Leads {
			if len(l.Events) != 1 || !strings.HasPrefix(l.Events[0].Text, "secret words") {
				t.Errorf("%+v: lead %s has events %+v", tt.sub, l.Lead.Key, l.Events)
			}
		}
	}
}

// TestVisible: the zero value sees nothing, keys are read by their channel.
func TestVisible(t *testing.T) {
	only := OnlyChannels("web")
	for _, tt := range []struct {
		v    Visible
		key  string
		want bool
	}{
		{Visible{}, "web:1", false}, {Everything(), "sms:1", true}, {only, "web:1", true},
		{only, "sms:1", false}, {only, "web", false}, {only, "webx:1", false},
	} {
		if got := tt.v.Key(tt.key); got != tt.want {
			t.Errorf("%+v.Key(%q) = %v, want %v", tt.v, tt.key, got, tt.want)
		}
	}
}
