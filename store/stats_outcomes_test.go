package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMigrationCountsOutcomesFromSchema12 makes a file as schema 12 left
// it — drafts that ended by an own reply, a regeneration (its new version
// present, or gone), a close and a person's rejection all stored as
// rejected with no outcome, and figures of six fields — and opens it:
// migration 12 gives each draft its outcome from what the decision says,
// counts the outcomes apart in the figures, keeps every draft with every
// other field as it was, and Check passes before (on the schema 12 file)
// and after.
func TestMigrationCountsOutcomesFromSchema12(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reject := func(id string, dec Decision) {
		changeDraft(t, st, id, func(d *Draft) { d.Status, d.Decision = DraftRejected, &dec })
	}
	rej := figureDraft(t, st, "web", "m1", t0, "v1", 0.5)
	reject(rej.ID, Decision{By: "ann", At: t0, Reason: "wrong price"})
	own := figureDraft(t, st, "web", "m2", t0, "v1", 0)
	mine := figureDraft(t, st, "web", "m2-mine", t0, "person", 0)
	changeDraft(t, st, mine.ID, func(d *Draft) { d.Drafter, d.Author = "person", "ann" })
	reject(own.ID, Decision{By: "regeneration", At: t0, Reason: "replaced by " + mine.ID})
	again := figureDraft(t, st, "web", "m3", t0, "v1", 0)
	v2 := figureDraft(t, st, "web", "m3-v2", t0, "v1", 0)
	reject(again.ID, Decision{By: "regeneration", At: t0, Reason: "replaced by " + v2.ID})
	gone := figureDraft(t, st, "web", "m4", t0, "v1", 0)
	reject(gone.ID, Decision{By: "regeneration", At: t0, Reason: "replaced by dNOSUCHDRAFT-v2"})
	closed := figureDraft(t, st, "mail", "m5", t0, "v1", 0)
	reject(closed.ID, Decision{By: "ann", At: t0, Reason: "closed without a reply: spam"})
	before := map[string]Draft{}
	for _, id := range []string{rej.ID, own.ID, mine.ID, again.ID, v2.ID, gone.ID, closed.ID} {
		d, err := st.Draft(id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = d
	}
	err = st.Update(context.Background(), func(tx *Tx) error {
		for i, s := range []HandoffStatus{"received", "matched", "matched"} {
			h := NewHandoff("web", fmt.Sprintf("lead-%d", i))
			h.Status, h.Since = s, t0
			if err := tx.PutHandoff(nil, &h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	// What schema 12 wrote: six-field figures, no lead counts.
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		c := meta.Cursor()
		short := map[string][]byte{}
		for k, v := c.Seek(draftStatsPrefix); k != nil && bytes.HasPrefix(k, draftStatsPrefix); k, v = c.Next() {
			if !bytes.Equal(v[8*tallyFieldsBefore13:], make([]byte, len(v)-8*tallyFieldsBefore13)) {
				t.Errorf("figure %q counts an outcome before the migration: %x", k, v)
			}
			short[string(k)] = bytes.Clone(v[:8*tallyFieldsBefore13])
		}
		for k, v := range short {
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		var counts [][]byte
		for k, _ := c.Seek(leadCountPrefix); k != nil && bytes.HasPrefix(k, leadCountPrefix); k, _ = c.Next() {
			counts = append(counts, bytes.Clone(k))
		}
		for _, k := range counts {
			if err := meta.Delete(k); err != nil {
				return err
			}
		}
		return meta.Put(keySchema, []byte("12"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	old, err := OpenFile(filepath.Join(dir, FileName), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); err != nil {
		t.Errorf("Check of the schema 12 file: %v", err)
	}
	if fs, err := old.DraftFigures(Everything(), t0); err != nil || len(fs) == 0 {
		t.Errorf("the schema 12 file's figures: %v, %v", fs, err)
	} else {
		var r int
		for _, f := range fs {
			r += f.Rejected
		}
		if r != 5 {
			t.Errorf("the schema 12 file's figures count %d rejected; want the 5 it counted", r)
		}
	}
	old.Close()

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ms := st.Migrations(); len(ms) != SchemaVersion-12 || ms[0].From != 12 || ms[0].To != 13 {
		t.Errorf("migrations run %+v, want 12 → 13 first", ms)
	}
	want := map[string]string{rej.ID: "", own.ID: OutcomeOwnReply, again.ID: OutcomeDraftAgain, gone.ID: OutcomeDraftAgain, closed.ID: OutcomeClosed}
	for id, was := range before {
		d, err := st.Draft(id)
		if err != nil {
			t.Fatalf("draft %s after the migration: %v", id, err)
		}
		if d.Decision != nil && d.Decision.Outcome != want[id] {
			t.Errorf("draft %s's outcome = %q, want %q", id, d.Decision.Outcome, want[id])
		}
		if d.Decision != nil {
			d.Decision.Outcome = ""
		}
		a, _ := json.Marshal(d)
		b, _ := json.Marshal(was)
		if !bytes.Equal(a, b) {
			t.Errorf("draft %s changed beyond its outcome:\n%s\nwas\n%s", id, a, b)
		}
	}
	fs, err := st.DraftFigures(Everything(), t0)
	if err != nil {
		t.Fatal(err)
	}
	var sum DraftFigure
	for _, f := range fs {
		if f.PromptVersion != "v1" {
			continue
		}
		sum.Drafts += f.Drafts
		sum.Rejected += f.Rejected
		sum.OwnReplies += f.OwnReplies
		sum.DraftedAgain += f.DraftedAgain
		sum.Closed += f.Closed
		sum.Waiting += f.Waiting
	}
	if sum != (DraftFigure{Drafts: 6, Waiting: 1, Rejected: 1, OwnReplies: 1, DraftedAgain: 2, Closed: 1}) {
		t.Errorf("figures after the migration %+v; want 6 drafts: 1 waiting, 1 rejected, 1 own reply, 2 drafted again, 1 closed", sum)
	}
	err = st.view(func(tx *Tx) error {
		if n := visibleLeadCount(tx, Everything(), "matched"); n != 2 {
			t.Errorf("matched leads counted after the migration = %d, want 2", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
}

// TestStuckCountFromLeadCounts: the stuck count read from the lead counts
// less the recent index keys equals a walk of the index from its start,
// for every threshold, for everyone and for a person limited to one
// channel, as leads enter, move between and stay in statuses; when the
// recent leads pass the scan bound the old walk answers instead; and
// Check (the cleanup) proves the counts against the leads.
func TestStuckCountFromLeadCounts(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	err := st.Update(ctx, func(tx *Tx) error {
		for i := range 60 {
			h := NewHandoff([]string{"web", "mail", "sms"}[i%3], fmt.Sprintf("c%d", i))
			h.Status, h.Since = []HandoffStatus{"received", "matched"}[i%2], at(i)
			if err := tx.PutHandoff(nil, &h); err != nil {
				return err
			}
			if i%5 == 0 { // moved on later: counted in its new status only
				old := h
				h.Status, h.Since = "replied", at(i+30)
				if err := tx.PutHandoff(&old, &h); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Visible{Everything(), OnlyChannels("web"), OnlyChannels("mail", "sms")} {
		for _, cut := range []int{-1, 0, 17, 45, 59, 200} {
			before := map[HandoffStatus]time.Time{"received": at(cut), "matched": at(cut + 3), "replied": at(cut)}
			err := st.view(func(tx *Tx) error {
				fast, ok := countStuckFromCounts(tx, v, before, 0)
				walked := 0
				for s, b := range before {
					prefix := append([]byte(s), 0)
					mine := func(k []byte) bool { _, key := splitTimeKey(k[len(prefix):]); return v.Key(key) }
					n, _ := countRange(tx.bucket(bucketHandoffsByStatus), prefix, append(bytes.Clone(prefix), timeKey(b, "")...), 0, mine)
					walked += n
				}
				if !ok || fast != walked {
					t.Errorf("stuck before minute %d for %+v: %d from the counts (ok %v), %d by the walk", cut, v, fast, ok, walked)
				}
				if cut == -1 {
					if _, ok := countStuckFromCounts(tx, v, before, 3); ok {
						t.Errorf("more recent leads than the scan bound were counted from the counts")
					}
					if n, more := countStuck(tx, v, before, 3); more || n != walked {
						t.Errorf("countStuck past the bound = %d, more %v; want the walk's %d", n, more, walked)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
