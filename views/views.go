// Package views holds the dashboard's templ components: one layout and one
// component per page, each with typed parameters. Handlers in web/ gather
// the data, build these types and render; nothing here reads the store or
// the clock.
package views

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/handoff/handoff/store"
)

// Layout is what every logged-in page shows around its content.
type Layout struct {
	Title  string
	Active string // the nav entry to highlight: overview, drafts, handoffs, reconcile, users, settings, audit
	User   string
	Role   store.Role
	CSRF   string
	Counts store.Counts
	Query  string    // the search box's value
	Now    time.Time // the request's clock, for "5m ago"
	// Unreadable is each record the page's reads stepped over because it
	// cannot be read: one row each, above the content (UnreadableRows).
	Unreadable []store.Unreadable
	// Undo is what the person can still take back, and what their last
	// action did (UndoSlot, views/undo.templ); nil shows an empty slot.
	Undo *UndoStack
}

// Admin reports whether the logged-in person is an admin.
func (l Layout) Admin() bool { return l.Role == store.RoleAdmin }

// Notice is a one-sentence message at the top of a page or card.
type Notice struct {
	Tone string // ok, warn, error
	Text string
}

// ErrorPage is a failed page request: a status and one sentence.
type ErrorPage struct {
	Status   int
	Message  string
	LoggedIn bool
}

// LoginPage is the login form.
type LoginPage struct {
	Name  string
	Next  string
	Error string
}

// htmxConfig swaps every answer, errors included: the dashboard's error
// fragments say where they go (HX-Retarget), and the queue's conflict
// answers are cards. Indicator styles stay off for the CSP.
const htmxConfig = `{"responseHandling":[{"code":"204","swap":false},{"code":"...","swap":true}],"includeIndicatorStyles":false,"allowEval":false}`

// csrfHeaders is the hx-headers value that sends the CSRF token with every htmx request.
func csrfHeaders(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

// when formats a time for reading: UTC, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// whenPtr is when for an optional time.
func whenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return when(*t)
}

// iso is a machine-readable time for <time datetime>.
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Age says how long d is in a person's words: 45s, 12m, 3h 5m, 2d 4h.
func Age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh %dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	default:
		days := int(d.Hours()) / 24
		if h := int(d.Hours()) % 24; h != 0 {
			return fmt.Sprintf("%dd %dh", days, h)
		}
		return fmt.Sprintf("%dd", days)
	}
}

// ago is "3m ago" from now.
func ago(now, t time.Time) string { return Age(now.Sub(t)) + " ago" }

// FirstLine is the first non-empty line of s, cut to n runes.
func FirstLine(s string, n int) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			s = line
			break
		}
	}
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Fact is one labelled value in a definition list.
type Fact struct {
	Label string
	Value string
	Mono  bool // ids, keys, hashes: set in a monospace face
}

// sortedFields turns a field map into facts, by name.
func sortedFields(m map[string]string) []Fact {
	out := make([]Fact, 0, len(m))
	for k, v := range m {
		out = append(out, Fact{Label: k, Value: v})
	}
	slices.SortFunc(out, func(a, b Fact) int { return strings.Compare(a.Label, b.Label) })
	return out
}

// orDash shows an empty value as a dash.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func itoa(n int) string { return fmt.Sprint(n) }

// atLeast is n, with a "+" when it is a floor (a count that stopped at its bound).
func atLeast(n int, more bool) string {
	if more {
		return itoa(n) + "+"
	}
	return itoa(n)
}

// statusTitle heads an error page.
func statusTitle(status int) string {
	switch status {
	case 400:
		return "That did not work"
	case 401:
		return "You are logged out"
	case 403:
		return "Not allowed"
	case 404:
		return "Not found"
	case 409:
		return "Already decided"
	case 429:
		return "Too many tries"
	}
	if status >= 500 {
		return "Something went wrong"
	}
	return "That did not work"
}
