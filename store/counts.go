package store

import (
	"encoding/binary"
	"fmt"
)

// Counts kept in the meta bucket, moved in the same transaction as the
// records they count, so the navigation's numbers cost one read however
// many records there are. store.Check recounts them from the indexes.

// draftCountKey names the count of drafts in one status.
func draftCountKey(s DraftStatus) []byte { return []byte("count:drafts:" + string(s)) }

// addCount adds delta to the count at key.
func addCount(tx *Tx, key []byte, delta int) error {
	n := count(tx, key) + delta
	if n < 0 {
		return fmt.Errorf("count %s would go below zero", key)
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(n))
	return tx.bucket(bucketMeta).Put(key, buf[:])
}

// count reads the count at key (0 when absent).
func count(tx *Tx, key []byte) int {
	v := tx.bucket(bucketMeta).Get(key)
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// recountDrafts sets the per-status draft counts from idx_drafts_by_status:
// migration 1 (databases from before the counts) and Check use it.
func recountDrafts(tx *Tx) map[DraftStatus]int {
	out := map[DraftStatus]int{}
	for _, st := range []DraftStatus{DraftPending, DraftApproved, DraftRejected} {
		out[st] = countPrefix(tx.bucket(bucketDraftsByStatus), append([]byte(st), 0), nil)
	}
	return out
}
