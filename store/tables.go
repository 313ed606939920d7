package store

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Every record type with secondary indexes, and each of its indexes,
// declared once. The key layout is drawn in schema.go; put, delete and
// Check derive from these declarations.

var eventsTable = &table[Event]{
	name: "event", bucket: bucketEvents,
	key:   func(e *Event) []byte { return []byte(e.ID) },
	label: func(e *Event) string { return e.ID + " (" + e.Key + ")" },
	read:  checkEvent,
	indexes: []index[Event]{
		eventsByKey,
		{
			bucket: bucketEventsByConv, ref: refAfterLast(0),
			key: func(e *Event) []byte { return convKey(LeadKey(e.Channel, e.ConversationID), e.ID) },
		},
	},
}

// checkEvent is how Check reads an event: a read takes the body's bytes
// as stored; Check also proves them JSON, and that a schema 8 record's
// place of its text is exactly one string value of its body, as
// migration 8 verified (schema_repair.go).
func checkEvent(raw []byte, ev *Event, strict bool) error {
	if err := decodeAs(raw, ev, strict); err != nil {
		return err
	}
	if ev.Body != nil && !json.Valid(ev.Body) {
		return fmt.Errorf("event %s: its body is not valid JSON", ev.ID)
	}
	if bytes.IndexByte(raw, '\n') < 0 && bytes.Contains(raw, []byte(`"text_at"`)) {
		var old struct {
			Body   json.RawMessage `json:"body"`
			TextAt *[2]int         `json:"text_at"`
		}
		if json.Unmarshal(raw, &old) == nil && old.TextAt != nil {
			if why := placeProblem(old.Body, *old.TextAt); why != "" {
				return fmt.Errorf("event %s: %s", ev.ID, why)
			}
		}
	}
	return nil
}

// eventsTableV8 is the events as schema 8 and earlier kept them, for
// Check of an older file (a backup, or a file at the start-up check
// before its open migrates it): an event whose text cannot be read from
// where its record says is one migration 8 repairs or marks (schema_repair.go),
// not damage.
var eventsTableV8 = func() *table[Event] {
	t := *eventsTable
	t.read = func(raw []byte, ev *Event, strict bool) error {
		if err := checkEvent(raw, ev, strict); err != nil {
			if bytes.IndexByte(raw, '\n') >= 0 || json.Unmarshal(raw, ev) != nil || ev.TextAt == nil {
				return err
			}
			ev.TextAt, ev.Text = nil, ""
		}
		return nil
	}
	return &t
}()

// eventsByKey is the dedup index: an event key names the event recorded under it.
var eventsByKey = index[Event]{
	bucket: bucketEventsByKey, ref: refValue,
	key:   func(e *Event) []byte { return []byte(e.Key) },
	value: func(e *Event) []byte { return []byte(e.ID) },
}

// jobsTable is the queue. Every write of a job goes through insertJob,
// putJob or deleteJob (jobs.go), which also move the job counts in meta
// (counts.go, checked against the records by checkJobCounts).
var jobsTable = jobsTableWith(index[Job]{
	// What can run, by kind and next due first, so each kind's pool
	// claims its own jobs without reading past another kind's backlog.
	bucket: bucketJobsReady, ref: refAfter(0, 8),
	key: func(j *Job) []byte {
		if !j.ready() {
			return nil
		}
		return readyKey(j.Kind, j.RunAt, j.ID)
	},
})

// jobsTableV3 is the queue as schema 3 and earlier laid it out
// (idx_jobs_ready by time alone), so that Check verifies an older file
// (a backup not yet opened by this binary) as what it is.
var jobsTableV3 = jobsTableWith(index[Job]{
	bucket: bucketJobsReady, ref: refAfterTime,
	key: func(j *Job) []byte {
		if !j.ready() {
			return nil
		}
		return timeKey(j.RunAt, j.ID)
	},
})

func jobsTableWith(ready index[Job]) *table[Job] {
	return &table[Job]{
		name: "job", bucket: bucketJobs,
		key:   func(j *Job) []byte { return []byte(j.ID) },
		label: func(j *Job) string { return j.ID + " (" + string(j.State) + ")" },
		indexes: []index[Job]{
			ready,
			{
				// What is running, earliest expiry first.
				bucket: bucketJobsLeased, ref: refAfterTime,
				key: func(j *Job) []byte {
					if j.State != JobRunning || j.LeaseUntil == nil {
						return nil
					}
					return timeKey(*j.LeaseUntil, j.ID)
				},
			},
			jobsUnique,
			{
				bucket: bucketJobsByCorr, ref: refAfterLast('|'),
				key: func(j *Job) []byte { return corrKey(j.CorrelationID, j.ID) },
			},
			{
				// The dead-letter list.
				bucket: bucketJobsDead, ref: refKey,
				key: func(j *Job) []byte {
					if j.State != JobDiscarded {
						return nil
					}
					return []byte(j.ID)
				},
			},
		},
	}
}

// jobsUnique holds at most one live job per kind and business key.
var jobsUnique = index[Job]{
	bucket: bucketJobsUnique, ref: refValue,
	key: func(j *Job) []byte {
		if j.State.Final() {
			return nil
		}
		return uniqueKey(j.Kind, j.Key)
	},
	value: func(j *Job) []byte { return []byte(j.ID) },
}

var draftsTable = draftsTableWith(draftsPending) // queue.go

// draftsTableV13 is the drafts as schema 13 and earlier kept them, without
// idx_drafts_pending, so that Check verifies an older file as what it is.
var draftsTableV13 = draftsTableWith()

func draftsTableWith(more ...index[Draft]) *table[Draft] {
	return &table[Draft]{
		name: "draft", bucket: bucketDrafts,
		key:   func(d *Draft) []byte { return []byte(d.ID) },
		label: func(d *Draft) string { return d.ID + " (" + string(d.Status) + ")" },
		indexes: append([]index[Draft]{
			draftsByEvent,
			{
				// The approval queue, oldest first.
				bucket: bucketDraftsByStatus, ref: refAfter(0, 8),
				key: func(d *Draft) []byte { return draftStatusKey(*d) },
			},
		}, more...),
	}
}

// draftsByEvent names the current draft of each event: every version has
// its event's key, and an insert moves the entry to the newest.
var draftsByEvent = index[Draft]{
	bucket: bucketDraftsByEvent, ref: refValue, shared: true,
	key:   func(d *Draft) []byte { return []byte(d.EventKey) },
	value: func(d *Draft) []byte { return []byte(d.ID) },
}

var outboxTable = &table[Outbox]{
	name: "outbox row", bucket: bucketOutbox,
	key:   func(o *Outbox) []byte { return []byte(o.ID) },
	label: func(o *Outbox) string { return o.ID + " (" + string(o.Status) + ")" },
	indexes: []index[Outbox]{{
		bucket: bucketOutboxByStatus, ref: refAfter(0, 0),
		key: func(o *Outbox) []byte { return outboxStatusKey(o.Status, o.ID) },
	}},
}

var handoffsTable = handoffsTableWith(handoffsByTerm)

// handoffsTableV11 is the leads as schemas 7 to 11 kept them, their terms
// neither folded nor a phone's suffixes (schema_terms.go).
var handoffsTableV11 = handoffsTableWith(handoffsByTermV11)

// handoffsTableV6 is the leads as schema 6 and earlier kept them, without
// idx_handoffs_by_term, so that Check verifies an older file as what it is.
var handoffsTableV6 = handoffsTableWith()

func handoffsTableWith(more ...index[Handoff]) *table[Handoff] {
	return &table[Handoff]{
		name: "lead", bucket: bucketHandoffs,
		key:   func(h *Handoff) []byte { return []byte(h.Key) },
		label: func(h *Handoff) string { return h.Key + " (" + string(h.Status) + ")" },
		indexes: append([]index[Handoff]{{
			// Leads by status, longest waiting first.
			bucket: bucketHandoffsByStatus, ref: refAfter(0, 8),
			key: func(h *Handoff) []byte { return handoffStatusKey(h.Status, h.Since, h.Key) },
		}}, more...),
	}
}

// handoffsByTerm is the search's prefix index (search.go): one entry
// "<term> 0x00 <lead key>" per word of the lead's name (and part of a
// word between its punctuation), its whole name, its contact (and a phone
// number's digits, and each suffix of them of at least 4 digits) and its
// conversation id, all folded (no accents) and lower case; schema 12 on.
var handoffsByTerm = index[Handoff]{
	bucket: bucketHandoffsByTerm, ref: refAfter(0, 0),
	keys: termKeys,
}

// keysTable holds the key API's idempotency keys, by the caller's key; no index.
var keysTable = &table[IdemKey]{
	name: "key", bucket: bucketKeys,
	key:   func(k *IdemKey) []byte { return []byte(k.Key) },
	label: func(k *IdemKey) string { return k.Key + " (" + string(k.State) + ")" },
}

// receiptsTable holds the delivery receipts providers send about our sends,
// by "<channel>:<provider message id>" (receipts.go), indexed by the
// outbox row they are about and by the time of their latest status.
var receiptsTable = receiptsTableWith(
	index[Receipt]{bucket: bucketReceiptsByOutbox, ref: refAfter(0, 0), key: receiptOutboxKey},
	index[Receipt]{bucket: bucketReceiptsByTime, ref: refAfterTime, key: receiptTimeKey},
)

// receiptsTableV7 is the receipts as schema 7 and earlier kept them,
// without indexes, so that Check verifies an older file as what it is.
var receiptsTableV7 = receiptsTableWith()

func receiptsTableWith(indexes ...index[Receipt]) *table[Receipt] {
	return &table[Receipt]{
		name: "receipt", bucket: bucketReceipts,
		key:     func(r *Receipt) []byte { return []byte(r.Key) },
		label:   func(r *Receipt) string { return r.Key + " (" + r.Status + ")" },
		indexes: indexes,
	}
}

// bulkTable holds the progress of bulk replays, by run id (a ULID); no index.
var bulkTable = &table[BulkRun]{
	name: "bulk replay", bucket: bucketBulk,
	key:   func(b *BulkRun) []byte { return []byte(b.ID) },
	label: func(b *BulkRun) string { return b.ID + " (" + string(b.State) + ")" },
}
