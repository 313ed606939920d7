package store

import (
	"encoding/json"
	"time"
)

// A job's stored form leaves out what a new job's record says twice or
// says nothing with: a draft job as the ingest writes it was 334 bytes, of
// which run_at and updated_at repeated created_at (two RFC 3339 times of
// about 45 bytes each, the three equal on every job just enqueued with no
// quiet period), and "attempt":0 and "attempts":[] held nothing. The
// ingest transaction writes one such record per event, into the jobs
// bucket whose keys append, so its bytes are pages.
//
// The field names stay the record's (the jobs' partial readers, recountJobs
// and checkDerived, read kind, state, waits and followed_by from the bytes
// as they are), and every older record, which has every field, reads as
// before: a field left out is only ever one this form may leave out.
//
//	{"v":1,"id":"01J…","kind":"draft","key":"demo:m-1","correlation_id":"01J…","state":"available",
//	 "max_attempts":5,"payload":{},"created_at":"2026-12-03T07:00:00.123456789Z"}
//
// run_at absent: the job is due at created_at; updated_at absent: it was
// last changed at created_at; attempts absent: none (read as an empty
// list, as the API shows it); attempt absent: 0.

// jobFields is Job without its methods, so jobForm can embed it and
// encoding/json does not call Job's own stored form again.
type jobFields Job

// jobForm is the stored form: the fields below shadow Job's own (a field
// at the outer level wins over the embedded one of the same name).
type jobForm struct {
	jobFields
	Attempt   int        `json:"attempt,omitempty"`
	RunAt     *time.Time `json:"run_at,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	Attempts  []Attempt  `json:"attempts,omitempty"`
}

// sameTime reports whether a and b are one instant written the same way
// (the same UTC offset), so that either reads back as the other.
func sameTime(a, b time.Time) bool {
	if !a.Equal(b) {
		return false
	}
	_, ao := a.Zone()
	_, bo := b.Zone()
	return ao == bo
}

// encodeRecord is the job's stored form (above).
func (j *Job) encodeRecord() ([]byte, error) {
	f := jobForm{jobFields: jobFields(*j), Attempt: j.Attempt, Attempts: j.Attempts}
	if !sameTime(j.RunAt, j.CreatedAt) {
		f.RunAt = &j.RunAt
	}
	if !sameTime(j.UpdatedAt, j.CreatedAt) {
		f.UpdatedAt = &j.UpdatedAt
	}
	return json.Marshal(&f)
}

// decodeRecord reads either form of a job: the one above, or an older
// record with every field.
func (j *Job) decodeRecord(raw []byte, strict bool) error {
	var f jobForm
	if err := unmarshal(raw, &f, strict); err != nil {
		return err
	}
	*j = Job(f.jobFields)
	j.Attempt, j.Attempts = f.Attempt, f.Attempts
	j.RunAt, j.UpdatedAt = j.CreatedAt, j.CreatedAt
	if f.RunAt != nil {
		j.RunAt = *f.RunAt
	}
	if f.UpdatedAt != nil {
		j.UpdatedAt = *f.UpdatedAt
	}
	if j.Attempts == nil {
		j.Attempts = []Attempt{} // as newJob makes it, and as the API has always shown it
	}
	return nil
}
