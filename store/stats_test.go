package store

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
)

// figureDraft records an event on channel at at and stores its draft,
// pending, with prompt version and cost.
func figureDraft(t *testing.T, st *Store, channel, id string, at time.Time, version string, cost float64) Draft {
	t.Helper()
	ev := newEvent(channel+":"+id, at)
	ev.Channel, ev.ConversationID = channel, "conv-"+id
	if _, err := st.RecordEvent(context.Background(), ev, draftJobFor(ev.Key, 3)); err != nil {
		t.Fatal(err)
	}
	d := Draft{
		ID: DraftID(ev.ID), EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: channel, ConversationID: ev.ConversationID,
		Status: DraftPending, Text: "hi", Drafter: "openai", PromptVersion: version, CreatedAt: at.Add(time.Second),
		Version: 1, Cost: cost, Currency: "USD", ExecutionID: ulid.Make().String(),
	}
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.InsertDraft(&d, ev) }); err != nil {
		t.Fatal(err)
	}
	return d
}

// changeDraft rewrites draft id through PutDraft with edit applied.
func changeDraft(t *testing.T, st *Store, id string, edit func(*Draft)) {
	t.Helper()
	err := st.Update(context.Background(), func(tx *Tx) error {
		d, err := tx.Draft(id)
		if err != nil {
			return err
		}
		old := d
		edit(&d)
		return tx.PutDraft(&old, &d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// figuresOf is the figures v sees since since, as one line each.
func figuresOf(t *testing.T, st *Store, v Visible, since time.Time) []string {
	t.Helper()
	fs, err := st.DraftFigures(v, since)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s %s %s: drafts %d waiting %d unchanged %d edited %d rejected %d cost %.4f",
			f.Day, f.Channel, f.PromptVersion, f.Currency, f.Drafts, f.Waiting, f.Unchanged, f.Edited, f.Rejected, f.Cost))
	}
	return out
}

// TestDraftFiguresMoveWithTheDrafts: every write of a draft — insert,
// approval (edited or not), rejection, supersession, a change of cost, a
// deletion — moves the figures in its own transaction; a person's draft
// is not counted; a person limited to one channel sees that channel's
// figures alone; and Check (the test's cleanup) proves the figures and
// the per-channel counts against a scan of the drafts.
func TestDraftFiguresMoveWithTheDrafts(t *testing.T) {
	st := openTest(t)
	day1, day2 := t0, t0.Add(24*time.Hour)
	a1 := figureDraft(t, st, "web", "a1", day1, "v1", 0.25)
	a2 := figureDraft(t, st, "web", "a2", day1, "v1", 0.5)
	a3 := figureDraft(t, st, "web", "a3", day2, "v2", 1)
	b1 := figureDraft(t, st, "mail", "b1", day2, "v2", 2)
	p := figureDraft(t, st, "web", "p1", day2, "person", 0)
	changeDraft(t, st, p.ID, func(d *Draft) { d.Drafter = "person" }) // a person's draft leaves the figures

	changeDraft(t, st, a1.ID, func(d *Draft) {
		d.Status, d.Decision = DraftApproved, &Decision{By: "ann", At: day1, Edited: true}
	})
	changeDraft(t, st, a2.ID, func(d *Draft) {
		d.Status, d.Decision = DraftApproved, &Decision{By: "ann", At: day1}
	})
	changeDraft(t, st, a3.ID, func(d *Draft) { d.Status, d.Decision = DraftRejected, &Decision{By: "ann", At: day2} })
	changeDraft(t, st, b1.ID, func(d *Draft) { d.Status = DraftSuperseded })
	changeDraft(t, st, b1.ID, func(d *Draft) { d.Cost = 2.125 })

	want := []string{
		"2026-11-29 web v1 USD: drafts 2 waiting 0 unchanged 1 edited 1 rejected 0 cost 0.7500",
		"2026-11-30 mail v2 USD: drafts 1 waiting 0 unchanged 0 edited 0 rejected 0 cost 2.1250",
		"2026-11-30 web v2 USD: drafts 1 waiting 0 unchanged 0 edited 0 rejected 1 cost 1.0000",
	}
	if got := figuresOf(t, st, Everything(), day1); !slices.Equal(got, want) {
		t.Errorf("figures:\n%q\nwant\n%q", got, want)
	}
	if got := figuresOf(t, st, Everything(), day2); !slices.Equal(got, want[1:]) {
		t.Errorf("figures since day 2:\n%q\nwant\n%q", got, want[1:])
	}
	if got := figuresOf(t, st, OnlyChannels("mail"), day1); !slices.Equal(got, want[1:2]) {
		t.Errorf("figures of mail alone:\n%q\nwant\n%q", got, want[1:2])
	}
	if got := figuresOf(t, st, Visible{}, day1); len(got) != 0 {
		t.Errorf("figures seen by nobody: %q", got)
	}

	// The per-channel counts: what a limited person's waiting drafts read.
	waiting := func(v Visible) int {
		c, err := st.CountsFor(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.DraftsWaiting
	}
	changeDraft(t, st, a1.ID, func(d *Draft) { d.Status, d.Decision = DraftPending, nil }) // undone
	if got := waiting(OnlyChannels("web")); got != 2 {                                     // a1 and the person's p1
		t.Errorf("web's waiting drafts = %d, want 2", got)
	}
	if got := waiting(OnlyChannels("mail")); got != 0 {
		t.Errorf("mail's waiting drafts = %d, want 0", got)
	}
	if got := waiting(Everything()); got != 2 {
		t.Errorf("every waiting draft = %d, want 2", got)
	}

	// Retention's delete takes a draft out of the figures.
	err := st.Update(context.Background(), func(tx *Tx) error {
		d, err := tx.Draft(a2.ID)
		if err != nil {
			return err
		}
		return tx.deleteDraft(&d)
	})
	if err != nil {
		t.Fatal(err)
	}
	want[0] = "2026-11-29 web v1 USD: drafts 1 waiting 1 unchanged 0 edited 0 rejected 0 cost 0.2500"
	if got := figuresOf(t, st, Everything(), day1); !slices.Equal(got, want) {
		t.Errorf("figures after a delete:\n%q\nwant\n%q", got, want)
	}
}

// TestCheckCatchesWrongFigure: a figure that disagrees with the drafts is
// named, and so is a key under the figures' prefix that is not one.
func TestCheckCatchesWrongFigure(t *testing.T) {
	st := openTest(t)
	d := figureDraft(t, st, "web", "w1", t0, "v1", 0.5)
	key, tally := figureFieldsOf(&d).tally()
	for _, bad := range []struct {
		key, value []byte
		want       string // what Check says
	}{
		{key, draftTally{1, 1, 0, 0, 0, costUnits(0.6)}.bytes(), "the drafting figure of " + t0.Format(time.DateOnly) + ", channel web"},
		{key, []byte("short"), "is not a drafting figure"},
		{append(bytes.Clone(draftStatsPrefix), "garbage"...), tally.bytes(), "is not a drafting figure"},
		{channelDraftCountKey("web", DraftPending), make([]byte, 8), "the count of channel web's pending_approval drafts says 0, the drafts bucket holds 1"},
		{append(bytes.Clone(channelDraftCountPrefix), "web"...), make([]byte, 8), "is not a channel's draft count"},
		{outboxCountKey(OutboxFailed, "web"), []byte{0, 0, 0, 0, 0, 0, 0, 1}, `the count of channel "web"'s open failed replies says 1, the outbox holds 0`},
		{jobCountKey("draft", JobRunning), []byte{0, 0, 0, 0, 0, 0, 0, 5}, "the count of draft jobs running says 5, the jobs bucket holds 0"},
		{append(bytes.Clone(jobCountPrefix), "draft"...), make([]byte, 8), "is not a job count"},
	} {
		var saved []byte
		err := st.raw(func(tx engine.Tx) error {
			saved = append([]byte(nil), tx.Bucket(bucketMeta).Get(bad.key)...)
			return tx.Bucket(bucketMeta).Put(bad.key, bad.value)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Check(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Check with meta %q = %x: %v, want an error saying %q", bad.key, bad.value, err, bad.want)
		}
		err = st.raw(func(tx engine.Tx) error {
			if saved == nil {
				return tx.Bucket(bucketMeta).Delete(bad.key)
			}
			return tx.Bucket(bucketMeta).Put(bad.key, saved)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrationFillsDraftFigures: a schema 10 file, from before the
// figures were kept, checks as it is, and gets the figures and the
// per-channel counts at open, from its drafts.
func TestMigrationFillsDraftFigures(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	figureDraft(t, st, "web", "m1", t0, "v1", 0.5)
	d := figureDraft(t, st, "mail", "m2", t0, "v1", 1)
	changeDraft(t, st, d.ID, func(d *Draft) { d.Status, d.Decision = DraftApproved, &Decision{By: "ann", At: t0} })
	want := figuresOf(t, st, Everything(), t0)
	if len(want) != 2 {
		t.Fatalf("figures before: %q", want)
	}
	a, err := st.ApproveDraft(context.Background(), figureDraft(t, st, "mail", "m3", t0, "v1", 0).ID,
		Approval{Decision: Decision{By: "x", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(context.Background(), func(tx *Tx) error {
		o, err := tx.Outbox(a.Outbox.ID)
		if err != nil {
			return err
		}
		old := o
		o.Status = OutboxFailed
		return tx.PutOutbox(&old, &o)
	})
	if err != nil {
		t.Fatal(err)
	}
	want = figuresOf(t, st, Everything(), t0)
	st.Close()

	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		var keys [][]byte
		c := meta.Cursor()
		for _, prefix := range [][]byte{draftStatsPrefix, channelDraftCountPrefix, outboxCountPrefix} {
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				keys = append(keys, append([]byte(nil), k...))
			}
		}
		for _, k := range keys {
			if err := meta.Delete(k); err != nil {
				return err
			}
		}
		return meta.Put(keySchema, []byte("10"))
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
		t.Errorf("Check of a schema 10 file: %v", err)
	}
	old.Close()

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ms := st.Migrations(); len(ms) == 0 || ms[0].From != 10 || ms[0].To != 11 || ms[len(ms)-1].To != SchemaVersion {
		t.Errorf("migrations run %+v, want 10 → 11 first, up to %d", ms, SchemaVersion)
	}
	if got := figuresOf(t, st, Everything(), t0); !slices.Equal(got, want) {
		t.Errorf("figures after the migration:\n%q\nwant\n%q", got, want)
	}
	if c, err := st.CountsFor(OnlyChannels("web"), nil); err != nil || c.DraftsWaiting != 1 {
		t.Errorf("web's waiting drafts after the migration = %d (%v), want 1", c.DraftsWaiting, err)
	}
	if c, err := st.CountsFor(OnlyChannels("mail"), nil); err != nil || c.FailedReplies != 1 {
		t.Errorf("mail's failed replies after the migration = %d (%v), want 1", c.FailedReplies, err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
}

// FuzzDraftFigureForm: a figure's stored key and value read back as what
// was written, whatever the channel, prompt version and currency hold.
func FuzzDraftFigureForm(f *testing.F) {
	f.Add("2026-11-29", "web", "v1", "USD", int64(3), int64(420000))
	f.Add("2026-12-01", "mail-2", "v\x002", "", int64(1), int64(0))
	f.Fuzz(func(t *testing.T, day, channel, version, currency string, drafts, cost int64) {
		if len(day) != len(time.DateOnly) || strings.ContainsRune(channel, 0) || strings.ContainsRune(currency, 0) {
			t.Skip() // a day is fixed-width; channel names and currencies hold no 0x00
		}
		k := draftStatsKey(day, channel, version, currency)
		got, ok := parseDraftStatsKey(k)
		if !ok || got.Day != day || got.Channel != channel || got.PromptVersion != version || got.Currency != currency {
			t.Errorf("key %q read back as %+v (%v)", k, got, ok)
		}
		tally := draftTally{drafts, 0, drafts / 2, 1, 0, cost}
		if back, ok := readTally(tally.bytes()); !ok || back != tally {
			t.Errorf("tally %v read back as %v (%v)", tally, back, ok)
		}
	})
}
