package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// A reminder is one stage of the nudges a waiting draft gets on the
// approval surfaces (package approvals): re-announced once it waited
// approvals.remind_after, escalated to a second group once it waited
// approvals.escalate_after, announced once its channel's reply window
// closes within review.window_warning. Each stage happens once per draft:
//
//	reminders   draftID 0x00 stage -> Reminder JSON
//
// AddReminder writes one only when the draft has none of that stage, in
// the transaction that enqueues the stage's jobs, so however many sweeps
// run at once a stage is enqueued once. The bucket is created by the first
// reminder written (a file without one has none; reads find nothing), so
// no migration and no schema version.
var bucketReminders = []byte("reminders")

// Reminder is one stage of a draft's reminders, as it was enqueued.
type Reminder struct {
	V     int    `json:"v"`
	Draft string `json:"draft"`
	Stage string `json:"stage"` // "remind", "escalate", "window"
	// Surfaces are the surfaces the stage was enqueued on (a job each).
	Surfaces []string  `json:"surfaces,omitempty"`
	At       time.Time `json:"at"`
	// Closes is, for the window stage, when the window closes.
	Closes time.Time `json:"closes,omitzero"`
}

func reminderKey(draft, stage string) []byte { return []byte(draft + "\x00" + stage) }

// Reminder is stage's reminder of draft; ErrNotFound when it has none.
func (tx *Tx) Reminder(draft, stage string) (Reminder, error) {
	b, _ := tx.cardBucket(bucketReminders, false)
	if b == nil {
		return Reminder{}, ErrNotFound
	}
	var r Reminder
	if err := getJSON(b, reminderKey(draft, stage), &r); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Reminder{}, err
		}
		return Reminder{}, unreadableOf("reminder", reminderKey(draft, stage), err)
	}
	return r, nil
}

// AddReminder writes r unless its draft has a reminder of its stage
// already (one that cannot be read counts as one: a stage is never
// repeated); added reports whether it wrote.
func (tx *Tx) AddReminder(r Reminder) (added bool, err error) {
	if r.Draft == "" || r.Stage == "" {
		return false, fmt.Errorf("reminder: a reminder needs a draft and a stage (got %q, %q)", r.Draft, r.Stage)
	}
	if bytes.IndexByte([]byte(r.Draft+r.Stage), 0) >= 0 || !utf8.ValidString(r.Draft) || !utf8.ValidString(r.Stage) || !utf8.ValidString(strings.Join(r.Surfaces, "\x00")) {
		return false, errors.New("reminder: a reminder's draft, stage and surfaces are UTF-8 text, the draft and stage without a NUL byte")
	}
	b, err := tx.cardBucket(bucketReminders, true)
	if err != nil {
		return false, err
	}
	key := reminderKey(r.Draft, r.Stage)
	if b.Get(key) != nil {
		return false, nil
	}
	r.V = recordVersion
	return true, putJSON(b, key, r)
}

// RemindersOf are the reminders of draft, by stage.
func (tx *Tx) RemindersOf(draft string) ([]Reminder, error) {
	b, _ := tx.cardBucket(bucketReminders, false)
	if b == nil {
		return nil, nil
	}
	var out []Reminder
	prefix := []byte(draft + "\x00")
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r Reminder
		if err := decode(v, &r); err != nil {
			tx.skip(unreadableOf("reminder", k, err), nil) // listed as unreadable; the others are read
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// checkReminders proves each reminder is stored under its draft and stage
// (Check); one that cannot be read is listed.
func checkReminders(tx *Tx, r *checking) []error {
	b := tx.bucket(bucketReminders)
	if b == nil {
		return nil
	}
	var problems []error
	_ = b.ForEach(func(k, v []byte) error {
		var rem Reminder
		if err := unmarshal(v, &rem, true); err != nil {
			r.unreadable = append(r.unreadable, Unreadable{Kind: "reminder", ID: string(bytes.ReplaceAll(k, []byte{0}, []byte{'/'})), Reason: clip(err.Error())})
			return nil
		}
		if !bytes.Equal(k, reminderKey(rem.Draft, rem.Stage)) {
			problems = append(problems, fmt.Errorf("check: the reminder at %q is the %s reminder of draft %s", bytes.ReplaceAll(k, []byte{0}, []byte{'/'}), rem.Stage, rem.Draft))
		}
		return nil
	})
	return problems
}
