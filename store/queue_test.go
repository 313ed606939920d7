package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/testkit/corpus"
)

// pendingAt writes one waiting draft on channel whose customer wrote at
// wrote and which was drafted at created, with its event and lead, and
// returns its id.
func pendingAt(t testing.TB, st *Store, channel, msg string, wrote, created time.Time) string {
	t.Helper()
	var id string
	err := st.raw(func(btx engine.Tx) error {
		tx := &Tx{tx: btx}
		ev := newEvent(channel+":"+msg, wrote)
		ev.Channel, ev.Text = channel, corpus.Texts()[len(msg)%len(corpus.Texts())].Body
		if err := eventsTable.insert(tx, &ev); err != nil {
			return err
		}
		j := newJob(NewJob{ID: ulid.Make().String(), Kind: KindDraft, Key: ev.Key, MaxAttempts: 1}, ev.CorrelationID, ev.ReceivedAt)
		if _, err := receiveFixture(tx, ev, &j, nil); err != nil {
			return err
		}
		d := Draft{Version: 1, ID: DraftID(ev.ID), EventKey: ev.Key, Channel: ev.Channel, ConversationID: ev.ConversationID,
			CorrelationID: ev.CorrelationID, Status: DraftPending, Text: ev.Text, CreatedAt: created}
		id = d.ID
		return tx.InsertDraft(&d, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// walkQueue reads the whole window-ordered queue, limit drafts a page.
func walkQueue(t testing.TB, st *Store, f DraftFilter) []string {
	t.Helper()
	var out []string
	for range 100 {
		page, next, _, err := st.DraftsWhere(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			out = append(out, d.ID)
		}
		if next == nil {
			return out
		}
		if !QueueCursorOK(next) {
			t.Fatalf("the queue gave out a cursor it does not take: %q", next)
		}
		f.After = next
	}
	t.Fatal("the queue's pages never end")
	return nil
}

// TestQueueByWindow: across the whole queue, not a page, the drafts whose
// window is open come first by closing time (a 24-hour channel and a
// 7-day one merged), then the drafts of channels without a window oldest
// first, then the closed windows; every page size gives the same order,
// a filter's scan budget pages on without losing one, and a decided draft
// leaves the index in the transaction that decides it.
func TestQueueByWindow(t *testing.T) {
	st := openTest(t)
	now := t0.Add(10 * 24 * time.Hour)
	h := time.Hour
	// The web drafts are the oldest: in creation order they would lead.
	web1 := pendingAt(t, st, "web", "w1", now.Add(-90*h), now.Add(-90*h))
	web2 := pendingAt(t, st, "web", "w2", now.Add(-80*h), now.Add(-80*h))
	waOpenLate := pendingAt(t, st, "wa", "a1", now.Add(-2*h), now.Add(-2*h))      // closes in 22 h
	waOpenSoon := pendingAt(t, st, "wa", "a2", now.Add(-23*h), now.Add(-1*h))     // closes in 1 h (drafted late)
	waClosed := pendingAt(t, st, "wa", "a3", now.Add(-30*h), now.Add(-30*h))      // closed 6 h ago
	msOpen := pendingAt(t, st, "ms", "m1", now.Add(-7*24*h+3*h), now.Add(-100*h)) // closes in 3 h
	msLong := pendingAt(t, st, "ms", "m2", now.Add(-1*h), now.Add(-1*h))          // closes in 167 h
	msClosed := pendingAt(t, st, "ms", "m3", now.Add(-8*24*h), now.Add(-8*24*h))  // closed a day ago
	windows := map[string]time.Duration{"wa": 24 * h, "ms": 7 * 24 * h}
	want := []string{waOpenSoon, msOpen, waOpenLate, msLong, web1, web2, msClosed, waClosed}
	for _, limit := range []int{1, 2, 3, 50} {
		got := walkQueue(t, st, DraftFilter{Status: DraftPending, Limit: limit, Windows: windows, Now: now})
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: %v, want %v", limit, got, want)
		}
	}
	// A page read later keeps the first page's now: the draft that closed
	// in between is neither lost nor listed twice.
	page, next, _, err := st.DraftsWhere(DraftFilter{Status: DraftPending, Limit: 1, Windows: windows, Now: now})
	if err != nil || len(page) != 1 || page[0].ID != waOpenSoon {
		t.Fatalf("first page %v, %v", page, err)
	}
	rest := walkQueue(t, st, DraftFilter{Status: DraftPending, Limit: 2, Windows: windows, Now: now.Add(5 * h), After: next})
	if !slices.Equal(rest, want[1:]) {
		t.Errorf("the rest, read five hours later: %v, want %v", rest, want[1:])
	}
	// A filter with a scan budget of one ends pages early and still lists each once.
	keepMS := func(d Draft) bool { return d.Channel != "wa" }
	got := walkQueue(t, st, DraftFilter{Status: DraftPending, Limit: 2, Windows: windows, Now: now, Keep: keepMS, Scan: 1})
	if w := []string{msOpen, msLong, web1, web2, msClosed}; !slices.Equal(got, w) {
		t.Errorf("filtered: %v, want %v", got, w)
	}
	// No window anywhere: the order is the queue's as it always was.
	got = walkQueue(t, st, DraftFilter{Status: DraftPending, Limit: 3, Windows: map[string]time.Duration{}, Now: now})
	old, _, err := st.Drafts(DraftFilter{Status: DraftPending, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var oldIDs []string
	for _, d := range old {
		oldIDs = append(oldIDs, d.ID)
	}
	slices.SortStableFunc(oldIDs, func(a, b string) int { return strings.Compare(channelOf(t, st, a), channelOf(t, st, b)) })
	slices.Sort(got)
	slices.Sort(oldIDs)
	if !slices.Equal(got, oldIDs) {
		t.Errorf("without windows the queue lists %v, want every waiting draft %v", got, oldIDs)
	}
	// Deciding a draft takes it out of the order in the same transaction.
	if err := st.Update(t.Context(), func(tx *Tx) error {
		d, err := tx.Draft(waOpenSoon)
		if err != nil {
			return err
		}
		old := d
		d.Status, d.Decision = DraftRejected, &Decision{By: "ann", At: now, Reason: corpus.Texts()[0].Body}
		return tx.PutDraft(&old, &d)
	}); err != nil {
		t.Fatal(err)
	}
	got = walkQueue(t, st, DraftFilter{Status: DraftPending, Limit: 50, Windows: windows, Now: now})
	if !slices.Equal(got, want[1:]) {
		t.Errorf("after a rejection: %v, want %v", got, want[1:])
	}
	// A cursor the queue did not give out is refused in a sentence.
	if _, _, _, err := st.DraftsWhere(DraftFilter{Status: DraftPending, Windows: windows, After: []byte("pending_approval\x00xyz")}); err == nil || !strings.Contains(err.Error(), "is not a cursor of the queue") {
		t.Errorf("a made-up cursor: %v", err)
	}
}

func channelOf(t testing.TB, st *Store, id string) string {
	d, err := st.Draft(id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Channel
}

// TestCheckCatchesStalePendingEntry: an entry of idx_drafts_pending that
// no waiting draft explains, or a waiting draft without its entries, is
// damage Check names.
func TestCheckCatchesStalePendingEntry(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := pendingAt(t, st, "wa", "a1", t0, t0)
	if err := st.raw(func(btx engine.Tx) error {
		b := btx.Bucket(bucketDraftsPending)
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if k[0] == 'w' {
				return b.Delete(k)
			}
		}
		return errors.New("no 'w' entry")
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err == nil || !strings.Contains(err.Error(), id) {
		t.Errorf("Check with a waiting draft's entry missing: %v, want it to name draft %s", err, id)
	}
	st.Close()
}

// TestMigrationPendingIndex: a schema 12 file (its waiting drafts without
// last_inbound, no idx_drafts_pending) checks as what it is; at open
// migration 13 stamps each waiting draft from its turn's events and builds
// the index, every record is kept, the one draft that cannot be read is
// stepped over and named, and the queue is in window order.
func TestMigrationPendingIndex(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(48 * time.Hour)
	older := pendingAt(t, st, "wa", "a1", now.Add(-20*time.Hour), now.Add(-20*time.Hour))
	sooner := pendingAt(t, st, "wa", "a2", now.Add(-23*time.Hour), now.Add(-time.Minute))
	web := pendingAt(t, st, "web", "w1", now.Add(-30*time.Hour), now.Add(-30*time.Hour))
	broken := pendingAt(t, st, "wa", "a3", now.Add(-22*time.Hour), now.Add(-22*time.Hour))
	st.Close()
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketDraftsPending); err != nil {
			return err
		}
		drafts := tx.Bucket(bucketDrafts)
		var rewrite [][2][]byte
		_ = drafts.ForEach(func(k, v []byte) error {
			s := string(v)
			if i := strings.Index(s, `,"last_inbound":`); i >= 0 {
				j := strings.Index(s[i+1:], `",`) // the time's closing quote
				if j < 0 {
					j = strings.Index(s[i+1:], `"}`)
				}
				s = s[:i] + s[i+1+j+1:]
			}
			if string(k) == broken {
				s = `{"v":1,"id":` // a record cut short
			}
			rewrite = append(rewrite, [2][]byte{append([]byte(nil), k...), []byte(s)})
			return nil
		})
		for _, kv := range rewrite {
			if err := drafts.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{bucketEvents, bucketDrafts, bucketHandoffs, bucketJobs} {
			counts[string(b)] = tx.Bucket(b).Stats().KeyN
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("12"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	old, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); err == nil || !strings.Contains(err.Error(), broken) || strings.Contains(err.Error(), "idx_drafts_pending") {
		t.Errorf("Check of the schema 12 file: %v; want only the cut-short draft %s named", err, broken)
	}
	old.Close()
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ms := st.Migrations(); len(ms) == 0 || ms[len(ms)-1].To != SchemaVersion || ms[len(ms)-1].From != 13 {
		t.Errorf("migrations run %+v, want up to 13 → %d", ms, SchemaVersion)
	}
	if err := st.View(func(tx *Tx) error {
		for b, n := range counts {
			if got := tx.bucket([]byte(b)).Stats().KeyN; got != n {
				return fmt.Errorf("%s holds %d records after the migration, %d before", b, got, n)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := st.Check(); err == nil || !strings.Contains(err.Error(), broken) || strings.Contains(err.Error(), "idx_drafts_pending") {
		t.Errorf("Check after the migration: %v; want only the cut-short draft %s named", err, broken)
	}
	d, err := st.Draft(older)
	if err != nil || d.LastInbound == nil || !d.LastInbound.Equal(now.Add(-20*time.Hour)) {
		t.Errorf("draft %s after the migration: last_inbound %v, %v; want its event's time", older, d.LastInbound, err)
	}
	got := walkQueue(t, st, DraftFilter{Status: DraftPending, Limit: 1, Windows: map[string]time.Duration{"wa": 24 * time.Hour}, Now: now})
	if want := []string{sooner, older, web}; !slices.Equal(got, want) {
		t.Errorf("the queue after the migration: %v, want %v", got, want)
	}
}
