package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Derived state that two records, or two kinds of count, each keep of the
// other, which no index declaration proves; Check calls these.

// checkJobFollowers proves that a held-back job and the running job it
// waits for agree (waitFor sets both sides in one write, the end of the
// running job's attempt clears both in another): a job followed by
// another (FollowedBy) is running; a job held back (Waits) is queued, and
// the job it names is running and followed by it. Only the fields they
// read are decoded; an unreadable job is the jobs table's to name.
func checkJobFollowers(tx *Tx) []error {
	type links struct {
		State      JobState `json:"state"`
		Waits      *JobWait `json:"waits"`
		FollowedBy string   `json:"followed_by"`
	}
	all := map[string]links{}  // the jobs with a link, by id
	other := map[string]bool{} // every other job, true when it cannot be read
	_ = tx.bucket(bucketJobs).ForEach(func(k, raw []byte) error {
		var l links
		switch {
		case json.Unmarshal(raw, &l) != nil:
			other[string(k)] = true
		case l.Waits != nil || l.FollowedBy != "":
			all[string(k)] = l
		default:
			other[string(k)] = false
		}
		return nil
	})
	var problems []error
	for _, id := range slices.Sorted(maps.Keys(all)) {
		l := all[id]
		if l.FollowedBy != "" && l.State != JobRunning {
			problems = append(problems, fmt.Errorf("check: job %s is %s but still names job %s as the one waiting for it (followed_by is kept only while it runs)", id, l.State, l.FollowedBy))
		}
		if l.Waits == nil {
			continue
		}
		if l.State != JobAvailable && l.State != JobRetryable {
			problems = append(problems, fmt.Errorf("check: job %s is %s but still waits for job %s (waits is kept only while it is queued)", id, l.State, l.Waits.Job))
			continue
		}
		k, linked := all[l.Waits.Job]
		unreadable, exists := other[l.Waits.Job]
		switch {
		case linked && k.FollowedBy == id, unreadable:
			// They agree (whether k runs is said of k), or k cannot be read.
		case !linked && !exists:
			problems = append(problems, fmt.Errorf("check: job %s waits for job %s, which does not exist", id, l.Waits.Job))
		default:
			problems = append(problems, fmt.Errorf("check: job %s waits for job %s, whose followed_by names %q, not it", id, l.Waits.Job, k.FollowedBy))
		}
	}
	return problems
}

// checkDraftCountsByChannel proves that each status's draft count
// (count:drafts:<status>) is the sum of the channels' counts of it
// (count:channel_drafts:), which the same writes move (schema 11 on).
func checkDraftCountsByChannel(tx *Tx, kept bool) []error {
	if !kept {
		return nil
	}
	stored, _ := storedPairCounts(tx, channelDraftCountPrefix) // a bad key is checkDraftFigures's to name
	sums := map[DraftStatus]int{}
	for k, n := range stored {
		sums[DraftStatus(k[1])] += n
	}
	statuses := slices.Clone(DraftStatuses)
	for st := range sums {
		if !slices.Contains(statuses, st) {
			statuses = append(statuses, st)
		}
	}
	var problems []error
	for _, st := range statuses {
		if all := count(tx, draftCountKey(st)); all != sums[st] {
			problems = append(problems, fmt.Errorf("check: the %s draft count says %d, the channels' counts of them sum to %d", st, all, sums[st]))
		}
	}
	return problems
}
