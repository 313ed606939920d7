package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Repair is what a migration at open found wrong on disk and rewrote:
// Open keeps it for the caller to log (Store.Repairs).
type Repair struct {
	Migration int
	// Repaired records now read back right; Unreadable ones are kept,
	// marked with why (Event.Unreadable); Verified ones were checked and
	// left as they were.
	Repaired, Unreadable, Verified int
}

func (r Repair) String() string {
	return fmt.Sprintf("repaired %d events (migration %d): %d kept marked unreadable, %d verified as they were", r.Repaired, r.Migration, r.Unreadable, r.Verified)
}

// migrateRepairEvents is migration 8. Up to schema 8 an event kept its
// body inside its record, where json.Marshal compacted it and escaped
// < > & in it, while its text_at had been measured on the body as
// received: for a long text with & < > in it, or a body with whitespace
// between its tokens, the place pointed elsewhere and the event could not
// be read. From schema 9 the body follows the record as received
// (bodyonce.go). This migration looks at every schema 8 event that keeps
// its text as a place, and leaves it as it is only when the place is
// exactly one string value of the stored body; any other is rewritten in
// the new form with its text re-derived from the stored body (textFor),
// or, where that cannot be done, marked unreadable with the reason, its
// body kept. Nothing is deleted. An event that kept its text as itself,
// or was written in the new form, is not touched.
func migrateRepairEvents(tx *Tx) (Repair, error) {
	rep := Repair{Migration: 8}
	type fix struct{ old, ev Event }
	var fixes []fix
	err := tx.bucket(bucketEvents).ForEach(func(k, raw []byte) error {
		if bytes.IndexByte(raw, '\n') >= 0 || !bytes.Contains(raw, []byte(`"text_at"`)) {
			return nil // the new form, or a text kept as itself
		}
		var ev Event
		if json.Unmarshal(raw, &ev) != nil || ev.TextAt == nil {
			return nil // damage is Check's to name; or "text_at" was in a string
		}
		at := *ev.TextAt
		why := placeProblem(ev.Body, at)
		if why == "" {
			rep.Verified++
			return nil
		}
		old := ev
		old.TextAt = nil // what the index entries derive from is unchanged
		ev.TextAt = nil
		if text, whyNot := textFor(ev.Body, at[1]); whyNot == "" {
			ev.Text = text
			rep.Repaired++
		} else {
			ev.Text = ""
			ev.Unreadable = fmt.Sprintf("its text could not be read back from what schema 8 stored: %s, and %s", why, whyNot)
			rep.Unreadable++
		}
		fixes = append(fixes, fix{old, ev})
		return nil
	})
	if err != nil {
		return rep, err
	}
	for i := range fixes {
		if err := eventsTable.put(tx, &fixes[i].old, &fixes[i].ev); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// strToken is one string literal of a JSON document: body[start:end],
// quotes included. name is the member name of a value (empty for a value
// in an array or at the top).
type strToken struct {
	start, end int
	key        bool
	name       string
}

// stringTokens lists the string literals of the valid JSON document body,
// names and values, in order.
func stringTokens(body []byte) []strToken {
	var toks []strToken
	next := func(i int) byte { // the first byte from i that is not whitespace
		for ; i < len(body); i++ {
			switch body[i] {
			case ' ', '\t', '\r', '\n':
			default:
				return body[i]
			}
		}
		return 0
	}
	lastKey := ""
	afterColon := false
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case ':':
			afterColon = true
			continue
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
		default:
			afterColon = false
			continue
		}
		j := i + 1
		for j < len(body) && body[j] != '"' {
			if body[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(body) {
			break // not valid JSON: no more tokens
		}
		tok := strToken{start: i, end: j + 1, key: next(j+1) == ':'}
		switch {
		case tok.key:
			var s string
			_ = json.Unmarshal(body[i:j+1], &s)
			lastKey = s
		case afterColon:
			tok.name = lastKey
		}
		toks = append(toks, tok)
		afterColon = false
		i = j
	}
	return toks
}

// placeProblem is why the schema 8 place at in body is not the text: ""
// when body[off:off+n] is exactly one string value of body.
func placeProblem(body []byte, at [2]int) string {
	off, n := at[0], at[1]
	if off < 0 || n < 2 || off > len(body) || n > len(body)-off {
		return fmt.Sprintf("its place %d+%d is outside its %d-byte body", off, n, len(body))
	}
	for _, t := range stringTokens(body) {
		if t.start == off && t.end == off+n && !t.key {
			var s string
			if json.Unmarshal(body[off:off+n], &s) == nil {
				return ""
			}
		}
	}
	return fmt.Sprintf("its place %d+%d in its body is not one string value of it", off, n)
}

// textFields are member names that hold a message's text in the bodies
// providers send, most likely first: when several string values of a
// body could be an event's text, the one under the earliest of these
// names is taken.
var textFields = []string{"text", "body", "Body", "TextBody", "StrippedTextReply", "stripped-text", "body-plain", "message", "caption", "content"}

// textFor re-derives an event's text from its schema 8 body, where n was
// the length of the text's literal as received (no HTML escapes, which
// the stored body may have added): the string values whose literal,
// written so, is n bytes long. One distinct such value is the text; of
// several, the one under the first of textFields that has exactly one.
// whyNot says why no text could be chosen.
func textFor(body []byte, n int) (text, whyNot string) {
	type cand struct{ s, name string }
	var cands []cand
	for _, t := range stringTokens(body) {
		if t.key {
			continue
		}
		var s string
		if json.Unmarshal(body[t.start:t.end], &s) != nil || len(literal(s)) != n {
			continue
		}
		if !slices.ContainsFunc(cands, func(c cand) bool { return c.s == s && c.name == t.name }) {
			cands = append(cands, cand{s, t.name})
		}
	}
	distinct := map[string]bool{}
	for _, c := range cands {
		distinct[c.s] = true
	}
	switch len(distinct) {
	case 0:
		return "", fmt.Sprintf("no string value of its body is %d bytes long as received", n)
	case 1:
		return cands[0].s, ""
	}
	for _, f := range textFields {
		var under []string
		for _, c := range cands {
			if c.name == f && !slices.Contains(under, c.s) {
				under = append(under, c.s)
			}
		}
		switch len(under) {
		case 0:
			continue
		case 1:
			return under[0], ""
		}
		return "", fmt.Sprintf("%d different string values of its body named %q are %d bytes long as received", len(under), f, n)
	}
	return "", fmt.Sprintf("%d different string values of its body are %d bytes long as received, and none is named like a text", len(distinct), n)
}
