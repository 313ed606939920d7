package store

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestCountsForRefusesAnUnreadableOutboxRow: a narrower view counts the
// failed replies by reading each row; an index entry whose row cannot be
// read fails the counts, as the drafts' and dead letters' walks do,
// instead of being left out of them silently.
func TestCountsForRefusesAnUnreadableOutboxRow(t *testing.T) {
	st := openTest(t)
	for _, status := range []OutboxStatus{OutboxFailed, OutboxNeedsReconciliation, OutboxEffectPending} {
		t.Run(string(status), func(t *testing.T) {
			k := append(append([]byte(status), 0), "01NOSUCHROW"...)
			if err := st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutboxByStatus).Put(k, nil) }); err != nil {
				t.Fatal(err)
			}
			_, err := st.CountsFor(OnlyChannels("web"), nil)
			if err == nil || !strings.Contains(err.Error(), "01NOSUCHROW") {
				t.Errorf("counts over a dangling %s entry: err = %v, want one naming the row", status, err)
			}
			if err := st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutboxByStatus).Delete(k) }); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CountsFor(OnlyChannels("web"), nil); err != nil {
				t.Errorf("counts after the repair: %v", err)
			}
		})
	}
}
