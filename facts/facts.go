// Package facts keeps a client's facts (hours, prices, policies: what its
// drafts may state) as numbered versions a person can edit on the
// dashboard, and the rules around them: how a text becomes entries with
// ids a draft cites, how the config's facts_file seeds and later offers a
// version, and the line diff between two. Every version is written once
// and never changed (store/facts.go keeps them); the next draft reads the
// newest, so an edit needs no restart.
package facts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// Where a version came from (store.FactsVersion.Source).
const (
	SourceConfig    = "config"     // the facts_file, read at start
	SourceFile      = "facts_file" // the facts_file, read again by an admin on the dashboard
	SourceDashboard = "dashboard"  // written by an admin on the dashboard
	SourceAPI       = "api"        // written through PUT /api/v1/clients/{client}/facts
)

// HistoryLimit bounds the versions a page or the API lists.
const HistoryLimit = 200

// TextError is facts that cannot be kept: too long for a prompt, or not text.
type TextError struct{ Problem string }

func (e *TextError) Error() string { return e.Problem }

// Check refuses facts longer than config.MaxFacts or not UTF-8, in one
// sentence; nothing is stored then.
func Check(text string) error {
	switch {
	case len(text) > config.MaxFacts:
		return &TextError{Problem: fmt.Sprintf("the facts are %d bytes; at most %d go into a prompt, so nothing was saved: shorten them", len(text), config.MaxFacts)}
	case !utf8.ValidString(text):
		return &TextError{Problem: "the facts are not UTF-8 text, so nothing was saved"}
	}
	return nil
}

// normal is text as a version keeps it: LF line ends, no blank space
// around it.
func normal(text string) string {
	return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"))
}

// Entries splits text into its entries: each line that is not blank, with
// a leading "- ", "* " or "• " taken off (a line said twice is one entry).
// An entry whose text one of prev has keeps that id, so [F3] names the
// same fact from version to version until its words change; every other
// gets F<next>, and the next number unused is returned.
func Entries(text string, prev []store.FactEntry, next int) ([]store.FactEntry, int) {
	next = max(next, 1)
	ids := make(map[string]string, len(prev))
	for _, e := range prev {
		ids[e.Text] = e.ID
	}
	var out []store.FactEntry
	seen := map[string]bool{}
	for _, line := range strings.Split(normal(text), "\n") {
		t := strings.TrimSpace(line)
		for _, bullet := range []string{"- ", "* ", "• "} {
			if rest, ok := strings.CutPrefix(t, bullet); ok {
				t = strings.TrimSpace(rest)
				break
			}
		}
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		id, ok := ids[t]
		if !ok {
			id = "F" + strconv.Itoa(next)
			next++
		}
		out = append(out, store.FactEntry{ID: id, Text: t})
	}
	return out, next
}

// Edit is one new version asked for.
type Edit struct {
	Client, Text, Author, Source, File string
	At                                 time.Time
	// Audit, when set, is the audit entry of a new version, written in the
	// transaction that makes it (nil: none, as a seed from the config).
	Audit func(v store.FactsVersion) store.AuditEntry
}

// Saved is what a save did: the version now current, and whether it is
// a new one (false: the text was the current version's already).
type Saved struct {
	Version store.FactsVersion
	New     bool
	// After is the version the new one follows: when it is not the one the
	// editor started from (Base), someone saved meanwhile, and both are kept.
	After int
}

// Save writes e as the client's next version, unless its text is the
// current version's, in one write transaction: two admins saving at once
// both get a version, each its own number.
func Save(ctx context.Context, st *store.Store, e Edit) (Saved, error) {
	var out Saved
	err := st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = SaveTx(tx, e)
		return err
	})
	return out, err
}

// SaveTx is Save in the caller's transaction.
func SaveTx(tx *store.Tx, e Edit) (Saved, error) {
	text := normal(e.Text)
	if err := Check(text); err != nil {
		return Saved{}, err
	}
	latest, err := tx.LatestFacts(e.Client)
	switch {
	case errors.Is(err, store.ErrNotFound):
		latest = store.FactsVersion{}
	case err != nil:
		// The newest version cannot be read: a new one cannot be made
		// after it without knowing its ids.
		return Saved{}, fmt.Errorf("facts of client %s: %w", e.Client, err)
	case latest.Text == text:
		return Saved{Version: latest, After: latest.Version}, nil
	}
	entries, next := Entries(text, latest.Entries, latest.NextID)
	v := store.FactsVersion{
		Client: e.Client, Version: latest.Version + 1, Text: text, Entries: entries, NextID: next,
		Author: e.Author, Source: e.Source, File: e.File, CreatedAt: e.At.UTC(),
	}
	if err := tx.InsertFacts(v); err != nil {
		return Saved{}, err
	}
	if e.Audit != nil {
		if err := tx.Audit(e.Audit(v)); err != nil {
			return Saved{}, err
		}
	}
	v.V = 1
	return Saved{Version: v, New: true, After: latest.Version}, nil
}

// Current is the client's newest facts version; ok false when it has none.
func Current(st *store.Store, client string) (v store.FactsVersion, ok bool, err error) {
	err = st.View(func(tx *store.Tx) error {
		v, ok, err = CurrentIn(tx, client)
		return err
	})
	return v, ok, err
}

// CurrentIn is Current inside tx.
func CurrentIn(tx *store.Tx, client string) (store.FactsVersion, bool, error) {
	v, err := tx.LatestFacts(client)
	if errors.Is(err, store.ErrNotFound) {
		return store.FactsVersion{}, false, nil
	}
	return v, err == nil, err
}

// Outcome says what reading a client's facts_file did.
type Outcome string

// The outcomes of Seed and Reload.
const (
	Seeded    Outcome = "seeded"    // the client had no facts: the file's text is version 1
	Updated   Outcome = "updated"   // the file changed and nobody had edited the facts: a new version
	Offered   Outcome = "offered"   // the file changed, but a person edited the facts since: the file waits for an admin
	Unchanged Outcome = "unchanged" // the file says what it said when last read, or what the current version says
	NoFile    Outcome = "no file"   // the client has no facts_file
)

// Seed reads the config's facts_file of a client into the store at start.
// A client without versions gets the file's text as version 1. Later, a
// file whose text changed since it was last read becomes the next
// version, unless the current one was written by a person (dashboard or
// API): an edit is never overwritten by a start, so the file's new text is
// kept as offered, and the facts page says so and reads it on an admin's
// word (Reload). A file emptied is a change like another (the next
// version has no entries). A file that did not change leaves the stored
// facts as they are, edited or not; a facts_file taken out of the config
// leaves them too.
func Seed(ctx context.Context, st *store.Store, client, path, text string, now time.Time) (Outcome, store.FactsVersion, error) {
	if path == "" {
		return NoFile, store.FactsVersion{}, nil
	}
	text = normal(text)
	if err := Check(text); err != nil {
		return "", store.FactsVersion{}, fmt.Errorf("facts_file %s of client %s: %w", path, client, err)
	}
	var (
		out Outcome
		cur store.FactsVersion
	)
	err := st.Update(ctx, func(tx *store.Tx) error {
		out, cur = "", store.FactsVersion{}
		file, ferr := tx.FactsFile(client)
		if ferr != nil && !errors.Is(ferr, store.ErrNotFound) && !tx.Skip(ferr) {
			return ferr
		}
		latest, lerr := tx.LatestFacts(client)
		if lerr != nil && !errors.Is(lerr, store.ErrNotFound) {
			return lerr
		}
		seen := store.FactsFile{Client: client, Path: path, Text: text, ReadAt: now.UTC()}
		switch {
		case errors.Is(lerr, store.ErrNotFound) && text == "":
			out = Unchanged
			return nil
		case errors.Is(lerr, store.ErrNotFound):
			out = Seeded
		case ferr == nil && file.Text == text && file.Path == path:
			out, cur = Unchanged, latest
			return nil
		case latest.Text == text:
			out, cur = Unchanged, latest
			seen.Version = latest.Version
			return tx.PutFactsFile(seen)
		case latest.Source == SourceDashboard || latest.Source == SourceAPI:
			out, cur = Offered, latest
			return tx.PutFactsFile(seen)
		default:
			out = Updated
		}
		s, err := SaveTx(tx, Edit{Client: client, Text: text, Author: "config", Source: SourceConfig, File: path, At: now})
		if err != nil {
			return err
		}
		cur, seen.Version = s.Version, s.Version.Version
		return tx.PutFactsFile(seen)
	})
	return out, cur, err
}

// Offer is a client's facts_file text that changed after a person edited
// the facts: it waits for an admin to read it in (Reload). ok false when
// there is none.
func Offer(st *store.Store, client string) (f store.FactsFile, ok bool, err error) {
	err = st.View(func(tx *store.Tx) error {
		f, err = tx.FactsFile(client)
		if err != nil {
			return err
		}
		latest, err := tx.LatestFacts(client)
		if err != nil {
			return err
		}
		ok = f.Version == 0 && f.Text != latest.Text
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.FactsFile{}, false, nil
	}
	if err != nil {
		var u *store.Unreadable
		if errors.As(err, &u) {
			return store.FactsFile{}, false, nil // the offer is lost, the facts are not
		}
		return store.FactsFile{}, false, err
	}
	return f, ok, nil
}

// Reload reads the client's facts_file from the disk again, on an admin's
// word, without a restart: its text becomes the next version (written by
// that admin, from facts_file), unless it is the current one already.
func Reload(ctx context.Context, st *store.Store, client, path, author string, now time.Time, audit func(store.FactsVersion) store.AuditEntry) (Saved, error) {
	if path == "" {
		return Saved{}, &TextError{Problem: "client " + client + " has no facts_file in the config (clients[].facts_file or drafter.facts_file)"}
	}
	text, err := config.ReadFacts(path)
	if err != nil {
		return Saved{}, &TextError{Problem: err.Error()}
	}
	var out Saved
	err = st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = SaveTx(tx, Edit{Client: client, Text: text, Author: author, Source: SourceFile, File: path, At: now, Audit: audit})
		if err != nil {
			return err
		}
		return tx.PutFactsFile(store.FactsFile{Client: client, Path: path, Text: normal(text), ReadAt: now.UTC(), Version: out.Version.Version})
	})
	return out, err
}

// Version reads version n of a client's facts.
func Version(st *store.Store, client string, n int) (v store.FactsVersion, err error) {
	err = st.View(func(tx *store.Tx) error {
		v, err = tx.FactsVersion(client, n)
		return err
	})
	return v, err
}

// History is the client's versions, newest first, at most HistoryLimit.
func History(st *store.Store, client string) (vs []store.FactsVersion, err error) {
	err = st.View(func(tx *store.Tx) error {
		vs, err = tx.FactsHistory(client, HistoryLimit)
		return err
	})
	return vs, err
}
