package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// The key layout of the whole database. Every bucket is created at open; a
// secondary index is written in the same transaction as its record.
//
//	meta                 "schema" -> decimal schema version; "count:drafts:<status>" -> 8-byte BE count;
//	                     "count:jobs:<kind> 0x00 <state>" -> 8-byte BE count (schema 4 on)
//	events               eventID (ULID) -> Event JSON
//	idx_events_by_key    "<channel>:<message id>" -> eventID          (the dedup index)
//	jobs                 jobID (ULID) -> Job JSON (attempts inside)
//	idx_jobs_ready       kind 0x00 runAt (8 bytes BE unix ns) | jobID -> "" (available and retryable jobs, by kind; schema 4 on)
//	idx_jobs_leased      leaseUntil (8 bytes BE unix ns) | jobID -> "" (running jobs)
//	idx_jobs_unique      kind 0x00 business key -> jobID                (live jobs only)
//	idx_jobs_dead        jobID -> ""                                    (discarded jobs: the dead-letter list)
//	idx_jobs_by_corr     correlation id | jobID -> ""                   (every job of one event)
//	drafts               draftID -> Draft JSON
//	idx_drafts_by_event  event key -> draftID                           (the stored model/template output)
//	idx_events_by_conv   lead key 0x00 eventID -> ""                    (a conversation's messages, oldest first)
//	handoffs             lead key "<channel>:<conversation id>" -> Handoff JSON (status and history)
//	idx_drafts_by_status status 0x00 createdAt (8 bytes BE) | draftID -> "" (the approval queue, oldest first)
//	outbox               outbox id "<conversation id>:<draft id>" -> Outbox JSON
//	idx_outbox_by_status status 0x00 outbox id -> ""
//	sandbox              client reference -> SandboxMessage JSON (what the built-in provider received)
//	users                user name -> User JSON (bcrypt password hash)
//	sessions             sha256(session secret) -> Session JSON
//	tokens               sha256(token secret) -> Token JSON
//	idx_tokens_by_id     token id (ULID) -> sha256(token secret)
//	audit                entry id (ULID) -> AuditEntry JSON (every human action)
//	keys                 caller's idempotency key -> IdemKey JSON (the key API)
//	idx_handoffs_by_status status 0x00 since (8 bytes BE) | lead key -> "" (leads by status, longest waiting first)
//	bulk                 run id (ULID) -> BulkRun JSON (a bulk replay's progress; schema 3 on)
//	receipts             "<channel>:<provider message id>" -> Receipt JSON (delivery receipts; schema 5 on)
//	idx_handoffs_by_term term 0x00 lead key -> "" (the search's prefix index: the lead's name, each word of it,
//	                     its contact, a phone's digits, its conversation id, lower case; schema 7 on; from schema 12
//	                     folded (no accents), a word's parts between punctuation, and each suffix of >= 4 of a phone's digits)
//	idx_receipts_by_outbox outbox id 0x00 receipt key -> "" (a row's receipts, deleted with it; schema 8 on)
//	idx_receipts_by_time updated at (8 bytes BE) | receipt key -> "" (receipts by latest status, for retention; schema 8 on)
//	idx_drafts_pending   'w' channel 0x00 customer's last message (8 bytes BE) | draftID -> "" and
//	                     'c' channel 0x00 createdAt (8 bytes BE) | draftID -> "" (waiting drafts only: the queue
//	                     in reply-window order, queue.go; schema 14 on)
//	facts                client id 0x00 version (4 bytes BE) -> FactsVersion JSON (a client's facts, each version
//	                     written once; facts.go) and facts_files: client id -> FactsFile JSON (the facts_file
//	                     last read); both created by their first record, so any schema may lack them
//
// ULIDs and fixed-width big-endian times sort the way they are read, so the
// next due job is the first key of idx_jobs_ready and inserts append at the
// right edge of each B+tree.
var (
	bucketMeta             = []byte("meta")
	bucketEvents           = []byte("events")
	bucketEventsByKey      = []byte("idx_events_by_key")
	bucketJobs             = []byte("jobs")
	bucketJobsReady        = []byte("idx_jobs_ready")
	bucketJobsLeased       = []byte("idx_jobs_leased")
	bucketJobsUnique       = []byte("idx_jobs_unique")
	bucketJobsByCorr       = []byte("idx_jobs_by_corr")
	bucketDrafts           = []byte("drafts")
	bucketDraftsByEvent    = []byte("idx_drafts_by_event")
	bucketEventsByConv     = []byte("idx_events_by_conv")
	bucketHandoffs         = []byte("handoffs")
	bucketHandoffsByStatus = []byte("idx_handoffs_by_status")
	bucketDraftsByStatus   = []byte("idx_drafts_by_status")
	bucketOutbox           = []byte("outbox")
	bucketOutboxByStatus   = []byte("idx_outbox_by_status")
	bucketSandbox          = []byte("sandbox")
	bucketUsers            = []byte("users")
	bucketSessions         = []byte("sessions")
	bucketTokens           = []byte("tokens")
	bucketTokensByID       = []byte("idx_tokens_by_id")
	bucketAudit            = []byte("audit")
	bucketJobsDead         = []byte("idx_jobs_dead")
	bucketKeys             = []byte("keys")
	// bucketBulk is created by migration 2, not with allBuckets, so a file
	// from before it still checks as what it is.
	bucketBulk             = []byte("bulk")
	bucketReceipts         = []byte("receipts")             // created by migration 4, as bulk is by 2
	bucketHandoffsByTerm   = []byte("idx_handoffs_by_term") // created by migration 6, as bulk is by 2
	bucketDraftsPending    = []byte("idx_drafts_pending")   // created by migration 13, as bulk is by 2
	allBuckets             = [][]byte{bucketMeta, bucketEvents, bucketEventsByKey, bucketJobs, bucketJobsReady, bucketJobsLeased, bucketJobsUnique, bucketJobsByCorr, bucketDrafts, bucketDraftsByEvent, bucketEventsByConv, bucketHandoffs, bucketHandoffsByStatus, bucketDraftsByStatus, bucketOutbox, bucketOutboxByStatus, bucketSandbox, bucketUsers, bucketSessions, bucketTokens, bucketTokensByID, bucketAudit, bucketJobsDead, bucketKeys}
	keySchema              = []byte("schema")
	errSchemaFromTheFuture = fmt.Errorf("store: the database was written by a newer handoff")
)

// migration moves a database from version to version+1 inside one write transaction.
type migration struct {
	version int
	name    string
	apply   func(tx *Tx) error
	// repair, instead of apply, rewrites records found wrong on disk and
	// says how many, for Open to report (Store.Repairs).
	repair func(tx *Tx) (Repair, error)
}

// migrations is ordered; SchemaVersion is the version after the last one.
// Version 1 is the initial layout, created by migrate.
var migrations = []migration{
	{version: 1, name: "count drafts by status in meta", apply: func(tx *Tx) error {
		for st, n := range recountDrafts(tx) {
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], uint64(n))
			if err := tx.bucket(bucketMeta).Put(draftCountKey(st), buf[:]); err != nil {
				return err
			}
		}
		return nil
	}},
	{version: 2, name: "keep bulk replays in the bulk bucket", apply: func(tx *Tx) error {
		_, err := tx.tx.CreateBucketIfNotExists(bucketBulk)
		return err
	}},
	{version: 3, name: "key ready jobs by kind and count jobs by kind and state in meta", apply: migrateJobsByKind},
	{version: 4, name: "keep delivery receipts in the receipts bucket", apply: func(tx *Tx) error {
		_, err := tx.tx.CreateBucketIfNotExists(bucketReceipts)
		return err
	}}, {version: 5, name: "events may keep their text as a place in their body", apply: migrateTextRefs}, // schema_bodyonce.go
	// search.go
	{version: 6, name: "name each lead and index leads by name, contact and conversation id for search", apply: migrateLeadTerms},
	{version: 7, name: "index receipts by outbox row and by time", apply: migrateReceiptIndexes}, // receipts.go
	// schema_repair.go
	{version: 8, name: "keep each event's body as received after its record; repair the events whose text could not be read", repair: migrateRepairEvents},
	// tokens.go
	{version: 9, name: "give every person an ID and every token its maker's", apply: migrateUserIDs},
	// stats.go
	{version: 10, name: "keep the overview's drafting figures, each channel's draft counts and its open replies' counts in meta", apply: migrateDraftFigures},
	// schema_terms.go
	{version: 11, name: "index leads by folded name words and by every run of 4 or more digits of a phone number", apply: migrateFoldedTerms},
	// stats.go
	{version: 12, name: "count own replies, regenerations and closes apart from rejections in the overview's figures, and count leads by status and channel", apply: migrateDraftOutcomes},
	// queue.go
	{version: 13, name: "stamp each waiting draft with its customer's last message and index the waiting drafts by channel and time for the reply-window queue", apply: migratePendingIndex},
}

// SchemaVersion is the layout version this binary writes.
const SchemaVersion = 14

// migrateJobsByKind is migration 3: it moves each entry of idx_jobs_ready
// from "runAt | jobID" to "kind 0x00 runAt | jobID" (readyKey) and writes
// the per-kind, per-state job counts from the records.
func migrateJobsByKind(tx *Tx) error {
	ready := tx.bucket(bucketJobsReady)
	var old [][]byte
	_ = ready.ForEach(func(k, _ []byte) error {
		old = append(old, bytes.Clone(k))
		return nil
	})
	for _, k := range old {
		at, id := splitTimeKey(k)
		j, err := tx.Job(id)
		if err != nil {
			return fmt.Errorf("idx_jobs_ready points at job %s: %w", id, err)
		}
		if err := ready.Delete(k); err != nil {
			return err
		}
		if err := ready.Put(readyKey(j.Kind, at, id), nil); err != nil {
			return err
		}
	}
	for k, n := range recountJobs(tx) {
		if err := putCount(tx, jobCountKey(k[0], JobState(k[1])), n); err != nil {
			return err
		}
	}
	return nil
}

// Migrated is one migration an open ran on the file.
type Migrated struct {
	From, To int // the schema before and after it
	Name     string
}

// migrate creates the buckets and runs every migration the file has not
// seen, adding each to ran and to repairs what the repairing ones rewrote.
func migrate(tx engine.Tx, repairs *[]Repair, ran *[]Migrated) error {
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("store: create bucket %s: %w", b, err)
		}
	}
	meta := tx.Bucket(bucketMeta)
	v := 0
	fresh := meta.Get(keySchema) == nil // a new file: its migrations are its creation, not news
	if raw := meta.Get(keySchema); raw != nil {
		n, err := strconv.Atoi(string(raw))
		if err != nil {
			return fmt.Errorf("store: schema version %q: %w", raw, err)
		}
		v = n
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w (schema %d, this binary knows %d)", errSchemaFromTheFuture, v, SchemaVersion)
	}
	if v == 0 {
		v = 1 // a new file gets the initial layout above
	}
	for _, m := range migrations {
		if m.version < v {
			continue
		}
		var err error
		if m.repair != nil {
			var r Repair
			if r, err = m.repair(&Tx{tx: tx}); err == nil {
				*repairs = append(*repairs, r)
			}
		} else {
			err = m.apply(&Tx{tx: tx})
		}
		if err != nil {
			return fmt.Errorf("store: migration %d (%s): %w", m.version, m.name, err)
		}
		if !fresh {
			*ran = append(*ran, Migrated{From: m.version, To: m.version + 1, Name: m.name})
		}
		v = m.version + 1
	}
	return meta.Put(keySchema, []byte(strconv.Itoa(v)))
}

// timeKey is a fixed-width big-endian time followed by an id, so that a cursor
// from the start visits the earliest time first.
func timeKey(t time.Time, id string) []byte {
	k := make([]byte, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano()))
	copy(k[8:], id)
	return k
}

// splitTimeKey undoes timeKey.
func splitTimeKey(k []byte) (time.Time, string) {
	if len(k) < 8 {
		return time.Time{}, ""
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))), string(k[8:])
}
