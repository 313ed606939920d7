package views

import (
	"net/url"
	"strings"
	"time"

	"github.com/handoff/handoff/store"
)

// DeadLetterFilter is the dead-letter list's filters, as typed.
type DeadLetterFilter struct {
	Kind      string // "", job or outbox
	Channel   string
	Error     string // a piece of the error text
	OlderThan string // a duration: in their state longer than this
}

// Query is the filter as a query string, without the "?".
func (f DeadLetterFilter) Query() string {
	q := url.Values{}
	for k, v := range map[string]string{"kind": f.Kind, "channel": f.Channel, "error": f.Error, "older_than": f.OlderThan} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// Set reports whether any filter is given.
func (f DeadLetterFilter) Set() bool { return f.Query() != "" }

// DeadLetterList is the dead-letter page.
type DeadLetterList struct {
	Filter   DeadLetterFilter
	Channels []string // for the channel filter
	Items    []store.DeadLetter
	Safe     int // how many of Items a bulk replay would replay
	Notice   *Notice
	Limit    int
	More     bool // the list was cut at Limit
}

// BulkStatus is what one bulk replay has done so far.
type BulkStatus struct {
	ID       string
	State    string // running, done, cancelled
	Total    int
	Replayed []string
	Skipped  []BulkItem // unsafe items, each with why
	Failed   []BulkItem // safe items whose replay was refused, each with the answer
	CSRF     string
}

// BulkItem is one item a bulk replay passed over, and why.
type BulkItem struct {
	ID  string
	Why string
}

// Running reports whether the run still goes on (the status keeps polling).
func (b BulkStatus) Running() bool { return b.State == "running" }

// URL is where the run's status is read.
func (b BulkStatus) URL() string { return "/dead-letters/bulk/" + url.PathEscape(b.ID) }

// deadLetterURL is the path of an action on a dead letter.
func deadLetterURL(id, action string) string {
	return "/dead-letters/" + url.PathEscape(id) + "/" + action
}

// regenerable reports whether an item is a draft job, the one kind a replay
// can draft afresh.
func regenerable(dl store.DeadLetter) bool {
	return dl.Kind == store.DeadJob && dl.Job != nil && dl.Job.Kind == store.KindDraft
}

// kindLabel names what an item is.
func kindLabel(dl store.DeadLetter) string {
	if dl.Job != nil && dl.Kind == store.DeadJob {
		return dl.Job.Kind + " job"
	}
	return "reply"
}

// replaysOf lists the earlier replays of an item.
func replaysOf(dl store.DeadLetter) []store.Replay {
	var out []store.Replay
	if dl.Job != nil {
		out = append(out, dl.Job.Replays...)
	}
	if dl.Outbox != nil && dl.Kind == store.DeadOutbox {
		out = append(out, dl.Outbox.Replays...)
	}
	return out
}

// replayLine says what one replay was, in a sentence.
func replayLine(r store.Replay) string {
	s := when(r.At) + ": replayed by " + r.By
	var how []string
	if r.Regenerate {
		how = append(how, "drafted afresh")
	}
	if r.Confirmed {
		how = append(how, "confirmed after a check")
	}
	if len(how) > 0 {
		s += " (" + strings.Join(how, ", ") + ")"
	}
	return s
}

// tookLabel is how long an attempt took, or "running".
func tookLabel(a store.Attempt) string {
	if a.EndedAt == nil {
		return "running"
	}
	return a.EndedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
}

// KeyList is the idempotency keys page.
type KeyList struct {
	State  string // "" for every state
	Keys   []store.IdemKey
	Notice *Notice
	Limit  int
	More   bool
}

// KeyStates are the tabs of the keys page, in the order of their life.
var KeyStates = []store.KeyState{store.KeyStarted, store.KeyEffectPending, store.KeyNeedsReconciliation, store.KeyCompleted}

// keysURL links to the keys page in one state ("" for all).
func keysURL(state string) string {
	if state == "" {
		return "/keys"
	}
	return "/keys?" + url.Values{"state": {state}}.Encode()
}

// keyReconcileURL is where a verdict on a key is posted.
func keyReconcileURL(key string) string { return "/keys/" + url.PathEscape(key) + "/reconcile" }

// unsettled reports whether a key waits for a person's verdict.
func unsettled(k store.IdemKey) bool {
	return k.State == store.KeyNeedsReconciliation || k.State == store.KeyEffectPending
}

// takeoverLine says what one takeover was.
func takeoverLine(t store.Takeover) string {
	return when(t.At) + ": taken over from a " + string(t.PreviousState) + " claim whose lease ended " + when(t.ExpiredLease)
}

// leaseLabel is a key's lease, saying when it has run out.
func leaseLabel(now time.Time, k store.IdemKey) string {
	if k.State == store.KeyCompleted || k.LeaseUntil.IsZero() {
		return "—"
	}
	if !now.Before(k.LeaseUntil) {
		return when(k.LeaseUntil) + " (expired)"
	}
	return when(k.LeaseUntil) + " (in " + Age(k.LeaseUntil.Sub(now)) + ")"
}
