package store

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit/corpus"
)

// TestJobFormOld: a job as the released binary stored it (json.Marshal of
// the whole record, every field written) reads back as it was, strictly
// too (Check's decode), in each of its shapes: just enqueued, held back,
// running, failed with the corpus's texts as its errors and payload.
func TestJobFormOld(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 0, 0, 123456789, time.UTC)
	later := at.Add(90 * time.Second)
	var jobs []Job
	for i, tx := range corpus.Texts() {
		payload, _ := json.Marshal(map[string]string{"instruction": tx.Body})
		j := Job{V: 1, ID: "01JOB" + strings.Repeat("0", 21), Kind: KindDraft, Key: "demo:m-" + tx.Name, CorrelationID: "01CORR",
			State: JobAvailable, MaxAttempts: 5, RunAt: at, Payload: CanonicalJSON(payload), CreatedAt: at, UpdatedAt: at, Attempts: []Attempt{}}
		switch i % 4 {
		case 1: // held back behind a running job, due later
			j.RunAt, j.Waits = later, &JobWait{Job: "01RUNNING", RunAt: later}
		case 2: // running
			j.State, j.Attempt, j.ExecutionID, j.UpdatedAt, j.LeaseUntil = JobRunning, 1, "01EXEC", later, &later
			j.Attempts = []Attempt{{ExecutionID: "01EXEC", Number: 1, StartedAt: later, Outcome: ""}}
		case 3: // failed for good, the corpus's text as what it got back
			j.State, j.Attempt, j.LastError, j.UpdatedAt = JobDiscarded, 2, tx.Body, later
			j.Attempts = []Attempt{{ExecutionID: "01E1", Number: 1, StartedAt: at, EndedAt: &at, Outcome: OutcomeRetry, Error: tx.Body, Raw: tx.Body}}
		}
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		t.Run(j.Key, func(t *testing.T) {
			raw, err := json.Marshal(j) // the released binary's stored form
			if err != nil {
				t.Fatal(err)
			}
			for _, strict := range []bool{false, true} {
				var got Job
				if err := decodeAs(raw, &got, strict); err != nil {
					t.Fatalf("decode (strict %v) of %s: %v", strict, raw, err)
				}
				if !reflect.DeepEqual(got, j) {
					t.Fatalf("strict %v: read back\n%+v\nwant\n%+v", strict, got, j)
				}
			}
			// The new form reads back the same, strictly too.
			neu, err := encode(&j)
			if err != nil {
				t.Fatal(err)
			}
			var got Job
			if err := decodeAs(neu, &got, true); err != nil || !reflect.DeepEqual(got, j) {
				t.Fatalf("new form %s read back %+v, %v; want %+v", neu, got, err, j)
			}
			if len(neu) > len(raw) {
				t.Errorf("the new form is %d bytes, the old %d", len(neu), len(raw))
			}
		})
	}
}

// TestJobFormIngest: the draft job the ingest writes stores its creation
// time once and no empty attempts, and the queue's partial readers (the
// counts, checkDerived's links) still read it: Check passes on the file.
func TestJobFormIngest(t *testing.T) {
	st := openTest(t)
	ev := newEvent("web:jobform-1", t0)
	ev.Text = corpus.Texts()[0].Body
	ev.BodyText = ev.Text
	rec, err := st.RecordEvent(t.Context(), ev, draftJobFor(ev.Key, 3))
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := st.View(func(tx *Tx) error {
		raw = bytes.Clone(tx.bucket(bucketJobs).Get([]byte(rec.Job.ID)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"run_at"`, `"updated_at"`, `"attempts"`, `"attempt"`} {
		if bytes.Contains(raw, []byte(field)) {
			t.Errorf("the new job's record %s holds %s, which its created_at (or nothing) says", raw, field)
		}
	}
	j, err := st.Job(rec.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !j.RunAt.Equal(t0) || !j.UpdatedAt.Equal(t0) || j.Attempts == nil || len(j.Attempts) != 0 {
		t.Errorf("read back run_at %v updated_at %v attempts %#v; want %v, %v and an empty list", j.RunAt, j.UpdatedAt, j.Attempts, t0, t0)
	}
	if !reflect.DeepEqual(j, rec.Job) {
		t.Errorf("read back %+v, the ingest answered %+v", j, rec.Job)
	}
}
