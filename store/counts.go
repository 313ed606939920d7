package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/handoff/handoff/store/engine"
)

// Counts kept in the meta bucket, moved in the same transaction as the
// records they count, so the navigation's numbers cost one read however
// many records there are. store.Check recounts them from the indexes.

// draftCountKey names the count of drafts in one status.
func draftCountKey(s DraftStatus) []byte { return []byte("count:drafts:" + string(s)) }

// addCount adds delta to the count at key: on an engine.Adder without
// reading it (PostgreSQL, whose writers would otherwise all conflict on
// it).
func addCount(tx *Tx, key []byte, delta int) error {
	if a, ok := tx.bucket(bucketMeta).(engine.Adder); ok {
		err := a.Add(key, int64(delta))
		if errors.Is(err, engine.ErrBelowZero) {
			return fmt.Errorf("count %q would go below zero", key)
		}
		return err
	}
	n := count(tx, key) + delta
	if n < 0 {
		return fmt.Errorf("count %q would go below zero", key)
	}
	return putCount(tx, key, n)
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
	for _, st := range DraftStatuses {
		out[st] = countPrefix(tx.bucket(bucketDraftsByStatus), append([]byte(st), 0), nil)
	}
	return out
}

// jobCountPrefix starts every per-kind, per-state job count in meta.
var jobCountPrefix = []byte("count:jobs:")

// jobCountKey names the count of jobs of kind in state.
func jobCountKey(kind string, s JobState) []byte {
	return append(append(append(bytes.Clone(jobCountPrefix), kind...), 0), s...)
}

// moveJobCount moves one job from old's kind and state to j's: old nil is
// an insert, j nil a delete. Every write of a job in jobs.go calls it in
// the write's own transaction, so the counts move with the records.
func moveJobCount(tx *Tx, old, j *Job) error {
	if old != nil && j != nil && old.Kind == j.Kind && old.State == j.State {
		return nil
	}
	if old != nil {
		if err := addCount(tx, jobCountKey(old.Kind, old.State), -1); err != nil {
			return err
		}
	}
	if j != nil {
		return addCount(tx, jobCountKey(j.Kind, j.State), 1)
	}
	return nil
}

// storedJobCounts reads every job count in meta, zeros included: one
// cursor over a few keys per kind, however many jobs there are.
func storedJobCounts(tx *Tx) map[[2]string]int {
	out, _ := storedPairCounts(tx, jobCountPrefix) // Check reports a key that does not read
	return out
}

// recountJobs counts the jobs of each kind in each state from the records
// themselves: migration 3 writes the first counts with it, and Check
// compares the stored counts against it. Only the kind and the state are
// decoded. Unreadable records are skipped; the jobs table's check names them.
func recountJobs(tx *Tx) map[[2]string]int {
	out := map[[2]string]int{}
	_ = tx.bucket(bucketJobs).ForEach(func(_, raw []byte) error {
		var j struct {
			Kind  string   `json:"kind"`
			State JobState `json:"state"`
		}
		if json.Unmarshal(raw, &j) == nil {
			out[[2]string{j.Kind, string(j.State)}]++
		}
		return nil
	})
	return out
}

// putCount sets the count at key to n.
func putCount(tx *Tx, key []byte, n int) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(n))
	return tx.bucket(bucketMeta).Put(key, buf[:])
}

// checkJobCounts proves the per-kind, per-state job counts in meta against
// a full scan of the jobs (schema 4 on): a count that drifted from the
// records fails the check.
func checkJobCounts(tx *Tx, counted bool) []error {
	if !counted {
		return nil
	}
	var problems []error
	stored, bad := storedPairCounts(tx, jobCountPrefix)
	for _, k := range bad {
		problems = append(problems, fmt.Errorf("check: meta key %q is not a job count", k))
	}
	return append(problems, diffCounts(stored, recountJobs(tx), comparePair, func(k [2]string, got, want int) error {
		return fmt.Errorf("check: the count of %s jobs %s says %d, the jobs bucket holds %d", k[0], k[1], got, want)
	})...)
}
