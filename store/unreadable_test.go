package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store/storetest"
)

// rotFixture writes a real file with several events, their jobs and
// drafts, closes it and returns its folder, path and what it holds.
func rotFixture(t *testing.T) (dir, path string, recs []Recorded, drafts []Draft) {
	t.Helper()
	dir = t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		rec := record(t, st, fmt.Sprintf("web:r-%d", i), t0.Add(time.Duration(i)*time.Second))
		d, _, err := st.SaveDraft(context.Background(), Draft{EventKey: rec.Event.Key, Text: "hi", CreatedAt: rec.Event.ReceivedAt})
		if err != nil {
			t.Fatal(err)
		}
		recs, drafts = append(recs, rec), append(drafts, d)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, FileName), recs, drafts
}

// TestVerifyIsStrict: a flipped byte that keeps a record valid JSON (a
// key no longer one this binary knows, invalid UTF-8 in a key) is reported
// by verify as a problem of that record, though a normal read of it
// succeeds (leniently, without the field); the file still opens for serve.
func TestVerifyIsStrict(t *testing.T) {
	boltOnly(t)
	tests := []struct {
		name, bucket string
		key          func([]Recorded, []Draft) string
		old, new     string
		reason       string
	}{
		{"a draft's key with invalid UTF-8", "drafts", func(_ []Recorded, ds []Draft) string { return ds[1].ID }, `"correlation_id"`, "\"correlation_\xf7d\"", `unknown field "correlation_`},
		{"an event's key with invalid UTF-8", "events", func(rs []Recorded, _ []Draft) string { return rs[2].Event.ID }, `"name"`, "\"nam\xff\"", `unknown field "nam`},
		{"an event's text with invalid UTF-8", "events", func(rs []Recorded, _ []Draft) string { return rs[1].Event.ID }, `"hello`, "\"hell\xff", `invalid UTF-8 in "text"`},
		{"an event's key it does not know", "events", func(rs []Recorded, _ []Draft) string { return rs[0].Event.ID }, `"channel"`, `"chan#el"`, `unknown field "chan#el"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, path, recs, drafts := rotFixture(t)
			key := tt.key(recs, drafts)
			if err := storetest.Rot(path, tt.bucket, []byte(key), storetest.Replace(tt.old, tt.new)); err != nil {
				t.Fatal(err)
			}
			err := VerifyFile(path)
			var ue *UnreadableRecordsError
			if !errors.As(err, &ue) || len(ue.Records) != 1 {
				t.Fatalf("VerifyFile = %v; want one unreadable record", err)
			}
			if u := ue.Records[0]; u.ID != key || !strings.Contains(u.Reason, tt.reason) {
				t.Errorf("VerifyFile names %+v; want %s with %q", u, key, tt.reason)
			}
			st, err := Open(dir, Options{CheckPages: true})
			if err != nil {
				t.Fatalf("open for serve: %v", err)
			}
			defer st.Close()
			if us := st.Unreadable(); len(us) != 1 || us[0].ID != key {
				t.Errorf("Unreadable() = %+v, want %s", us, key)
			}
			if r, err := st.Inspect(); err != nil || len(r.Damaged) > 0 {
				t.Errorf("Inspect: %v, damaged %v; want no damage", err, r.Damaged)
			}
		})
	}
}

// TestUnreadableRecordIsContained: one record whose bytes do not decode
// is an *Unreadable to a read of it, and every walk over many steps over
// it and goes on: the queue's pages, the leads, the timeline (its jobs
// and drafts), the search, the figures; Check names it apart from damage,
// and the entries naming it are its problem, not the indexes'.
func TestUnreadableRecordIsContained(t *testing.T) {
	boltOnly(t)
	dir, path, recs, drafts := rotFixture(t)
	broken := storetest.Replace(`"v":1`, `"v"#1`)
	for _, r := range []struct{ bucket, key string }{
		{"events", recs[0].Event.ID}, {"drafts", drafts[1].ID}, {"jobs", recs[2].Job.ID}, {"handoffs", LeadKey("web", recs[3].Event.ConversationID)},
	} {
		if err := storetest.Rot(path, r.bucket, []byte(r.key), broken); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Open(dir, Options{CheckPages: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer st.Close()
	if n := len(st.Unreadable()); n != 4 {
		t.Errorf("the open found %d unreadable records, want 4: %+v", n, st.Unreadable())
	}
	if _, err := st.EventByKey(recs[0].Event.Key); !isUnreadable(err, "event", recs[0].Event.ID) {
		t.Errorf("EventByKey of the rotten event = %v; want its *Unreadable", err)
	}
	page, _, err := st.Drafts(DraftFilter{Status: DraftPending})
	if err != nil || len(page) != 3 {
		t.Errorf("Drafts = %d, %v; want the 3 that can be read", len(page), err)
	}
	lines, err := st.DraftLines(page)
	if err != nil || len(lines[0].Unreadable) != 1 {
		t.Errorf("DraftLines = %+v, %v; want the first line's event unreadable", lines, err)
	}
	if hs, err := allHandoffs(st); err != nil || len(hs) != 3 {
		t.Errorf("Handoffs = %d, %v; want 3", len(hs), err)
	}
	tl, err := st.Timeline(recs[2].Event.Key)
	if err != nil || len(tl.Jobs) != 0 || len(tl.Unreadable) != 1 || tl.Unreadable[0].Kind != "job" {
		t.Errorf("Timeline with a rotten job = %d jobs, unreadable %+v, %v; want the job listed apart", len(tl.Jobs), tl.Unreadable, err)
	}
	if _, err := st.Timeline(recs[0].Event.Key); !isUnreadable(err, "event", recs[0].Event.ID) {
		t.Errorf("Timeline of the rotten event = %v; want its *Unreadable", err)
	}
	res, err := st.Search(Everything(), "hello", 10)
	if err != nil || len(res.Leads) != 2 || len(res.Unreadable) == 0 {
		t.Errorf("Search = %d leads, unreadable %+v, %v; want 2 and the rest listed", len(res.Leads), res.Unreadable, err)
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.Spend(t0.Add(-time.Hour), []string{"web"}); return err }); err != nil {
		t.Errorf("Spend: %v", err)
	}
	if _, err := st.DraftingFor(Everything()); err != nil {
		t.Errorf("Drafting: %v", err)
	}
	// The client's export goes on past them, and names them at its end.
	var exp bytes.Buffer
	n, err := st.Export(&exp, Subject{Client: "c", Channels: []string{"web"}}, t0)
	if err != nil || n != 3 {
		t.Errorf("Export = %d leads, %v; want the 3 leads that can be read", n, err)
	}
	var doc struct {
		Leads      []ExportLead `json:"leads"`
		Unreadable []Unreadable `json:"unreadable"`
	}
	if err := json.Unmarshal(exp.Bytes(), &doc); err != nil {
		t.Fatalf("the export is not one JSON document: %v", err)
	}
	for _, want := range []struct{ kind, id string }{
		{"event", recs[0].Event.ID}, {"draft", drafts[1].ID}, {"lead", LeadKey("web", recs[3].Event.ConversationID)},
	} {
		if !slices.ContainsFunc(doc.Unreadable, func(u Unreadable) bool { return u.Kind == want.kind && u.ID == want.id && u.Reason != "" }) {
			t.Errorf("the export's unreadable list %+v does not name %s %s with its reason", doc.Unreadable, want.kind, want.id)
		}
	}
	r, err := st.Inspect()
	if err != nil || len(r.Damaged) > 0 || len(r.Unreadable) != 4 {
		t.Errorf("Inspect = damaged %v, unreadable %+v, %v; want 4 unreadable and no damage", r.Damaged, r.Unreadable, err)
	}
}

func isUnreadable(err error, kind, id string) bool {
	u, ok := AsUnreadable(err)
	return ok && u.Kind == kind && u.ID == id
}

// TestUnreadableUserAndAuditEntry: /users and /audit list the people and
// entries that can be read; the one that cannot is known to the store (the
// overview's banner and the gauge name it) instead of failing the list.
func TestUnreadableUserAndAuditEntry(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ann", "bob", "cy"} {
		addTestUser(t, st, n, RoleAdmin)
		if err := st.Audit(context.Background(), AuditEntry{At: t0, Who: n, Action: "login"}); err != nil {
			t.Fatal(err)
		}
	}
	log, err := st.AuditLog(100)
	if err != nil || len(log) < 3 {
		t.Fatalf("AuditLog = %d, %v", len(log), err)
	}
	victim := log[0].ID
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	broken := storetest.Replace(`"v":1`, `"v"#1`)
	for _, r := range []struct{ bucket, key string }{{"users", "bob"}, {"audit", victim}} {
		if err := storetest.Rot(path, r.bucket, []byte(r.key), broken); err != nil {
			t.Fatal(err)
		}
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	users, err := st.Users()
	if err != nil || len(users) != 2 {
		t.Errorf("Users = %d, %v; want the 2 that can be read", len(users), err)
	}
	after, err := st.AuditLog(100)
	if err != nil || len(after) != len(log)-1 {
		t.Errorf("AuditLog = %d, %v; want %d", len(after), err, len(log)-1)
	}
	for _, want := range []struct{ kind, id string }{{"user", "bob"}, {"audit entry", victim}} {
		if !slices.ContainsFunc(st.Unreadable(), func(u Unreadable) bool { return u.Kind == want.kind && u.ID == want.id }) {
			t.Errorf("the store does not know %s %s as unreadable: %+v", want.kind, want.id, st.Unreadable())
		}
	}
}
