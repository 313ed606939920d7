package views

import (
	"strings"
	"time"
)

// SearchPage is what a search found: leads whose name, contact or
// conversation id starts with the query, then leads whose recent messages
// hold it.
type SearchPage struct {
	Query string
	Hits  []SearchHit
	More  bool // there were more than the page shows
	// Scanned is how many of the newest messages the text search read,
	// back to Oldest; TextScan is its bound.
	Scanned  int
	Oldest   time.Time
	TextScan int
	Now      time.Time
}

// SearchHit is one lead a search found.
type SearchHit struct {
	Name    string
	Contact string
	Channel string
	Status  string
	Stuck   bool
	By      string // name, contact, conversation or text: what matched
	Snippet string // the message that matched (text), else the latest
	At      time.Time
	URL     string // the lead's latest message's timeline
}

// byLabel says what matched, for a person.
func byLabel(by string) string {
	switch by {
	case "name", "contact":
		return by
	case "conversation":
		return "conversation id"
	}
	return "message text"
}

// OneLine is s folded to one line (every run of spaces and line breaks one
// space), cut to n runes with an ellipsis: a message in a list.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return strings.TrimSpace(string(r[:n-1])) + "…"
	}
	return s
}
