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

// values is the filter's query parameters, the empty ones left out.
func (f DeadLetterFilter) values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"kind": f.Kind, "channel": f.Channel, "error": f.Error, "older_than": f.OlderThan} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Query is the filter as a query string, without the "?".
func (f DeadLetterFilter) Query() string { return f.values().Encode() }

// Set reports whether any filter is given.
func (f DeadLetterFilter) Set() bool { return f.Query() != "" }

// DeadLetterList is one page of the dead-letter table.
type DeadLetterList struct {
	Filter   DeadLetterFilter
	Channels []string // for the channel filter
	Items    []store.DeadLetter
	Notice   *Notice
	// Next and Prev are the cursors of the neighbouring pages ("" at an end).
	Next, Prev string
	// Lookup names the providers that can find a send by our reference.
	Lookup map[string]bool
}

// DeadLetterItem is one dead letter on a page of its own: everything known
// about it and its actions.
type DeadLetterItem struct {
	Item   store.DeadLetter
	Notice *Notice
	// Lookup: its reply's provider can be asked now whether it has it.
	Lookup bool
}

// pageURL is the table's page after (or before) cursor, under the same filter.
func (f DeadLetterFilter) pageURL(dir, cursor string) string {
	q := f.values()
	q.Set(dir, cursor)
	return "/dead-letters?" + q.Encode()
}

// DeadLetterURL is the page of one dead letter.
func DeadLetterURL(id string) string { return "/dead-letters/" + url.PathEscape(id) }

// clip shortens s to at most n characters on one line, marking the cut.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return strings.TrimSpace(string(r[:n-1])) + "…"
	}
	return s
}

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// replyText is the reply an item holds: its outbox row's, or its draft's.
func replyText(dl store.DeadLetter) string {
	switch {
	case dl.Outbox != nil:
		return dl.Outbox.Text
	case dl.Draft != nil:
		return dl.Draft.Text
	}
	return ""
}

// Replay safety, as the table's "safe" column says it.
const (
	SafeResend = "resend-safe"    // a replay cannot reach the customer twice
	SafeLookup = "lookup"         // unsure, and the provider can be asked
	SafePerson = "needs a person" // unsure, and only a person can find out
)

// safety is an item's "safe" column and the chip class it is shown with.
func safety(dl store.DeadLetter, lookup map[string]bool) (label, class string) {
	switch {
	case dl.Safe:
		return SafeResend, "completed"
	case dl.Outbox != nil && lookup[dl.Outbox.Provider]:
		return SafeLookup, "effect_pending"
	}
	return SafePerson, "failed"
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
	if dl.Outbox != nil && dl.Outbox.Kind == store.OutboxCRM {
		return "CRM write (" + dl.Outbox.To + ")" // its text is the record written, not a reply
	}
	if dl.Outbox != nil && dl.Outbox.Kind == store.OutboxEvent {
		return "outbound event (" + dl.Outbox.To + ")" // its text is the JSON body posted
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
