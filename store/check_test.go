package store

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// TestCheckDetectsDamage breaks one index on purpose, expects Check to name
// it, then repairs the damage so that the file ends consistent.
func TestCheckDetectsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tx engine.Tx, f fixture) (repair func(tx engine.Tx) error, err error)
		want   string
	}{
		{
			name: "event missing from idx_events_by_key",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				b := tx.Bucket(bucketEventsByKey)
				return func(tx engine.Tx) error {
						return tx.Bucket(bucketEventsByKey).Put([]byte(f.event.Key), []byte(f.event.ID))
					},
					b.Delete([]byte(f.event.Key))
			},
			want: "idx_events_by_key",
		},
		{
			name: "event missing from idx_events_by_conv",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := convKey(LeadKey(f.event.Channel, f.event.ConversationID), f.event.ID)
				return func(tx engine.Tx) error { return tx.Bucket(bucketEventsByConv).Put(k, nil) },
					tx.Bucket(bucketEventsByConv).Delete(k)
			},
			want: "idx_events_by_conv",
		},
		{
			name: "stray key in idx_tokens_by_id",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				return func(tx engine.Tx) error { return tx.Bucket(bucketTokensByID).Delete([]byte("01NOSUCHTOKEN")) },
					tx.Bucket(bucketTokensByID).Put([]byte("01NOSUCHTOKEN"), []byte("nohash"))
			},
			want: "idx_tokens_by_id",
		},
		{
			name: "stray key in idx_events_by_key",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				return func(tx engine.Tx) error { return tx.Bucket(bucketEventsByKey).Delete([]byte("web:ghost")) },
					tx.Bucket(bucketEventsByKey).Put([]byte("web:ghost"), []byte("01NOSUCHEVENT"))
			},
			want: "idx_events_by_key",
		},
		{
			name: "stray key in idx_jobs_ready",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := readyKey(KindDraft, t0, "01NOSUCHJOB")
				return func(tx engine.Tx) error { return tx.Bucket(bucketJobsReady).Delete(k) },
					tx.Bucket(bucketJobsReady).Put(k, nil)
			},
			want: "idx_jobs_ready",
		},
		{
			name: "available job missing from idx_jobs_ready",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := readyKey(f.available.Kind, f.available.RunAt, f.available.ID)
				return func(tx engine.Tx) error { return tx.Bucket(bucketJobsReady).Put(k, nil) },
					tx.Bucket(bucketJobsReady).Delete(k)
			},
			want: "idx_jobs_ready",
		},
		{
			name: "running job missing from idx_jobs_leased",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := timeKey(*f.running.LeaseUntil, f.running.ID)
				return func(tx engine.Tx) error { return tx.Bucket(bucketJobsLeased).Put(k, nil) },
					tx.Bucket(bucketJobsLeased).Delete(k)
			},
			want: "idx_jobs_leased",
		},
		{
			name: "live job missing from idx_jobs_unique",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := uniqueKey(f.available.Kind, f.available.Key)
				return func(tx engine.Tx) error { return tx.Bucket(bucketJobsUnique).Put(k, []byte(f.available.ID)) },
					tx.Bucket(bucketJobsUnique).Delete(k)
			},
			want: "idx_jobs_unique",
		},
		{
			name: "job missing from idx_jobs_by_corr",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := corrKey(f.available.CorrelationID, f.available.ID)
				return func(tx engine.Tx) error { return tx.Bucket(bucketJobsByCorr).Put(k, nil) },
					tx.Bucket(bucketJobsByCorr).Delete(k)
			},
			want: "idx_jobs_by_corr",
		},
		{
			// JobsByCorrelation fails on such a key (it points at no job).
			name: "stray key in idx_jobs_by_corr",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := corrKey(f.available.CorrelationID, "01NOSUCHJOB")
				return func(tx engine.Tx) error { return tx.Bucket(bucketJobsByCorr).Delete(k) },
					tx.Bucket(bucketJobsByCorr).Put(k, nil)
			},
			want: "idx_jobs_by_corr",
		},
		{
			name: "draft missing from idx_drafts_by_event",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				k := []byte(f.draft.EventKey)
				return func(tx engine.Tx) error { return tx.Bucket(bucketDraftsByEvent).Put(k, []byte(f.draft.ID)) },
					tx.Bucket(bucketDraftsByEvent).Delete(k)
			},
			want: "idx_drafts_by_event",
		},
		{
			name: "schema version",
			damage: func(tx engine.Tx, f fixture) (func(engine.Tx) error, error) {
				old := string(tx.Bucket(bucketMeta).Get(keySchema))
				return func(tx engine.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte(old)) },
					tx.Bucket(bucketMeta).Put(keySchema, []byte("99"))
			},
			want: "schema version",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openTest(t)
			f := newFixture(t, st)
			if err := st.Check(); err != nil {
				t.Fatalf("Check before the damage: %v", err)
			}
			var repair func(engine.Tx) error
			if err := st.raw(func(tx engine.Tx) error {
				var err error
				repair, err = tt.damage(tx, f)
				return err
			}); err != nil {
				t.Fatalf("damage: %v", err)
			}
			err := st.Check()
			if err == nil {
				t.Fatalf("Check after damage (%s) = nil, want an error naming %s", tt.name, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check after damage (%s) = %q, want it to name %s", tt.name, err, tt.want)
			}
			if err := st.raw(repair); err != nil {
				t.Fatalf("repair: %v", err)
			}
			// openTest's cleanup checks that the repaired file is consistent again.
		})
	}
}

// fixture is a small database with one record in every state Check looks at.
type fixture struct {
	event     Event
	available Job
	running   Job
	draft     Draft
}

func newFixture(t *testing.T, st *Store) fixture {
	t.Helper()
	a := record(t, st, "web:a", t0)
	d, _, err := st.SaveDraft(t.Context(), draftFor(a.Event, "hi", ""))
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	running := claimOne(t, st, t0, time.Minute) // a's job, the only one due
	b := record(t, st, "web:b", t0.Add(time.Second))
	return fixture{event: a.Event, available: b.Job, running: running, draft: d}
}
