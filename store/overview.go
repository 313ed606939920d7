package store

import (
	"bytes"
	"fmt"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// Counts are the numbers the dashboard's navigation shows.
type Counts struct {
	DraftsWaiting int `json:"drafts_waiting"`
	StuckLeads    int `json:"stuck_leads"`
	// StuckMore says StuckLeads is a floor: CountsFor read StuckScan leads
	// of a status and more were stuck (Counts, for the gauge, reads them all).
	StuckMore           bool `json:"stuck_more,omitempty"`
	DeadJobs            int  `json:"dead_jobs"`
	FailedReplies       int  `json:"failed_replies"`
	NeedsReconciliation int  `json:"needs_reconciliation"`
	EffectPending       int  `json:"effect_pending"`
}

// DeadLetters is the dead-letter list as the dashboard shows it: the
// discarded jobs and the failed replies. A reply that needs reconciliation
// is counted once, under NeedsReconciliation (the reconcile page), never
// among the dead letters too.
func (c Counts) DeadLetters() int { return c.DeadJobs + c.FailedReplies }

// Counts counts in one read transaction; stuckBefore gives, per status, the
// time before which a lead in it is stuck.
func (s *Store) Counts(stuckBefore map[HandoffStatus]time.Time) (Counts, error) {
	var c Counts
	err := s.view(func(tx *Tx) error {
		c = countAll(tx, stuckBefore)
		return nil
	})
	return c, err
}

// countAll is Counts inside tx; no stuckBefore counts no stuck lead.
func countAll(tx *Tx, stuckBefore map[HandoffStatus]time.Time) Counts {
	var c Counts
	c.DraftsWaiting = count(tx, draftCountKey(DraftPending))
	c.StuckLeads, _ = countStuck(tx, Everything(), stuckBefore, 0)
	c.DeadJobs = tx.bucket(bucketJobsDead).Stats().KeyN
	all := Everything()
	c.FailedReplies = visibleOutboxCount(tx, all, OutboxFailed) // kept in meta: outboxcounts.go
	c.NeedsReconciliation = visibleOutboxCount(tx, all, OutboxNeedsReconciliation)
	c.EffectPending = visibleOutboxCount(tx, all, OutboxEffectPending)
	return c
}

// StuckScan bounds the stuck leads CountsFor reads per status: the index
// has no count of a time range, so the dashboard's number walks the range,
// and a range past this many is shown as "at least".
const StuckScan = 5000

// countStuck counts the leads v sees of each status of stuckBefore stuck
// before its time, reading at most scan index keys a status (0: all);
// more is true when a status had more. The channel is in the lead key, so
// no lead is decoded.
func countStuck(tx *Tx, v Visible, stuckBefore map[HandoffStatus]time.Time, scan int) (n int, more bool) {
	if n, ok := countStuckFromCounts(tx, v, stuckBefore, scan); ok { // from the lead counts: stats.go
		return n, false
	}
	for st, before := range stuckBefore {
		prefix := append([]byte(st), 0)
		var mine func(k []byte) bool
		if !v.all {
			mine = func(k []byte) bool { _, key := splitTimeKey(k[len(prefix):]); return v.Key(key) }
		}
		got, cut := countRange(tx.bucket(bucketHandoffsByStatus), prefix, append(bytes.Clone(prefix), timeKey(before, "")...), scan, mine)
		n, more = n+got, more || cut
	}
	return n, more
}

// countPrefix counts the keys with prefix, stopping at limit (exclusive) when given.
func countPrefix(b engine.Bucket, prefix, limit []byte) int {
	n, _ := countRange(b, prefix, limit, 0, nil)
	return n
}

// countRange counts the keys with prefix before limit (nil: all of them)
// that keep takes (nil: every one), reading at most scan keys (0: all);
// more is true when it stopped there.
func countRange(b engine.Bucket, prefix, limit []byte, scan int, keep func(k []byte) bool) (n int, more bool) {
	c := b.Cursor()
	read := 0
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if limit != nil && bytes.Compare(k, limit) >= 0 {
			break
		}
		if scan > 0 && read == scan {
			return n, true
		}
		read++
		if keep == nil || keep(k) {
			n++
		}
	}
	return n, false
}

// JobCount is how many jobs of a kind are in a state.
type JobCount struct {
	Kind  string
	State JobState
	N     int
}

// JobCounts counts the jobs that are waiting, running or discarded (and not
// yet dismissed), by kind: the live part of the queue, read from the counts
// in meta (a few keys per kind), not from the jobs. Kinds and states with
// no job are left out.
func (s *Store) JobCounts() ([]JobCount, error) {
	var out []JobCount
	err := s.view(func(tx *Tx) error {
		for k, n := range storedJobCounts(tx) {
			switch st := JobState(k[1]); {
			case n == 0, st != JobAvailable && st != JobRunning && st != JobRetryable && st != JobDiscarded:
			default:
				out = append(out, JobCount{Kind: k[0], State: st, N: n})
			}
		}
		return nil
	})
	return out, err
}

// OutboxCounts counts outbox rows by status.
func (s *Store) OutboxCounts() (map[OutboxStatus]int, error) {
	out := map[OutboxStatus]int{}
	err := s.view(func(tx *Tx) error {
		return tx.bucket(bucketOutboxByStatus).ForEach(func(k, _ []byte) error {
			if i := bytes.IndexByte(k, 0); i > 0 {
				out[OutboxStatus(k[:i])]++
			}
			return nil
		})
	})
	return out, err
}

// StuckLeadsFor lists up to limit leads v sees that entered status before
// before (stuck), longest waiting first, reading at most StuckScan index
// keys: the key names the lead's channel, so another client's lead is
// never decoded, and a person limited to a small client among large ones
// costs the overview no walk of everyone's stuck leads. A lead that cannot
// be read is stepped over (the store lists it apart).
func (s *Store) StuckLeadsFor(v Visible, status HandoffStatus, before time.Time, limit int) ([]Handoff, error) {
	out := []Handoff{}
	err := s.view(func(tx *Tx) error {
		out = out[:0]
		prefix := append([]byte(status), 0)
		end := append(bytes.Clone(prefix), timeKey(before, "")...)
		c := tx.bucket(bucketHandoffsByStatus).Cursor()
		read := 0
		for k, _ := c.Seek(prefix); k != nil && bytes.Compare(k, end) < 0 && read < StuckScan && len(out) < limit; k, _ = c.Next() {
			read++
			_, key := splitTimeKey(k[len(prefix):])
			if !v.Key(key) {
				continue
			}
			h, err := tx.Handoff(key)
			if tx.skip(err, nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("idx_handoffs_by_status names lead %s: %w", key, err)
			}
			out = append(out, h)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: stuck leads: %w", err)
	}
	return out, nil
}
