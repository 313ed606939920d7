package store

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Counts are the numbers the dashboard's navigation shows.
type Counts struct {
	DraftsWaiting       int `json:"drafts_waiting"`
	StuckLeads          int `json:"stuck_leads"`
	DeadJobs            int `json:"dead_jobs"`
	FailedReplies       int `json:"failed_replies"`
	NeedsReconciliation int `json:"needs_reconciliation"`
	EffectPending       int `json:"effect_pending"`
}

// DeadLetters is every item of the dead-letter list.
func (c Counts) DeadLetters() int { return c.DeadJobs + c.FailedReplies + c.NeedsReconciliation }

// Counts counts in one read transaction; stuckBefore gives, per status, the
// time before which a lead in it is stuck.
func (s *Store) Counts(stuckBefore map[HandoffStatus]time.Time) (Counts, error) {
	var c Counts
	err := s.view(func(tx *bolt.Tx) error {
		c.DraftsWaiting = countPrefix(tx.Bucket(bucketDraftsByStatus), append([]byte(DraftPending), 0), nil)
		for st, before := range stuckBefore {
			prefix := append([]byte(st), 0)
			c.StuckLeads += countPrefix(tx.Bucket(bucketHandoffsByStatus), prefix, append(bytes.Clone(prefix), timeKey(before, "")...))
		}
		c.DeadJobs = tx.Bucket(bucketJobsDead).Stats().KeyN
		ob := tx.Bucket(bucketOutboxByStatus)
		c.FailedReplies = countPrefix(ob, append([]byte(OutboxFailed), 0), nil)
		c.NeedsReconciliation = countPrefix(ob, append([]byte(OutboxNeedsReconciliation), 0), nil)
		c.EffectPending = countPrefix(ob, append([]byte(OutboxEffectPending), 0), nil)
		return nil
	})
	return c, err
}

// countPrefix counts the keys with prefix, stopping at limit (exclusive) when given.
func countPrefix(b *bolt.Bucket, prefix, limit []byte) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if limit != nil && bytes.Compare(k, limit) >= 0 {
			break
		}
		n++
	}
	return n
}
