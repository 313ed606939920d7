package store

import (
	"slices"
	"strings"
	"unicode"
)

// migrateFoldedTerms is migration 11: from schema 12 idx_handoffs_by_term
// keeps each term folded (no accents: "zoë" is "zoe"), each word of a
// name split at its punctuation too ("o'brien" and "brien"), and every
// run of at least minDigits digits of a phone number as the start of a
// suffix of its digits (search.go). The index is derived from the leads
// alone, so the migration drops it and writes it again from every lead.
// A lead that cannot be read gets no entries (Check names the lead, not
// its entries), and the migration goes on.
func migrateFoldedTerms(tx *Tx) error {
	if err := tx.tx.DeleteBucket(bucketHandoffsByTerm); err != nil {
		return err
	}
	terms, err := tx.tx.CreateBucketIfNotExists(bucketHandoffsByTerm)
	if err != nil {
		return err
	}
	return tx.bucket(bucketHandoffs).ForEach(func(k, _ []byte) error {
		h, err := tx.Handoff(string(k))
		if tx.skip(err, nil) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range termKeys(&h) {
			if err := terms.Put(e, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// handoffsByTermV11 is idx_handoffs_by_term as schemas 7 to 11 kept it
// (lower case, not folded, a phone's digits whole), so that Check verifies
// an older file (a backup, or a file at the start-up check before its
// open migrates it) as what it is, and migration 6 writes what those
// schemas read.
var handoffsByTermV11 = index[Handoff]{
	bucket: bucketHandoffsByTerm, ref: refAfter(0, 0),
	keys: termKeysV11,
}

// termKeysV11 are h's entries in idx_handoffs_by_term in schemas 7 to 11.
func termKeysV11(h *Handoff) [][]byte {
	var terms []string
	if whole := normTermV11(h.Name); whole != "" {
		terms = append(terms, whole)
		for _, w := range strings.Fields(whole) {
			if w != whole {
				terms = append(terms, w)
			}
		}
	}
	if t := normTermV11(h.Contact); t != "" {
		terms = append(terms, t)
		if d, ok := phoneDigits(t); ok && len(d) >= 3 && d != t {
			terms = append(terms, d)
		}
	}
	if t := normTermV11(h.ConversationID); t != "" {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	terms = slices.Compact(terms)
	out := make([][]byte, 0, len(terms))
	for _, t := range terms {
		out = append(out, append(append([]byte(t), 0), h.Key...))
	}
	return out
}

// normTermV11 is normTerm without the folding of marks.
func normTermV11(s string) string {
	s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	return cutTerm(s)
}
