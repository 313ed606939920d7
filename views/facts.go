package views

import (
	"strconv"

	"github.com/handoff/handoff/store"
)

// FactsPage is a client's facts page: the version shown (the current one
// unless another was asked for), the edit form, the history, a diff when
// one was asked for, and the facts_file's text when it waits for an admin.
type FactsPage struct {
	ClientID, ClientName string
	Current              *store.FactsVersion // nil: the client has no facts yet
	Shown                *store.FactsVersion // the version shown: Current, or the one asked for
	History              []store.FactsVersion
	Diff                 *FactsDiff
	// File is the client's facts_file ("" when it has none); Offer its
	// text when it changed after a person edited the facts.
	File  string
	Offer *store.FactsFile
	// Text is the edit form's text: the current version's, or what was
	// posted and refused (nothing typed is lost).
	Text   string
	Max    int // the most bytes facts may have
	Notice *Notice
}

// FactsDiff is the line diff between two versions.
type FactsDiff struct {
	From, To int
	Lines    []DiffLine
}

// DiffLine is one line of a diff: Op "+", "-" or " ".
type DiffLine struct {
	Op, Text string
}

// diffClass is the class of a diff line.
func diffClass(op string) string {
	switch op {
	case "+":
		return "diff-add"
	case "-":
		return "diff-del"
	}
	return "diff-same"
}

// factsURL is the facts page of a client, with a query ("" for none).
func factsURL(client, query string) string {
	u := "/clients/" + client + "/facts"
	if query != "" {
		u += "?" + query
	}
	return u
}

// nextVersion is the number a save would give.
func (p FactsPage) nextVersion() int {
	if p.Current == nil {
		return 1
	}
	return p.Current.Version + 1
}

// base is the version the form started from (0: none).
func (p FactsPage) base() string {
	if p.Current == nil {
		return "0"
	}
	return strconv.Itoa(p.Current.Version)
}

// sourceWords says where a version came from.
func sourceWords(v store.FactsVersion) string {
	switch v.Source {
	case "config":
		return "read from " + v.File + " at start"
	case "facts_file":
		return "read from " + v.File + " by " + v.Author
	case "api":
		return "written by " + v.Author + " through the API"
	}
	return "written by " + v.Author + " on the dashboard"
}
