package views

import (
	"net/url"

	"github.com/a-h/templ"

	"github.com/handoff/handoff/store"
)

// Audit is one page of the audit log with the filter that made it.
type Audit struct {
	Filter  store.AuditFilter
	Page    store.AuditPage
	Actions []string // the actions the log knows, offered while typing
}

// Filtered says a filter narrows the log.
func (a Audit) Filtered() bool {
	return a.Filter.Who != "" || a.Filter.Action != "" || a.Filter.Text != ""
}

// URL is the page of the same filter that starts before entry id ("": the newest).
func (a Audit) URL(before string) templ.SafeURL {
	q := url.Values{}
	for k, v := range map[string]string{"who": a.Filter.Who, "action": a.Filter.Action, "q": a.Filter.Text, "before": before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return "/audit"
	}
	return templ.SafeURL("/audit?" + q.Encode())
}

// summary says what the page holds, in words.
func (a Audit) summary() string {
	n := len(a.Page.Entries)
	s := count(n, "entry", "entries")
	if a.Filtered() {
		s += " matching the filter"
	}
	switch {
	case a.Filter.Before == "" && a.Page.Next == "":
		s += ", newest first: the whole log."
	case a.Filter.Before == "":
		s += ", the newest first."
	default:
		s += ", older ones, newest first."
	}
	if a.Page.Partial {
		s += " This page looked through " + count(a.Page.Scanned, "entry", "entries") + " and stopped there so that it answers quickly; Older → looks further back."
	}
	return s
}
