package store

import (
	"bytes"
	"fmt"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// The approval queue in reply-window order, across the whole queue (not a
// page at a time): idx_drafts_pending keeps every waiting draft twice,
//
//	'w' channel 0x00 customer's last message (8 bytes BE) | draftID -> ""
//	'c' channel 0x00 createdAt (8 bytes BE) | draftID -> ""
//
// derived from the draft alone (its LastInbound, stamped when it is
// stored), so the transactions that save, decide or supersede a draft
// move its entries with it (tables.go) and Check proves them. Which
// channels have a window, and how long it lasts, is the config's, not the
// file's: the caller names them (DraftFilter.Windows), and within one
// channel every window lasts as long, so the customer's last message
// orders its drafts by closing time. The queue is then three runs, fixed
// at the first page's now (carried in the cursor, so a walk neither loses
// nor repeats a draft whose window closes while it pages):
//
//  1. open windows, soonest to close first (a merge over the windowed
//     channels, each seeked to where its windows still open);
//  2. the drafts of channels without a window, oldest first, as the
//     queue always listed them;
//  3. closed windows, by when they closed: they wait for a template or
//     another channel, not for haste.

// pendingKey is one entry of idx_drafts_pending.
func pendingKey(family byte, channel string, at time.Time, id string) []byte {
	k := make([]byte, 0, 1+len(channel)+1+8+len(id))
	k = append(append(append(k, family), channel...), 0)
	return append(k, timeKey(epochAtLeast(at), id)...)
}

// epochAtLeast is at, or the Unix epoch for a time before it (a zero
// time): fixed-width keys need a time UnixNano can represent, and the
// epoch sorts first, as a window that closed long ago.
func epochAtLeast(at time.Time) time.Time {
	if at.Before(time.Unix(0, 0)) {
		return time.Unix(0, 0)
	}
	return at
}

// draftsPending is idx_drafts_pending (from schema 14).
var draftsPending = index[Draft]{
	bucket: bucketDraftsPending, ref: refAfter(0, 8),
	keys: func(d *Draft) [][]byte {
		if d.Status != DraftPending {
			return nil
		}
		return [][]byte{pendingKey('c', d.Channel, d.CreatedAt, d.ID), pendingKey('w', d.Channel, d.Wrote(), d.ID)}
	},
}

// Wrote is when the customer last wrote in the turn d answers
// (LastInbound); the zero time when that could not be read, which orders
// d as a window that closed long ago.
func (d Draft) Wrote() time.Time {
	if d.LastInbound == nil {
		return time.Time{}
	}
	return *d.LastInbound
}

// lastInboundTx is when the customer last wrote in the turn d answers:
// the latest of its events' Wrote. Events that cannot be read are left
// out; none readable: nil (a window that closed: see Wrote).
func lastInboundTx(tx *Tx, d *Draft) *time.Time {
	var last *time.Time
	for _, key := range d.AnsweredEvents() {
		ev, err := tx.EventByKey(key)
		if err != nil {
			continue
		}
		if at := ev.Wrote(); last == nil || at.After(*last) {
			last = &at
		}
	}
	return last
}

// queueCursor is a position in the window-ordered queue, after the status
// prefix: 'q', the walk's now (8 bytes), its run ('1' to '3') and the last
// draft read there (its order time, 8 bytes, and id).
type queueCursor struct {
	now  time.Time
	run  byte
	at   time.Time
	id   string
	none bool // no position yet in run: it starts at its beginning
}

func (c queueCursor) encode(status DraftStatus) []byte {
	out := append(append([]byte(status), 0, 'q'), timeKey(c.now, "")...)
	return append(append(out, c.run), timeKey(c.at, c.id)...)
}

func decodeQueueCursor(b []byte) (queueCursor, bool) {
	if len(b) < 1+8+1+8 || b[0] != 'q' {
		return queueCursor{}, false
	}
	now, _ := splitTimeKey(b[1:9])
	at, id := splitTimeKey(b[10:])
	c := queueCursor{now: now, run: b[9], at: at, id: id}
	return c, c.run >= '1' && c.run <= '3' && id != ""
}

// QueueCursorOK reports whether after, a cursor of the pending drafts,
// is one the window-ordered queue gave out (DraftFilter.Windows).
func QueueCursorOK(after []byte) bool {
	prefix := []byte(string(DraftPending) + "\x00")
	if !bytes.HasPrefix(after, prefix) {
		return false
	}
	_, ok := decodeQueueCursor(after[len(prefix):])
	return ok
}

// lane is one channel's walk over its family of idx_drafts_pending, its
// entries ordered by their time plus shift (the channel's window).
type lane struct {
	c      engine.Cursor
	prefix []byte
	shift  time.Duration
	stop   time.Time // entries whose time is after stop end the lane; zero: none
	k      []byte
}

// head is the lane's current entry's order time and id; ok false once it ran out.
func (l *lane) head() (time.Time, string, bool) {
	if l.k == nil || !bytes.HasPrefix(l.k, l.prefix) {
		l.k = nil
		return time.Time{}, "", false
	}
	at, id := splitTimeKey(l.k[len(l.prefix):])
	if !l.stop.IsZero() && at.After(l.stop) {
		l.k = nil
		return time.Time{}, "", false
	}
	return at.Add(l.shift), id, true
}

// queueWalk merges lanes run by run.
type queueWalk struct {
	tx      *Tx
	windows map[string]time.Duration
	cur     queueCursor
	lanes   []*lane
}

// lanesOf opens the lanes of run from position cur (none: its start).
func (w *queueWalk) open(run byte, from *queueCursor) {
	w.lanes = w.lanes[:0]
	b := tx2bucket(w.tx)
	add := func(family byte, ch string, shift time.Duration, start, stop time.Time) {
		prefix := append(append([]byte{family}, ch...), 0)
		l := &lane{c: b.Cursor(), prefix: prefix, shift: shift, stop: stop}
		seek := append(bytes.Clone(prefix), timeKey(epochAtLeast(start), "")...)
		if from != nil && !from.none {
			if t := from.at.Add(-shift); !t.Before(start) {
				seek = append(bytes.Clone(prefix), timeKey(epochAtLeast(t), from.id)...)
			}
		}
		l.k, _ = l.c.Seek(seek)
		if from != nil && !from.none {
			// Step past the cursor's own entry and anything ordered before it.
			for {
				at, id, ok := l.head()
				if !ok || at.After(from.at) || at.Equal(from.at) && id > from.id {
					break
				}
				l.k, _ = l.c.Next()
			}
		}
		w.lanes = append(w.lanes, l)
	}
	now := w.cur.now
	switch run {
	case '1', '3':
		for ch, d := range w.windows {
			if d <= 0 {
				continue
			}
			if run == '1' {
				add('w', ch, d, now.Add(-d).Add(time.Nanosecond), time.Time{})
			} else {
				add('w', ch, d, time.Time{}, now.Add(-d))
			}
		}
	case '2':
		// Every channel with waiting drafts and no window: found by
		// skipping from one channel's entries to the next one's.
		c := b.Cursor()
		for k, _ := c.Seek([]byte{'c'}); k != nil && k[0] == 'c'; {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				break
			}
			ch := string(k[1:i])
			if w.windows[ch] <= 0 {
				add('c', ch, 0, time.Time{}, time.Time{})
			}
			k, _ = c.Seek(append(append([]byte{'c'}, ch...), 1))
		}
	}
}

func tx2bucket(tx *Tx) engine.Bucket { return tx.bucket(bucketDraftsPending) }

// next is the walk's next draft: its run, order time and id; ok false at
// the end of the queue.
func (w *queueWalk) next() (queueCursor, bool) {
	for {
		best := -1
		var bat time.Time
		var bid string
		for i, l := range w.lanes {
			at, id, ok := l.head()
			if ok && (best < 0 || at.Before(bat) || at.Equal(bat) && id < bid) {
				best, bat, bid = i, at, id
			}
		}
		if best >= 0 {
			return queueCursor{now: w.cur.now, run: w.cur.run, at: bat, id: bid}, true
		}
		if w.cur.run == '3' {
			return queueCursor{}, false
		}
		w.cur.run++
		w.cur.none = true
		w.open(w.cur.run, nil)
	}
}

// advance moves past the entry next returned.
func (w *queueWalk) advance() {
	var best *lane
	var bat time.Time
	var bid string
	for _, l := range w.lanes {
		at, id, ok := l.head()
		if ok && (best == nil || at.Before(bat) || at.Equal(bat) && id < bid) {
			best, bat, bid = l, at, id
		}
	}
	if best != nil {
		best.k, _ = best.c.Next()
	}
}

// pendingByWindow is DraftsWhere for the pending drafts in window order.
func (s *Store) pendingByWindow(f DraftFilter) (page []Draft, next []byte, partial bool, err error) {
	cur := queueCursor{now: f.Now, run: '1', none: true}
	if f.After != nil {
		prefix := len(DraftPending) + 1
		c, ok := decodeQueueCursor(f.After[min(prefix, len(f.After)):])
		if !ok || !bytes.HasPrefix(f.After, []byte(string(DraftPending)+"\x00")) {
			return nil, nil, false, fmt.Errorf("store: list drafts: %q is not a cursor of the queue", f.After)
		}
		cur = c
	}
	if cur.now.IsZero() {
		cur.now = time.Now()
	}
	page = []Draft{}
	err = s.view(func(tx *Tx) error {
		w := &queueWalk{tx: tx, windows: f.Windows, cur: cur}
		start := cur
		w.open(cur.run, &start)
		scanned := 0
		var last []byte
		for {
			at, ok := w.next()
			if !ok {
				return nil
			}
			full := len(page) == f.Limit
			if full || f.Keep != nil && f.Scan > 0 && scanned == f.Scan {
				next, partial = last, !full
				return nil
			}
			w.advance()
			last = at.encode(DraftPending)
			scanned++
			d, err := tx.Draft(at.id)
			if tx.skip(err, nil) { // listed apart (Store.Unreadable); the page goes on
				continue
			}
			if err != nil {
				return fmt.Errorf("idx_drafts_pending points at draft %s: %w", at.id, err)
			}
			if f.Keep == nil || f.Keep(d) {
				page = append(page, d)
			}
		}
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("store: list drafts: %w", err)
	}
	return page, next, partial, nil
}

// migratePendingIndex is migration 13: it stamps every waiting draft with
// when its customer last wrote (LastInbound, from the events of its turn)
// and writes idx_drafts_pending from the drafts. A draft that cannot be
// read gets no entries and is named by Check, as Store.Unreadable lists
// it; the migration goes on.
func migratePendingIndex(tx *Tx) error {
	if _, err := tx.tx.CreateBucketIfNotExists(bucketDraftsPending); err != nil {
		return err
	}
	var ids []string
	_ = tx.bucket(bucketDraftsByStatus).ForEach(func(k, _ []byte) error {
		if prefix := string(DraftPending) + "\x00"; bytes.HasPrefix(k, []byte(prefix)) {
			_, id := splitTimeKey(k[len(prefix):])
			ids = append(ids, id)
		}
		return nil
	})
	for _, id := range ids {
		d, err := tx.Draft(id)
		if tx.skip(err, nil) {
			continue
		}
		if err != nil {
			return err
		}
		old := d
		if d.LastInbound == nil {
			d.LastInbound = lastInboundTx(tx, &d)
		}
		if err := draftsTable.put(tx, &old, &d); err != nil {
			return err
		}
		// put moves only what changed: a draft stamped before has its
		// entries written here.
		for _, k := range draftsPending.keys(&d) {
			if err := tx.bucket(bucketDraftsPending).Put(k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// QueueLater reports whether a comes after b in the window-ordered queue
// of windows at now (DraftFilter.Windows): the order the pages list.
func QueueLater(a, b Draft, windows map[string]time.Duration, now time.Time) bool {
	ra, ta := queuePlace(a, windows, now)
	rb, tb := queuePlace(b, windows, now)
	switch {
	case ra != rb:
		return ra > rb
	case !ta.Equal(tb):
		return ta.After(tb)
	}
	return a.ID > b.ID
}

// queuePlace is d's run in the queue and its time there.
func queuePlace(d Draft, windows map[string]time.Duration, now time.Time) (byte, time.Time) {
	w := windows[d.Channel]
	if w <= 0 {
		return '2', epochAtLeast(d.CreatedAt)
	}
	closes := epochAtLeast(d.Wrote()).Add(w)
	if closes.After(now) {
		return '1', closes
	}
	return '3', closes
}
