package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
)

// DraftStatus is where a draft is on its way to a person's decision.
type DraftStatus string

// The draft states of the spec.
const (
	DraftPending  DraftStatus = "pending_approval"
	DraftApproved DraftStatus = "approved"
	DraftRejected DraftStatus = "rejected"
	// DraftSuperseded is a draft that was waiting when the customer wrote
	// again: the newer message joined its turn, and a new draft answers the
	// whole turn. It can no longer be approved.
	DraftSuperseded DraftStatus = "superseded"
)

// DraftStatuses are every draft status, in the order the queue's counts show them.
var DraftStatuses = []DraftStatus{DraftPending, DraftApproved, DraftRejected, DraftSuperseded}

// Draft is the stored output of one drafting call: the record of the call
// itself, reused by every retry so the drafter runs once per event.
type Draft struct {
	V              int               `json:"v"`
	ID             string            `json:"id"`
	EventKey       string            `json:"event_key"`
	CorrelationID  string            `json:"correlation_id"`
	Channel        string            `json:"channel"`
	ConversationID string            `json:"conversation_id"`
	Status         DraftStatus       `json:"status"`
	Text           string            `json:"text"`
	Drafter        string            `json:"drafter"`
	Model          string            `json:"model,omitempty"`
	Template       string            `json:"template,omitempty"`
	PromptVersion  string            `json:"prompt_version"`
	InputHash      string            `json:"input_hash,omitempty"`
	Raw            string            `json:"raw,omitempty"`
	Fields         map[string]string `json:"fields,omitempty"`
	Owner          string            `json:"owner,omitempty"`
	RuleVersion    string            `json:"rule_version,omitempty"`
	Rule           string            `json:"rule,omitempty"`
	PromptTokens   int64             `json:"prompt_tokens,omitempty"`
	OutputTokens   int64             `json:"output_tokens,omitempty"`
	ExecutionID    string            `json:"execution_id"`
	CreatedAt      time.Time         `json:"created_at"`
	// Decision is the person's approval or rejection; nil while pending.
	Decision *Decision `json:"decision,omitempty"`
	// OutboxID is set by approval.
	OutboxID string `json:"outbox_id,omitempty"`
	// Version counts regenerations: 1 for the first draft of an event.
	Version int `json:"version"`
	// Replaces names the draft a regeneration replaced.
	Replaces string `json:"replaces,omitempty"`
	// Answers are the event keys of the turn this draft answers, in the
	// order they were recorded: every message the drafter saw. Empty on
	// drafts from before turns were kept (they answer EventKey alone).
	Answers []string `json:"answers,omitempty"`
	// SupersededBy names the draft that answers the turn instead, once a
	// newer message superseded this one.
	SupersededBy string `json:"superseded_by,omitempty"`
	// Instruction is what a person asked of this draft when drafting again
	// ("shorter", "mention the Friday slot").
	Instruction string `json:"instruction,omitempty"`
	// Author is the person who wrote this draft themselves (drafter "person").
	Author string `json:"author,omitempty"`
	// PromptHash is the sha256 of the system prompt the model was given
	// (the client's facts included), FactsHash of the facts alone: with
	// PromptVersion they say exactly what the draft was written from.
	PromptHash string `json:"prompt_hash,omitempty"`
	FactsHash  string `json:"facts_hash,omitempty"`
	// FactsVersion is the version of the client's facts the draft was
	// written from (facts.go; 0: none, or a draft from before versions),
	// FactsCited the entries of it the reply cites (the model is asked
	// to cite them as [F3]), with their text as that version has it.
	FactsVersion int         `json:"facts_version,omitempty"`
	FactsCited   []FactEntry `json:"facts_cited,omitempty"`
	// Structured is how the answer's shape was asked for (drafter.structured).
	Structured string `json:"structured,omitempty"`
	// Cost is the drafting call's price (drafter.price × tokens), in Currency.
	Cost     float64 `json:"cost,omitempty"`
	Currency string  `json:"currency,omitempty"`
	// Notes say what handoff did to the model's answer (a field dropped
	// for breaking its rule, a plain-text answer taken as the reply).
	Notes []string `json:"notes,omitempty"`
	// ContextTokens estimates the earlier conversation the drafter was
	// given (about four characters a token), within ContextBudget.
	ContextTokens int `json:"context_tokens,omitempty"`
	ContextBudget int `json:"context_budget,omitempty"`
	// ContextMessages counts the earlier messages and replies given.
	ContextMessages int `json:"context_messages,omitempty"`
	// Guards is what the checks before a person found (quality.go): nil on
	// a draft from before them, or one a person wrote.
	Guards *Guards `json:"guards,omitempty"`
	// Canary is the arm of the client's canary that drafted it, "a" (the
	// drafter) or "b" (the candidate, config drafter.canary), on a client
	// whose canary ran when it was drafted; "" elsewhere.
	Canary string `json:"canary,omitempty"`
	// LastInbound is when the customer last wrote in the turn this draft
	// answers (the latest of its events' Event.Wrote), stamped when it is
	// stored: the reply window's start, which orders the queue
	// (idx_drafts_pending, queue.go). nil: none of its events could be read.
	LastInbound *time.Time `json:"last_inbound,omitempty"`
}

// AnsweredEvents is the turn d answers: Answers, or its own event on a
// draft from before turns were kept.
func (d Draft) AnsweredEvents() []string {
	if len(d.Answers) > 0 {
		return d.Answers
	}
	return []string{d.EventKey}
}

// Decision records who decided a draft, when, from where, and the final text.
type Decision struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	From   string    `json:"from,omitempty"` // the client address
	Text   string    `json:"text,omitempty"` // the reply as approved (edited or not)
	Edited bool      `json:"edited,omitempty"`
	Reason string    `json:"reason,omitempty"` // why it was rejected, or edited: the person's words
	// ReasonCode is the one-tap reason of an edit or a rejection, one of
	// ReasonCodes (quality.go); empty when none was given.
	ReasonCode string `json:"reason_code,omitempty"`
	// Distance is the normalised edit distance from the draft to the text
	// approved (0: as written, 1: all of it replaced), set on a person's
	// approval of the draft's own text; DistanceApprox says the texts were
	// too long for an exact measure (quality.Distance).
	Distance       *float64 `json:"distance,omitempty"`
	DistanceApprox bool     `json:"distance_approx,omitempty"`
	// Via names the surface the person decided on when it is not the
	// dashboard or the API: "slack", "telegram", "email", "ntfy". Every
	// surface decides through review, so the rules and the outbox id are
	// the same; only this and the audit entry say where.
	Via string `json:"via,omitempty"`
	// Outcome says how a rejected draft ended when no one rejected it as
	// such: OutcomeOwnReply, OutcomeDraftAgain or OutcomeClosed (stats.go);
	// empty for a person's rejection and every other decision.
	Outcome string `json:"outcome,omitempty"`
}

// DraftID names the first draft of the event with ULID eventID: the same
// event always names the same draft (and so the same outbox row) whoever
// stores it, and draft ids sort by time like the events they answer, so
// inserts append at the right edge of the drafts tree instead of landing on
// a random page each.
func DraftID(eventID string) string { return "d" + eventID }

// draftEventID is the ID of the event whose draft is id (DraftVersionID's
// inverse); ok false for an ID of another form.
func draftEventID(id string) (string, bool) {
	const ulidLen = 26 // a ULID's text, an event's ID
	ev, ok := strings.CutPrefix(id, DraftID(""))
	if !ok || len(ev) < ulidLen || len(ev) > ulidLen && !strings.HasPrefix(ev[ulidLen:], "-v") {
		return "", false
	}
	return ev[:ulidLen], true
}

// DraftVersionID names version n of the draft of the event with ULID
// eventID (n <= 1: the first, DraftID).
func DraftVersionID(eventID string, n int) string {
	if n <= 1 {
		return DraftID(eventID)
	}
	return fmt.Sprintf("%s-v%d", DraftID(eventID), n)
}

// UpdateSavingDraft is Update for fn, the save of d, the reply job drafted
// (review.Record: the draft, the lead's move, the job's completion): on
// PostgreSQL the round first reads, for every caller in it, the keys such
// a save reads, one round trip for all of them instead of one for each of
// its ~15 reads, made under the writers' lock while every other write
// waits. d.ID, when set as DraftVersionID(the event's ID, version), names
// the event's record and the draft's too. What fn reads and writes is as
// with Update; a key read ahead and not needed costs nothing more.
func (s *Store) UpdateSavingDraft(ctx context.Context, job Job, d *Draft, fn func(tx *Tx) error) error {
	if s.writes == nil {
		return ErrReadOnly
	}
	if s.pg == nil || d == nil {
		return s.update(ctx, fn) // bbolt reads from memory: nothing to gain
	}
	lead := LeadKey(d.Channel, d.ConversationID)
	reads := []readKey{
		{bucketDraftsByEvent, []byte(d.EventKey)},
		{bucketEventsByKey, []byte(d.EventKey)},
		{bucketHandoffs, []byte(lead)},
		{bucketJobs, []byte(job.ID)},
		{bucketJobsUnique, uniqueKey(job.Kind, job.Key)},
		{bucketMeta, draftCountKey(DraftPending)},
		{bucketMeta, channelDraftCountKey(d.Channel, DraftPending)},
		{bucketMeta, jobCountKey(job.Kind, JobRunning)},
		{bucketMeta, jobCountKey(job.Kind, JobCompleted)},
		{bucketMeta, draftStatsKey(d.CreatedAt.UTC().Format(time.DateOnly), d.Channel, d.PromptVersion, d.Currency)},
	}
	// The counts of the statuses a drafted lead moves through (leads'
	// received → matched → owned).
	for _, st := range []HandoffStatus{"received", "matched", "owned"} {
		reads = append(reads, readKey{bucketMeta, leadCountKey(st, lead)})
	}
	if ev, ok := draftEventID(d.ID); ok {
		reads = append(reads, readKey{bucketEvents, []byte(ev)}, readKey{bucketDrafts, []byte(d.ID)})
	}
	return s.updateReading(ctx, reads, fn)
}

// DraftByEvent returns the draft stored for an event key.
func (s *Store) DraftByEvent(eventKey string) (Draft, error) {
	var d Draft
	err := s.view(func(tx *Tx) error {
		var err error
		d, err = tx.DraftByEvent(eventKey)
		return err
	})
	if err != nil {
		return Draft{}, fmt.Errorf("store: draft for %s: %w", eventKey, err)
	}
	return d, nil
}

func draftStatusKey(d Draft) []byte {
	return append(append([]byte(d.Status), 0), timeKey(d.CreatedAt, d.ID)...)
}

// draftVersionID is DraftVersionID, for the store's own walks (retention).
func draftVersionID(eventID string, n int) string { return DraftVersionID(eventID, n) }

// Draft returns one draft by id.
func (s *Store) Draft(id string) (Draft, error) {
	var d Draft
	err := s.view(func(tx *Tx) error {
		var err error
		d, err = tx.Draft(id)
		return err
	})
	if err != nil {
		return Draft{}, fmt.Errorf("store: draft %s: %w", id, err)
	}
	return d, nil
}

// Draft reads one draft by id: ErrNotFound when there is none.
func (tx *Tx) Draft(id string) (Draft, error) { return draftsTable.get(tx, []byte(id)) }

// DraftByEvent reads the current draft of the event key (its newest
// version): ErrNotFound when the event has none.
func (tx *Tx) DraftByEvent(eventKey string) (Draft, error) {
	return draftsTable.lookup(tx, &draftsByEvent, []byte(eventKey))
}

// PutDraft writes d over old, the draft as read in this transaction (nil:
// d is a new draft, which becomes its event's current one), moving its
// index entries and the per-status counts.
func (tx *Tx) PutDraft(old, d *Draft) error {
	if old == nil || old.Status != d.Status || old.Channel != d.Channel {
		if old != nil {
			if err := moveDraftCount(tx, old, -1); err != nil {
				return err
			}
		}
		if err := moveDraftCount(tx, d, 1); err != nil {
			return err
		}
	}
	if err := moveDraftFigures(tx, old, d); err != nil { // the overview's figures: stats.go
		return err
	}
	if err := moveQualityFigures(tx, old, d); err != nil { // quality.go
		return err
	}
	return draftsTable.put(tx, old, d)
}

// deleteDraft removes the stored draft d, its index entries, its counts
// and its share of the drafting figures.
func (tx *Tx) deleteDraft(d *Draft) error {
	if err := moveDraftCount(tx, d, -1); err != nil {
		return err
	}
	if err := moveDraftFigures(tx, d, nil); err != nil {
		return err
	}
	if err := moveQualityFigures(tx, d, nil); err != nil {
		return err
	}
	return draftsTable.delete(tx, d)
}

// moveDraftCount adds delta to the count of d's status, all channels' and
// its channel's.
func moveDraftCount(tx *Tx, d *Draft, delta int) error {
	if err := addCount(tx, draftCountKey(d.Status), delta); err != nil {
		return err
	}
	return addCount(tx, channelDraftCountKey(d.Channel, d.Status), delta)
}

// ConflictError is a decision that contradicts an earlier one (reject after
// approve, approve after reject). It names the earlier decision. The review
// package decides when it happens; it is the store's so that web maps it
// with the other record errors.
type ConflictError struct {
	Draft Draft
}

func (e *ConflictError) Error() string {
	d := e.Draft.Decision
	return fmt.Sprintf("draft %s was already %s by %s at %s", e.Draft.ID, e.Draft.Status, d.By, d.At.UTC().Format(time.RFC3339))
}

// SupersededError is an approval of a draft that a newer message in its
// turn superseded. It names the turn's current draft (Current; empty when
// the turn has ended), which is the one to decide instead.
type SupersededError struct {
	Draft   Draft
	Current string
}

func (e *SupersededError) Error() string {
	if e.Current == "" {
		return fmt.Sprintf("draft %s was superseded and its turn has ended", e.Draft.ID)
	}
	return fmt.Sprintf("draft %s was superseded by a newer message of its conversation; the current draft is %s", e.Draft.ID, e.Current)
}

// DraftFilter selects drafts for Drafts.
type DraftFilter struct {
	Status DraftStatus
	After  []byte // a cursor from the previous page
	Limit  int
	// Keep, when set, keeps only the drafts it accepts (the queue's owner and
	// channel filters), reading at most Scan drafts (0: no bound) in the
	// same read transaction, so the cursor is exact.
	Keep func(Draft) bool
	Scan int
	// Windows, when set on the pending drafts, lists them in reply-window
	// order (queue.go): each channel with a window and how long it lasts.
	// Now is the walk's time on its first page (zero: the clock's); the
	// cursor carries it on.
	Windows map[string]time.Duration
	Now     time.Time
}

// Drafts lists drafts in one status, oldest first, a page at a time; next
// is the cursor of the following page (nil at the end). With a filter whose
// scan budget ran out before the page filled, partial is true and next
// continues the scan.
func (s *Store) Drafts(f DraftFilter) (page []Draft, next []byte, err error) {
	page, next, _, err = s.DraftsWhere(f)
	return page, next, err
}

// DraftsWhere is Drafts that also says whether the page ended early because
// the scan budget ran out.
func (s *Store) DraftsWhere(f DraftFilter) (page []Draft, next []byte, partial bool, err error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Windows != nil && f.Status == DraftPending {
		return s.pendingByWindow(f)
	}
	page = []Draft{}
	err = s.view(func(tx *Tx) error {
		prefix := append([]byte(f.Status), 0)
		c := tx.bucket(bucketDraftsByStatus).Cursor()
		k, _ := c.Seek(prefix)
		if f.After != nil {
			k, _ = c.Seek(f.After)
			if bytes.Equal(k, f.After) {
				k, _ = c.Next()
			}
		}
		scanned := 0
		var last []byte // the last key read: the next page starts after it
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			full := len(page) == f.Limit
			if full || f.Keep != nil && f.Scan > 0 && scanned == f.Scan {
				next, partial = bytes.Clone(last), !full
				return nil
			}
			last = k
			_, id := splitTimeKey(k[len(prefix):])
			d, err := tx.Draft(id)
			if tx.skip(err, nil) { // listed apart (Store.Unreadable); the page goes on
				scanned++
				continue
			}
			if err != nil {
				return fmt.Errorf("status index points at draft %s: %w", id, err)
			}
			scanned++
			if f.Keep == nil || f.Keep(d) {
				page = append(page, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("store: list drafts: %w", err)
	}
	return page, next, partial, nil
}

// InsertDraft writes d, a new draft of event ev (its record version
// stamped), as the event's current draft with its indexes and counts. The
// lead's move that a stored draft justifies (matched, owned) is the
// caller's, in the same transaction (leads.DraftedTx); which draft is
// stored, and when, is the review package's.
func (tx *Tx) InsertDraft(d *Draft, ev Event) error {
	d.V = recordVersion
	if d.LastInbound == nil {
		d.LastInbound = lastInboundTx(tx, d)
	}
	return insertDraft(tx, *d, ev)
}

// insertDraft is InsertDraft.
func insertDraft(tx *Tx, d Draft, ev Event) error {
	if d.LastInbound == nil {
		d.LastInbound = lastInboundTx(tx, &d)
	}
	return tx.PutDraft(nil, &d)
}
