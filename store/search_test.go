package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

func TestFindEvent(t *testing.T) {
	st := openTest(t)
	rec := record(t, st, "web:find-1", t0)
	ev := rec.Event
	d, _, err := st.SaveDraft(context.Background(), Draft{EventKey: ev.Key, Text: "hi", CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.ApproveDraft(context.Background(), d.ID, Approval{Decision: Decision{By: "x", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	record(t, st, "web:other", t0) // another event, which no query below may find
	tests := []struct{ name, q, want string }{
		{"event key", ev.Key, ev.Key},
		{"draft id", d.ID, ev.Key},
		{"outbox id", a.Outbox.ID, ev.Key},
		{"lead key", LeadKey(ev.Channel, ev.ConversationID), ev.Key},
		{"correlation id", ev.CorrelationID, ev.Key},
		{"conversation id", ev.ConversationID, ev.Key},
		{"unknown", "nothing-like-this", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.FindEvent(Everything(), tt.q)
			if err != nil || got != tt.want {
				t.Errorf("FindEvent(%q) = %q, %v; want %q", tt.q, got, err, tt.want)
			}
		})
	}
}

// say records a message of lead conv on channel ch from name, at at.
func say(t *testing.T, st *Store, ch, conv, id, name, contact, text string, at time.Time) Recorded {
	t.Helper()
	ev := Event{
		ID: ulid.Make().String(), Key: ch + ":" + id, Channel: ch, MessageID: id,
		CorrelationID: ulid.Make().String(), ConversationID: conv, Contact: contact, Name: name, Text: text, ReceivedAt: at,
	}
	rec, err := st.RecordEvent(context.Background(), ev, draftJobFor(ev.Key, 3))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func hitKeys(r SearchResult) []string {
	out := []string{}
	for _, h := range r.Leads {
		out = append(out, h.Lead.Key+"/"+h.By)
	}
	return out
}

// TestSearch finds leads by any word of the name, the contact (a phone's
// digits too), the conversation id, and the text of recent messages,
// whatever the case, and only in the channels the caller sees.
func TestSearch(t *testing.T) {
	st := openTest(t)
	say(t, st, "web", "w-0045", "m1", "Ada Lovelace", "ada@example.com", "Where is my order?", t0)
	say(t, st, "web", "w-0046", "m2", "Grace Hopper", "grace@example.com", "I would like a REFUND please", t0.Add(time.Second))
	say(t, st, "sms", "+15550001111", "m3", "", "+1 555 000 1111", "is the blue one in stock", t0.Add(2*time.Second))
	say(t, st, "shop", "s-1", "m4", "Ada King", "king@example.com", "refund?", t0.Add(3*time.Second))
	tests := []struct {
		q    string
		vis  Visible
		want []string
	}{
		{"Ada", Everything(), []string{"shop:s-1/name", "web:w-0045/name"}},
		{"lovelace", Everything(), []string{"web:w-0045/name"}},
		{"ada lov", Everything(), []string{"web:w-0045/name"}},
		{"GRACE@", Everything(), []string{"web:w-0046/contact"}},
		{"W-0045", Everything(), []string{"web:w-0045/conversation"}},
		{"1555000", Everything(), []string{"sms:+15550001111/contact"}},
		{"refund", Everything(), []string{"shop:s-1/text", "web:w-0046/text"}},
		{"refund", OnlyChannels("web"), []string{"web:w-0046/text"}},
		{"ada", OnlyChannels("web"), []string{"web:w-0045/name"}},
		{"ada", OnlyChannels("sms"), []string{}},
		{"nothing like this", Everything(), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			r, err := st.Search(tt.vis, tt.q, 10)
			if err != nil {
				t.Fatal(err)
			}
			got := hitKeys(r)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Search(%q) = %v, want %v", tt.q, got, tt.want)
			}
			if r.Scanned != 4 || !r.Oldest.Equal(t0) {
				t.Errorf("the text search read %d messages back to %v, want all 4 back to %v", r.Scanned, r.Oldest, t0)
			}
		})
	}
	r, err := st.Search(Everything(), "a", 1)
	if err != nil || len(r.Leads) != 1 || !r.More {
		t.Errorf("Search with limit 1: %v, more %v, %v; want one lead and more", hitKeys(r), r.More, err)
	}
	if r, _ := st.Search(Everything(), "refund", 10); len(r.Leads) == 2 && r.Leads[0].Snippet != "refund?" {
		t.Errorf("a text hit's snippet is %q, want the message that matched", r.Leads[0].Snippet)
	}
}

// TestSearchIndexFollowsTheLead: a new name moves the lead's entries, an
// erasure removes them; Check (at the end) proves index and leads agree.
func TestSearchIndexFollowsTheLead(t *testing.T) {
	st := openTest(t)
	say(t, st, "web", "c1", "m1", "Ada Lovelace", "ada@example.com", "hi", t0)
	say(t, st, "web", "c1", "m2", "Ada Byron", "", "again", t0.Add(time.Second))
	for q, want := range map[string]int{"lovelace": 0, "byron": 1, "ada@": 1} {
		if r, err := st.Search(Everything(), q, 10); err != nil || len(r.Leads) != want {
			t.Errorf("after the new name, Search(%q) = %v, %v; want %d", q, hitKeys(r), err, want)
		}
	}
	if err := st.Check(); err != nil {
		t.Fatalf("Check after the new name: %v", err)
	}
	if err := st.Update(context.Background(), func(tx *Tx) error { // the drafting is done, so the lead is not busy
		for _, k := range []string{"web:m1", "web:m2"} {
			j, err := tx.LiveJob(KindDraft, k)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			old := j
			j.State = JobCompleted
			if err := tx.PutJob(&old, &j); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Erase(context.Background(), Subject{Channels: []string{"web"}, Contact: "ada@example.com"}, AuditEntry{Who: "x", At: t0, Action: "erase"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"byron", "ada@", "again"} {
		if r, err := st.Search(Everything(), q, 10); err != nil || len(r.Leads) != 0 {
			t.Errorf("after erasure, Search(%q) = %v, %v; want nothing", q, hitKeys(r), err)
		}
	}
}

// TestCheckCatchesTermIndex: a lost entry and a stray one are both named.
func TestCheckCatchesTermIndex(t *testing.T) {
	st := openTest(t)
	say(t, st, "web", "c1", "m1", "Ada", "ada@example.com", "hi", t0)
	lost := []byte("ada\x00web:c1")
	stray := []byte("zed\x00web:c1")
	if err := st.Update(context.Background(), func(tx *Tx) error {
		if err := tx.bucket(bucketHandoffsByTerm).Delete(lost); err != nil {
			return err
		}
		return tx.bucket(bucketHandoffsByTerm).Put(stray, nil)
	}); err != nil {
		t.Fatal(err)
	}
	err := st.Check()
	if err == nil || !strings.Contains(err.Error(), `is not in idx_handoffs_by_term ("ada\x00web:c1")`) || !strings.Contains(err.Error(), `"zed\x00web:c1" names lead web:c1, which has no such entry`) {
		t.Errorf("Check = %v, want the lost and the stray entry named", err)
	}
	if err := st.Update(context.Background(), func(tx *Tx) error {
		if err := tx.bucket(bucketHandoffsByTerm).Delete(stray); err != nil {
			return err
		}
		return tx.bucket(bucketHandoffsByTerm).Put(lost, nil)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSearchConcurrentNames: leads renamed by messages recorded at once
// keep their index entries in step (each in the record's transaction).
func TestSearchConcurrentNames(t *testing.T) {
	st := openTest(t)
	together(32, func(i int) {
		id := fmt.Sprintf("m%d", i)
		ev := Event{
			ID: ulid.Make().String(), Key: "web:" + id, Channel: "web", MessageID: id, CorrelationID: ulid.Make().String(),
			ConversationID: fmt.Sprintf("c%d", i%4), Name: fmt.Sprintf("Name%d Person", i), Text: "hi", ReceivedAt: t0.Add(time.Duration(i) * time.Millisecond),
		}
		if _, err := st.RecordEvent(context.Background(), ev, draftJobFor(ev.Key, 3)); err != nil {
			t.Error(err) // not say's t.Fatal: this is not the test's goroutine
		}
	})
	r, err := st.Search(Everything(), "person", 10)
	if err != nil || len(r.Leads) != 4 {
		t.Fatalf("Search(person) = %v, %v; want the 4 leads once each", hitKeys(r), err)
	}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationLeadTerms: a schema 6 file (leads without names, no term
// index) checks as it is, and at open its leads get their names and
// entries, so the search finds them.
func TestMigrationLeadTerms(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	say(t, st, "web", "w-0045", "m1", "Ada Lovelace", "ada@example.com", "hi", t0)
	say(t, st, "web", "w-0045", "m2", "", "", "again", t0.Add(time.Second))
	st.Close()
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketHandoffsByTerm); err != nil {
			return err
		}
		b := tx.Bucket(bucketHandoffs)
		raw := b.Get([]byte("web:w-0045"))
		var h map[string]any
		if err := json.Unmarshal(raw, &h); err != nil {
			return err
		}
		delete(h, "name")
		out, _ := json.Marshal(h)
		if err := b.Put([]byte("web:w-0045"), out); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("6"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	old, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); err != nil {
		t.Errorf("Check of a schema 6 file: %v", err)
	}
	old.Close()
	st = openTestAt(t, dir)
	h, err := st.Handoff("web:w-0045")
	if err != nil || h.Name != "Ada Lovelace" {
		t.Errorf("the lead after the migration: %+v, %v; want named Ada Lovelace", h.Name, err)
	}
	for _, q := range []string{"lovelace", "ada@example", "w-0045"} {
		if r, err := st.Search(Everything(), q, 10); err != nil || len(r.Leads) != 1 {
			t.Errorf("after the migration, Search(%q) = %v, %v; want the lead", q, hitKeys(r), err)
		}
	}
}

// openTestAt opens the store in dir, checked and closed at the end.
func openTestAt(t *testing.T, dir string) *Store {
	t.Helper()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("Check at the end: %v", err)
		}
		st.Close()
	})
	return st
}

// TestCard reads a card's conversation: earlier messages and the reply
// sent to them, then the turn's messages, marked, oldest first; a reply
// of another channel's conversation with the same id is not shown.
func TestCard(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	first := say(t, st, "web", "c1", "m1", "Ada", "ada@example.com", "first question", t0)
	d1, _, err := st.SaveDraft(ctx, Draft{EventKey: first.Event.Key, Text: "first answer", CreatedAt: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApproveDraft(ctx, d1.ID, Approval{Decision: Decision{By: "x", At: t0.Add(2 * time.Second)}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	other := say(t, st, "shop", "c1", "x1", "Zed", "zed@example.com", "another shop", t0.Add(3*time.Second))
	d2, _, err := st.SaveDraft(ctx, Draft{EventKey: other.Event.Key, Text: "not this one", CreatedAt: t0.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApproveDraft(ctx, d2.ID, Approval{Decision: Decision{By: "x", At: t0.Add(4 * time.Second)}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	second := say(t, st, "web", "c1", "m2", "Ada", "", "second question", t0.Add(5*time.Second))
	d3, _, err := st.SaveDraft(ctx, Draft{EventKey: second.Event.Key, Text: "second answer", CreatedAt: t0.Add(6 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Card(d3, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range v.Conversation {
		switch {
		case s.Reply != nil:
			got = append(got, "reply:"+s.Reply.Text+":"+string(s.Reply.Status))
		case s.InTurn:
			got = append(got, "turn:"+s.Event.Text)
		default:
			got = append(got, "msg:"+s.Event.Text)
		}
	}
	want := []string{"msg:first question", "reply:first answer:pending", "turn:second question"}
	if !slices.Equal(got, want) {
		t.Errorf("conversation %v, want %v", got, want)
	}
	if v.Lead.Key != "web:c1" || v.Event.Key != second.Event.Key || len(v.Turn) != 1 {
		t.Errorf("card lead %s event %s turn %d", v.Lead.Key, v.Event.Key, len(v.Turn))
	}
	if v, err := st.Card(d3, 1); err != nil || len(v.Conversation) != 2 || v.Conversation[0].Reply == nil {
		t.Errorf("card with one earlier line: %+v, %v; want the reply and the turn", v.Conversation, err)
	}
}
