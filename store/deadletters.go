package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// Dead-letter kinds.
const (
	DeadJob    = "job"    // a job discarded after its last attempt
	DeadOutbox = "outbox" // a reply that failed or needs reconciliation
)

// DeadLetter is one item of the dead-letter list with what is known about
// it: prior attempts, the side effects already made, and whether a replay is
// safe, in a sentence. The store reads the records (Job or Outbox, and who
// wrote the message, from its event); what an item is about and whether
// replaying it is safe are the rules of whoever owns it, given to the walk
// as a Judge (delivery.Outbox's).
type DeadLetter struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Channel  string    `json:"channel"`
	EventKey string    `json:"event_key"`
	State    string    `json:"state"`
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
	Safe     bool      `json:"safe"`
	Why      string    `json:"why"`
	Effects  []string  `json:"effects"` // side effects known to have happened
	Job      *Job      `json:"job,omitempty"`
	Outbox   *Outbox   `json:"outbox,omitempty"`
	Draft    *Draft    `json:"draft,omitempty"`
	// Customer is the lead's name, or its contact when it gave none;
	// Message what they wrote (the event's text).
	Customer string `json:"customer,omitempty"`
	Message  string `json:"message,omitempty"`
	// Unreadable, when set, is an item whose job or outbox row cannot be
	// read: listed in its place with State "unreadable", never safe.
	Unreadable *Unreadable `json:"unreadable,omitempty"`
}

// Replay records a person's request to run a dead letter again.
type Replay struct {
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	From       string    `json:"from,omitempty"`
	Regenerate bool      `json:"regenerate,omitempty"`
	Confirmed  bool      `json:"confirmed,omitempty"` // a person checked an item that may have been sent
}

// Dismissal takes an item off the dead-letter list, with a reason.
type Dismissal struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	From   string    `json:"from,omitempty"`
	Reason string    `json:"reason"`
}

// DeadLetterFilter selects dead letters.
type DeadLetterFilter struct {
	Kind      string // "", DeadJob or DeadOutbox
	Channel   string
	Error     string    // a substring of the error, case-insensitive
	OlderThan time.Time // only items in their state since before this
	Limit     int
	// NoReconcile leaves out the replies that need reconciliation: the
	// dashboard counts and lists them on /reconcile, not among the dead letters.
	NoReconcile bool
}

// A Judge fills in what the rules say of an item, read in tx: for a
// discarded job, what it is about (EventKey, Channel, Outbox, Draft) by its
// kind's rules; for every item, whether replaying it is safe, why, and the
// side effects known (Safe, Why, Effects). The store calls it on every item
// it reads, inside the read and before the filter (which filters by the
// channel it finds), then adds who wrote and what from the item's event.
// nil judges nothing: the records as they are.
type Judge func(tx *Tx, dl *DeadLetter)

// DeadLetters lists the dead-letter list, oldest first, each item judged by
// judge (delivery.Outbox.DeadLetters gives the rules).
func (s *Store) DeadLetters(f DeadLetterFilter, judge Judge) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 200
	}
	out := []DeadLetter{}
	err := s.view(func(tx *Tx) error {
		return f.walk(tx, judge, nil, true, func(_ int, dl DeadLetter) bool {
			out = append(out, dl)
			return len(out) < f.Limit
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	return out, nil
}

// replies are the outbox statuses the filter lists.
func (f DeadLetterFilter) replies() []OutboxStatus {
	if f.NoReconcile {
		return []OutboxStatus{OutboxFailed}
	}
	return []OutboxStatus{OutboxFailed, OutboxNeedsReconciliation}
}

func (f DeadLetterFilter) keep(dl DeadLetter) bool {
	if dl.State == "dismissed" {
		return false
	}
	if dl.Unreadable != nil {
		return f.Channel == "" // it has no channel to filter by; every other filter shows it
	}
	if f.Channel != "" && dl.Channel != f.Channel {
		return false
	}
	if f.Error != "" && !strings.Contains(strings.ToLower(dl.Error), strings.ToLower(f.Error)) {
		return false
	}
	if !f.OlderThan.IsZero() && !dl.Since.Before(f.OlderThan) {
		return false
	}
	return true
}

// DeadLetter reads one item by job id (a discarded job) or outbox id (any
// row: which rows a person may act on is delivery's rule), judged by judge.
func (tx *Tx) DeadLetter(id string, judge Judge) (DeadLetter, error) {
	if j, err := tx.Job(id); err == nil && j.State == JobDiscarded { // not idx_jobs_dead's Get: its "" entries read as absent until committed
		return deadJob(tx, id, judge)
	}
	o, err := tx.Outbox(id)
	if errors.Is(err, ErrNotFound) {
		return DeadLetter{}, fmt.Errorf("dead letter %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead outbox row %s: %w", id, err)
	}
	return deadOutbox(tx, o, judge), nil
}

// deadJob reads a discarded job as an item, judged.
func deadJob(tx *Tx, id string, judge Judge) (DeadLetter, error) {
	j, err := tx.Job(id)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead job %s: %w", id, err)
	}
	// A dismissed job is cancelled and off idx_jobs_dead, so it never gets here.
	dl := DeadLetter{ID: j.ID, Kind: DeadJob, State: string(j.State), Error: j.LastError, Since: j.UpdatedAt, Job: &j, Effects: []string{}}
	dl.judged(tx, judge)
	return dl, nil
}

// judged has judge fill in the item, then who wrote its message and what.
func (dl *DeadLetter) judged(tx *Tx, judge Judge) {
	if judge != nil {
		judge(tx, dl)
	}
	if dl.EventKey != "" {
		dl.customer(tx)
	}
}

// customer fills in who wrote the item's message and what, from its event.
func (dl *DeadLetter) customer(tx *Tx) {
	ev, err := tx.EventByKey(dl.EventKey)
	if err != nil {
		return
	}
	if dl.Channel == "" {
		dl.Channel = ev.Channel
	}
	dl.Customer, dl.Message = ev.Name, ev.Text
	if dl.Customer == "" {
		dl.Customer = ev.Contact
	}
}

// deadOutbox reads a reply as an item, judged.
func deadOutbox(tx *Tx, o Outbox, judge Judge) DeadLetter {
	dl := DeadLetter{ID: o.ID, Kind: DeadOutbox, Channel: o.Channel, EventKey: o.EventKey, State: string(o.Status), Error: o.Note, Since: o.UpdatedAt, Outbox: &o}
	if len(o.Attempts) > 0 && dl.Error == "" {
		dl.Error = o.Attempts[len(o.Attempts)-1].Error
	}
	if o.Dismissed != nil {
		dl.State = "dismissed"
	}
	dl.judged(tx, judge)
	return dl
}

// RetireJob closes a discarded delivery job as cancelled, recording the
// replay that gave its reply a fresh job.
func (tx *Tx) RetireJob(j *Job, r Replay) error {
	old := *j
	j.Replays = append(slices.Clip(j.Replays), r)
	j.UpdatedAt = r.At
	j.State = JobCancelled
	j.LastError = "replayed: its reply was requeued with a new delivery job"
	return tx.PutJob(&old, j)
}

// ReviveJob puts a discarded job back in the queue under the same key, with
// more attempts. payload, when not nil, is called once the job is known to
// be the only one for its key and gives its new arguments (a regenerate
// fixes the draft version to make: review.RegenerateTx); the store never
// reads them.
func (tx *Tx) ReviveJob(j *Job, r Replay, more int, payload func() (json.RawMessage, error)) error {
	old := *j
	j.Replays = append(slices.Clip(j.Replays), r)
	j.UpdatedAt = r.At
	if live, err := tx.LiveJob(j.Kind, j.Key); err == nil {
		return &StateError{What: "job " + j.ID, State: "discarded while job " + live.ID + " for the same key is live", Want: "the only job for its key"}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	j.State, j.RunAt, j.MaxAttempts = JobAvailable, r.At, j.Attempt+more
	if payload != nil {
		raw, err := payload()
		if err != nil {
			return err
		}
		j.Payload = raw
	}
	return tx.PutJob(&old, j)
}

// DismissJob takes a discarded job off the list with a reason: it becomes cancelled.
func (tx *Tx) DismissJob(j *Job, d Dismissal) error {
	old := *j
	j.State, j.Dismissed, j.UpdatedAt = JobCancelled, &d, d.At
	return tx.PutJob(&old, j)
}

// DeadLetterPage is one page of the dead-letter list, in the list's order
// (discarded jobs by id, then the replies by status and id), with the
// cursors of its neighbours: Next for ?after=, Prev for ?before=, "" where
// there is none.
type DeadLetterPage struct {
	Items []DeadLetter
	Next  string
	Prev  string
}

// deadSection is one run of the list's order: an index bucket and the
// prefix its keys share, the rest of a key naming the item.
type deadSection struct {
	tag    byte // the cursor's first byte
	bucket []byte
	prefix []byte
	outbox bool
}

// sections are the runs the filter lists, in order.
func (f DeadLetterFilter) sections() []deadSection {
	var out []deadSection
	if f.Kind == "" || f.Kind == DeadJob {
		out = append(out, deadSection{tag: 'j', bucket: bucketJobsDead})
	}
	if f.Kind == "" || f.Kind == DeadOutbox {
		for _, st := range f.replies() {
			out = append(out, deadSection{tag: st[0], bucket: bucketOutboxByStatus, prefix: append([]byte(st), 0), outbox: true})
		}
	}
	return out
}

// deadPos is a place in the list: a section and an item's id in it.
type deadPos struct {
	section int
	id      string
}

// cursor is the place of item id in section i, as a ?after= or ?before= value.
func (f DeadLetterFilter) cursor(i int, id string) string {
	return string(f.sections()[i].tag) + ":" + id
}

// ErrBadCursor refuses a page cursor this list did not make.
var ErrBadCursor = errors.New("the page cursor is not one this list gives")

// position reads a cursor of the filter's list.
func (f DeadLetterFilter) position(cursor string) (deadPos, error) {
	if len(cursor) < 3 || cursor[1] != ':' {
		return deadPos{}, fmt.Errorf("%w: %q", ErrBadCursor, cursor)
	}
	for i, s := range f.sections() {
		if s.tag == cursor[0] {
			return deadPos{section: i, id: cursor[2:]}, nil
		}
	}
	return deadPos{}, fmt.Errorf("%w: %q", ErrBadCursor, cursor)
}

// walk calls fn with the items of the list that the filter keeps, strictly
// after from (forward) or strictly before it (backward; nil from: from the
// start or the end), until fn returns false.
func (f DeadLetterFilter) walk(tx *Tx, judge Judge, from *deadPos, forward bool, fn func(i int, dl DeadLetter) bool) error {
	secs := f.sections()
	order := make([]int, 0, len(secs))
	for i := range secs {
		if forward {
			order = append(order, i)
		} else {
			order = append([]int{i}, order...)
		}
	}
	for _, i := range order {
		if from != nil && (forward && i < from.section || !forward && i > from.section) {
			continue
		}
		s := secs[i]
		c := tx.bucket(s.bucket).Cursor()
		var k []byte
		switch {
		case from != nil && from.section == i:
			at := append(bytes.Clone(s.prefix), from.id...)
			k, _ = c.Seek(at)
			if forward && bytes.Equal(k, at) {
				k, _ = c.Next()
			} else if !forward {
				if k == nil {
					k, _ = c.Last()
				} else {
					k, _ = c.Prev()
				}
			}
		case forward:
			k, _ = c.Seek(s.prefix)
		default:
			k = lastWithPrefix(c, s.prefix)
		}
		for ; k != nil && bytes.HasPrefix(k, s.prefix); k = step(c, forward) {
			id := string(k[len(s.prefix):])
			var dl DeadLetter
			var err error
			if s.outbox {
				var o Outbox
				if o, err = tx.Outbox(id); err == nil {
					dl = deadOutbox(tx, o, judge)
				}
			} else {
				dl, err = deadJob(tx, id, judge)
			}
			if u, ok := AsUnreadable(err); ok && tx.skip(err, nil) {
				// One row that says so, in its place: the list goes on.
				kind := DeadJob
				if s.outbox {
					kind = DeadOutbox
				}
				dl, err = DeadLetter{ID: id, Kind: kind, State: "unreadable", Error: u.Error(), Why: "its record cannot be read, so nothing can be replayed from it", Unreadable: u, Effects: []string{}}, nil
			}
			if err != nil {
				return err
			}
			if f.keep(dl) && !fn(i, dl) {
				return nil
			}
		}
	}
	return nil
}

func step(c engine.Cursor, forward bool) []byte {
	if forward {
		k, _ := c.Next()
		return k
	}
	k, _ := c.Prev()
	return k
}

// lastWithPrefix is the last key with prefix (the last key when prefix is empty).
func lastWithPrefix(c engine.Cursor, prefix []byte) []byte {
	if len(prefix) == 0 {
		k, _ := c.Last()
		return k
	}
	end := bytes.Clone(prefix)
	end[len(end)-1]++ // prefixes end in a separator (0x00, ':'), never 0xFF
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k != nil && bytes.HasPrefix(k, prefix) {
		return k
	}
	return nil
}

// DeadLetterPage reads n items of the list the filter keeps, after the
// cursor after or, when before is given instead, the n items before it,
// in one read transaction.
func (s *Store) DeadLetterPage(f DeadLetterFilter, judge Judge, after, before string, n int) (DeadLetterPage, error) {
	var page DeadLetterPage
	n = max(n, 1)
	var from *deadPos
	forward := before == ""
	if c := after + before; c != "" {
		if after != "" && before != "" {
			return page, fmt.Errorf("%w: give after or before, not both", ErrBadCursor)
		}
		p, err := f.position(c)
		if err != nil {
			return page, err
		}
		from = &p
	}
	type placed struct {
		i  int
		dl DeadLetter
	}
	err := s.view(func(tx *Tx) error {
		var got []placed
		if err := f.walk(tx, judge, from, forward, func(i int, dl DeadLetter) bool {
			got = append(got, placed{i, dl})
			return len(got) <= n
		}); err != nil {
			return err
		}
		more := len(got) > n
		got = got[:min(len(got), n)]
		if !forward {
			slices.Reverse(got)
		}
		page = DeadLetterPage{Items: make([]DeadLetter, 0, len(got))}
		for _, p := range got {
			page.Items = append(page.Items, p.dl)
		}
		if len(got) == 0 {
			return nil
		}
		first, last := got[0], got[len(got)-1]
		// The side we walked to has items when the walk found more; the
		// side we came from, when one is still there past the page's end.
		beyond := func(p placed, fwd bool) (bool, error) {
			found := false
			err := f.walk(tx, judge, &deadPos{section: p.i, id: p.dl.ID}, fwd, func(int, DeadLetter) bool { found = true; return false })
			return found, err
		}
		next, prev := forward && more, !forward && more
		var err error
		if !forward {
			next, err = beyond(last, true)
		} else if from != nil {
			prev, err = beyond(first, false)
		}
		if err != nil {
			return err
		}
		if next {
			page.Next = f.cursor(last.i, last.dl.ID)
		}
		if prev {
			page.Prev = f.cursor(first.i, first.dl.ID)
		}
		return nil
	})
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("store: dead letters page: %w", err)
	}
	return page, nil
}
