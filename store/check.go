package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// Check verifies the file: bbolt's own page check, the schema version, and
// that every index agrees with its records in both directions. It returns
// every problem found, joined. bbolt's page check is not safe beside a
// writer, so on a live store it runs inside a write transaction (writing
// nothing); a read-only store has no writer.
func (s *Store) Check() error {
	if s.writes == nil {
		return s.view(check)
	}
	return s.update(context.Background(), check)
}

// check is Check inside a transaction.
func check(tx *bolt.Tx) error {
	// A truncated file (a broken download) would make bbolt's page walk read
	// past the end of the mapping and die with SIGBUS: refuse it first.
	if fi, err := os.Stat(tx.DB().Path()); err == nil && fi.Size() < tx.Size() {
		return fmt.Errorf("check: the file is truncated: it has %d bytes but its pages reach %d", fi.Size(), tx.Size())
	}
	var problems []error
	for err := range tx.Check() {
		problems = append(problems, fmt.Errorf("bbolt: %w", err))
	}
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return errors.New("check: no meta bucket: this is not a handoff database")
	}
	// An older schema is fine: Open migrates it. A newer one is not ours to read.
	schema, err := strconv.Atoi(string(meta.Get(keySchema)))
	if err != nil || schema < 1 || schema > SchemaVersion {
		problems = append(problems, fmt.Errorf("check: schema version %q, want 1 to %d", meta.Get(keySchema), SchemaVersion))
	}
	for _, b := range allBuckets {
		if tx.Bucket(b) == nil {
			problems = append(problems, fmt.Errorf("check: bucket %s is missing", b))
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	problems = append(problems, checkEvents(tx)...)
	problems = append(problems, checkJobs(tx)...)
	problems = append(problems, checkDrafts(tx, schema >= 2)...)
	problems = append(problems, checkHandoffs(tx)...)
	problems = append(problems, checkOutbox(tx)...)
	problems = append(problems, checkTokens(tx)...)
	return errors.Join(problems...)
}

func checkEvents(tx *bolt.Tx) []error {
	var problems []error
	events, byKey := tx.Bucket(bucketEvents), tx.Bucket(bucketEventsByKey)
	n := 0
	_ = events.ForEach(func(k, v []byte) error {
		n++
		var ev Event
		if err := json.Unmarshal(v, &ev); err != nil {
			problems = append(problems, fmt.Errorf("check: event %s: %w", k, err))
			return nil
		}
		if !bytes.Equal(byKey.Get([]byte(ev.Key)), k) {
			problems = append(problems, fmt.Errorf("check: event %s (%s) is not in idx_events_by_key", k, ev.Key))
		}
		if tx.Bucket(bucketEventsByConv).Get(convKey(LeadKey(ev.Channel, ev.ConversationID), ev.ID)) == nil {
			problems = append(problems, fmt.Errorf("check: event %s (%s) is not in idx_events_by_conv", k, ev.Key))
		}
		return nil
	})
	if m := byKey.Stats().KeyN; m != n {
		problems = append(problems, fmt.Errorf("check: %d events but %d keys in idx_events_by_key", n, m))
	}
	return problems
}

func checkJobs(tx *bolt.Tx) []error {
	var problems []error
	jobs := tx.Bucket(bucketJobs)
	ready, leased, unique, byCorr := tx.Bucket(bucketJobsReady), tx.Bucket(bucketJobsLeased), tx.Bucket(bucketJobsUnique), tx.Bucket(bucketJobsByCorr)
	dead := tx.Bucket(bucketJobsDead)
	wantReady, wantLeased, wantUnique, wantDead := 0, 0, 0, 0
	_ = jobs.ForEach(func(k, v []byte) error {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			problems = append(problems, fmt.Errorf("check: job %s: %w", k, err))
			return nil
		}
		bad := func(format string, a ...any) {
			problems = append(problems, fmt.Errorf("check: job %s (%s): "+format, append([]any{j.ID, j.State}, a...)...))
		}
		switch j.State {
		case JobAvailable, JobRetryable:
			wantReady++
			if ready.Get(timeKey(j.RunAt, j.ID)) == nil {
				bad("not in idx_jobs_ready")
			}
		case JobDiscarded:
			wantDead++
			if dead.Get(k) == nil {
				bad("not in idx_jobs_dead")
			}
		case JobRunning:
			wantLeased++
			if j.LeaseUntil == nil || leased.Get(timeKey(*j.LeaseUntil, j.ID)) == nil {
				bad("not in idx_jobs_leased")
			}
		}
		if !j.State.Final() {
			wantUnique++
			if !bytes.Equal(unique.Get(uniqueKey(j.Kind, j.Key)), k) {
				bad("live but not in idx_jobs_unique")
			}
		}
		if byCorr.Get(corrKey(j.CorrelationID, j.ID)) == nil {
			bad("not in idx_jobs_by_corr")
		}
		return nil
	})
	for _, c := range []struct {
		b    *bolt.Bucket
		name string
		want int
	}{{ready, "idx_jobs_ready", wantReady}, {leased, "idx_jobs_leased", wantLeased}, {unique, "idx_jobs_unique", wantUnique}, {byCorr, "idx_jobs_by_corr", jobs.Stats().KeyN}, {dead, "idx_jobs_dead", wantDead}} {
		if got := c.b.Stats().KeyN; got != c.want {
			problems = append(problems, fmt.Errorf("check: %s holds %d keys, want %d", c.name, got, c.want))
		}
	}
	return problems
}

func checkDrafts(tx *bolt.Tx, counted bool) []error {
	var problems []error
	drafts, byEvent, eventsByKey := tx.Bucket(bucketDrafts), tx.Bucket(bucketDraftsByEvent), tx.Bucket(bucketEventsByKey)
	_ = byEvent.ForEach(func(k, v []byte) error {
		var d Draft
		if err := getJSON(drafts, v, &d); err != nil {
			problems = append(problems, fmt.Errorf("check: draft %s of %s: %w", v, k, err))
			return nil
		}
		if d.EventKey != string(k) {
			problems = append(problems, fmt.Errorf("check: draft %s belongs to %s, indexed under %s", v, d.EventKey, k))
		}
		if eventsByKey.Get(k) == nil {
			problems = append(problems, fmt.Errorf("check: draft %s has no event %s", v, k))
		}
		return nil
	})
	byStatus := tx.Bucket(bucketDraftsByStatus)
	firsts := 0
	_ = drafts.ForEach(func(k, v []byte) error {
		var d Draft
		if json.Unmarshal(v, &d) != nil {
			return nil // only a current draft's bytes are checked, in the idx_drafts_by_event walk above
		}
		if byStatus.Get(draftStatusKey(d)) == nil {
			problems = append(problems, fmt.Errorf("check: draft %s (%s) is not in idx_drafts_by_status", k, d.Status))
		}
		if d.Version == 1 {
			firsts++
		}
		return nil
	})
	if a, b := drafts.Stats().KeyN, byStatus.Stats().KeyN; a != b {
		problems = append(problems, fmt.Errorf("check: %d drafts but %d keys in idx_drafts_by_status", a, b))
	}
	for st, n := range recountDrafts(tx) {
		if got := count(tx, draftCountKey(st)); counted && got != n {
			problems = append(problems, fmt.Errorf("check: the %s draft count says %d, idx_drafts_by_status holds %d", st, got, n))
		}
	}
	if b := byEvent.Stats().KeyN; firsts != b {
		problems = append(problems, fmt.Errorf("check: %d first drafts but %d keys in idx_drafts_by_event", firsts, b))
	}
	return problems
}

func checkHandoffs(tx *bolt.Tx) []error {
	var problems []error
	handoffs, byStatus := tx.Bucket(bucketHandoffs), tx.Bucket(bucketHandoffsByStatus)
	_ = handoffs.ForEach(func(k, v []byte) error {
		var h Handoff
		if err := json.Unmarshal(v, &h); err != nil {
			problems = append(problems, fmt.Errorf("check: lead %s: %w", k, err))
			return nil
		}
		if byStatus.Get(handoffStatusKey(h.Status, h.Since, h.Key)) == nil {
			problems = append(problems, fmt.Errorf("check: lead %s (%s) is not in idx_handoffs_by_status", k, h.Status))
		}
		return nil
	})
	if a, b := handoffs.Stats().KeyN, byStatus.Stats().KeyN; a != b {
		problems = append(problems, fmt.Errorf("check: %d leads but %d keys in idx_handoffs_by_status", a, b))
	}
	if a, b := tx.Bucket(bucketEvents).Stats().KeyN, tx.Bucket(bucketEventsByConv).Stats().KeyN; a != b {
		problems = append(problems, fmt.Errorf("check: %d events but %d keys in idx_events_by_conv", a, b))
	}
	return problems
}

func checkOutbox(tx *bolt.Tx) []error {
	var problems []error
	outbox, byStatus, drafts := tx.Bucket(bucketOutbox), tx.Bucket(bucketOutboxByStatus), tx.Bucket(bucketDrafts)
	_ = outbox.ForEach(func(k, v []byte) error {
		var o Outbox
		if err := json.Unmarshal(v, &o); err != nil {
			problems = append(problems, fmt.Errorf("check: outbox row %s: %w", k, err))
			return nil
		}
		if byStatus.Get(outboxStatusKey(o.Status, o.ID)) == nil {
			problems = append(problems, fmt.Errorf("check: outbox row %s (%s) is not in idx_outbox_by_status", k, o.Status))
		}
		var d Draft
		if o.Kind == OutboxAlert {
			return nil
		}
		if err := getJSON(drafts, []byte(o.DraftID), &d); err != nil || d.Status != DraftApproved || d.OutboxID != o.ID {
			problems = append(problems, fmt.Errorf("check: outbox row %s has no approved draft %s pointing at it", k, o.DraftID))
		}
		return nil
	})
	if a, b := outbox.Stats().KeyN, byStatus.Stats().KeyN; a != b {
		problems = append(problems, fmt.Errorf("check: %d outbox rows but %d keys in idx_outbox_by_status", a, b))
	}
	return problems
}

func checkTokens(tx *bolt.Tx) []error {
	var problems []error
	toks, byID := tx.Bucket(bucketTokens), tx.Bucket(bucketTokensByID)
	_ = toks.ForEach(func(hash, v []byte) error {
		var t Token
		if err := json.Unmarshal(v, &t); err != nil {
			problems = append(problems, fmt.Errorf("check: token %x: %w", hash[:4], err))
			return nil
		}
		if !bytes.Equal(byID.Get([]byte(t.ID)), hash) {
			problems = append(problems, fmt.Errorf("check: token %s (%s) is not in idx_tokens_by_id", t.ID, t.Name))
		}
		return nil
	})
	if a, b := toks.Stats().KeyN, byID.Stats().KeyN; a != b {
		problems = append(problems, fmt.Errorf("check: %d tokens but %d keys in idx_tokens_by_id", a, b))
	}
	return problems
}
