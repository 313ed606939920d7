package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// FindEvent finds the event a person means by q: an event key, a draft id,
// an outbox id, a lead key, a correlation id, or a conversation id or
// contact (the lead's newest event). It returns "" when nothing that vis
// sees matches: a match in a channel it does not see is no match at all.
func (s *Store) FindEvent(vis Visible, q string) (string, error) {
	var key string
	err := s.view(func(tx *Tx) error {
		key = ""
		if tx.bucket(bucketEventsByKey).Get([]byte(q)) != nil && vis.Key(q) {
			key = q
			return nil
		}
		if d, err := tx.Draft(q); err == nil && vis.Key(d.EventKey) {
			key = d.EventKey
			return nil
		}
		if o, err := tx.Outbox(q); err == nil && o.EventKey != "" && vis.Key(o.EventKey) {
			key = o.EventKey
			return nil
		}
		if h, err := tx.Handoff(q); err == nil && vis.Key(h.LastEventKey) {
			key = h.LastEventKey
			return nil
		}
		// A correlation id: its jobs carry the event's key (the draft job's key).
		prefix := []byte(q + "|")
		if k, _ := tx.bucket(bucketJobsByCorr).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			if j, err := tx.Job(string(k[len(prefix):])); err == nil && j.Kind == KindDraft && vis.Key(j.Key) {
				key = j.Key
				return nil
			}
		}
		// A conversation id or contact, exactly: the term index holds both
		// (a term cut at maxTerm is looked up as a prefix).
		key = findLead(tx, vis, q)
		return nil
	})
	return key, err
}

// findContactReads bounds the leads FindEvent decodes to compare their
// contact with q: a contact is one person's, so the leads that hold it as
// a term are few; a term many leads share is a word of their names, and
// the search lists them instead.
const findContactReads = 64

// findLead is the latest event of the lead whose conversation id or
// contact is q, of those vis sees; "" when none. A conversation id is in
// the entry's lead key (channel ":" conversation id), so that comparison
// decodes nothing; a contact needs the lead, read for the first
// findContactReads leads that hold q's term.
func findLead(tx *Tx, vis Visible, q string) string {
	term := normTerm(q)
	if term == "" {
		return ""
	}
	prefix := []byte(term)
	if len(term) < maxTerm {
		prefix = append(prefix, 0)
	}
	c := tx.bucket(bucketHandoffsByTerm).Cursor()
	reads, n := 0, 0
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < maxTermEntries; k, _ = c.Next() {
		n++
		lead := string(k[bytes.IndexByte(k, 0)+1:])
		if !vis.Key(lead) {
			continue
		}
		_, conv, _ := strings.Cut(lead, ":")
		if conv != q && reads >= findContactReads {
			continue
		}
		reads++
		h, err := tx.Handoff(lead)
		if err != nil {
			continue // gone, or unreadable: the search lists it apart
		}
		if h.ConversationID == q || h.Contact == q {
			return h.LastEventKey
		}
	}
	return ""
}

// The search's bounds. A prefix is looked up in idx_handoffs_by_term, so
// it costs the entries it matches, at most maxTermEntries; the text of the
// messages has no index, so only the newest TextScan events are read.
const (
	// TextScan is how many of the newest messages a text search reads.
	TextScan = 5000
	// maxTermEntries bounds the index entries one search reads.
	maxTermEntries = 5000
	// maxTerm is the longest term kept in the index, in bytes.
	maxTerm = 64
)

// SearchResult is what a search found, newest message first.
type SearchResult struct {
	Leads []LeadHit
	// Scanned is how many messages the text search read (at most
	// TextScan); Oldest is the oldest of them (zero when none).
	Scanned int
	Oldest  time.Time
	// More says there were more leads than the limit asked for.
	More bool
	// Unreadable is each record the search met that cannot be read, stepped over.
	Unreadable []Unreadable
}

// LeadHit is one lead a search found, with its latest message.
type LeadHit struct {
	Lead    Handoff
	Last    Event  // the lead's latest message (zero when it is gone)
	By      string // what matched: "name", "contact", "conversation" or "text"
	Snippet string // the matching message's text, for a text match; else the latest's
}

// Search finds up to limit leads vis sees whose name, contact or
// conversation id starts with q, or any word of whose name does, case and
// accents aside ("zoe" finds "Zoë", "muller" "Müller"), or whose phone
// number holds q's digits as a run of at least minDigits ("0978" and
// "555 249" find "+1 555 249 0978"), or that hold each of q's words at
// the start of a term, in any order ("muller zoe"); then leads whose messages
// hold q (case aside), among the newest TextScan messages.
// Everything is read in one read transaction.
func (s *Store) Search(vis Visible, q string, limit int) (SearchResult, error) {
	var res SearchResult
	err := s.view(func(tx *Tx) error {
		var err error
		res, err = search(tx, vis, q, limit)
		return err
	})
	if err != nil {
		return SearchResult{}, fmt.Errorf("store: search %q: %w", q, err)
	}
	return res, nil
}

func search(tx *Tx, vis Visible, q string, limit int) (SearchResult, error) {
	res := SearchResult{Leads: []LeadHit{}}
	term := normTerm(q)
	if term == "" {
		return res, nil
	}
	seen := map[string]bool{}
	add := func(hit LeadHit) bool {
		if len(res.Leads) >= limit {
			res.More = true
			return false
		}
		seen[hit.Lead.Key] = true
		res.Leads = append(res.Leads, hit)
		return true
	}
	var failed error
	// hit adds h, found by its term starting with prefix, when each word
	// of want starts one of its terms and its number holds digits.
	hit := func(prefix string, want []string, digits string) func(Handoff) bool {
		return func(h Handoff) bool {
			if seen[h.Key] || !holdsAll(h, want) || !holdsDigits(h, digits) {
				return true
			}
			last, err := tx.EventByKey(h.LastEventKey)
			if err != nil && !errors.Is(err, ErrNotFound) && !tx.skip(err, &res.Unreadable) {
				failed = err
				return false
			}
			by := matchedBy(h, prefix)
			if digits != "" {
				by = "contact"
			}
			return add(LeadHit{Lead: h, Last: last, By: by, Snippet: last.Text})
		}
	}
	// The query as one term; then, for several words in any order
	// ("muller zoe"), the leads with a term starting with the longest
	// word that hold the other words too; then a number's digits ("555
	// 249" is "555249") wherever they stand in it (digitLookups).
	type pass struct{ prefix, words, digits string }
	passes := []pass{{prefix: term}}
	if words := strings.Fields(term); len(words) > 1 {
		passes = append(passes, pass{prefix: slices.MaxFunc(words, func(a, b string) int { return len(a) - len(b) }), words: term})
	}
	if d, phone := phoneDigits(term); phone && len(d) >= minDigits {
		for _, p := range digitLookups(d) {
			passes = append(passes, pass{prefix: p, digits: d})
		}
	}
	budget := maxTermEntries // shared by the passes
	for _, p := range passes {
		err := eachTermLead(tx, vis, p.prefix, &budget, &res.Unreadable, hit(p.prefix, strings.Fields(p.words), p.digits))
		if err == nil {
			err = failed
		}
		if err != nil || res.More {
			return res, err
		}
	}
	// The text of the newest messages, newest first.
	oldest, err := searchText(tx, vis, q, seen, &res, add)
	if oldest != nil { // the oldest message read, for "searched since"
		if ev, err := tx.event(string(oldest)); err == nil {
			res.Oldest = ev.ReceivedAt
		}
	}
	return res, err
}

// searchText adds the leads vis sees whose messages hold q, reading the
// newest TextScan messages, newest first, until add refuses one; it
// returns the key of the oldest message it read. A message whose stored
// bytes cannot hold q (textMayHold) is not decoded.
func searchText(tx *Tx, vis Visible, q string, seen map[string]bool, res *SearchResult, add func(LeadHit) bool) (oldest []byte, err error) {
	needle := strings.ToLower(strings.TrimSpace(q))
	quick := quickNeedle(needle)
	c := tx.bucket(bucketEvents).Cursor()
	for k, raw := c.Last(); k != nil && res.Scanned < TextScan; k, raw = c.Prev() {
		res.Scanned++
		oldest = k
		if quick && !textMayHold(raw, needle) {
			continue
		}
		if ch, ok := rawChannel(raw); ok && !vis.Channel(ch) {
			continue // another client's message: not decoded
		}
		ev, err := tx.event(string(k))
		if tx.skip(err, &res.Unreadable) {
			continue
		}
		if err != nil {
			return oldest, err
		}
		lead := LeadKey(ev.Channel, ev.ConversationID)
		if seen[lead] || !vis.Key(ev.Key) || !containsFold(ev.Text, needle) {
			continue
		}
		h, err := tx.Handoff(lead)
		if tx.skip(err, &res.Unreadable) {
			continue
		}
		if err != nil {
			return oldest, fmt.Errorf("lead of %s: %w", ev.Key, err)
		}
		last, err := tx.EventByKey(h.LastEventKey)
		if err != nil && !errors.Is(err, ErrNotFound) && !tx.skip(err, &res.Unreadable) {
			return oldest, err
		}
		if !add(LeadHit{Lead: h, Last: last, By: "text", Snippet: ev.Text}) {
			break
		}
	}
	return oldest, nil
}

// eachTermLead calls fn with each lead vis sees that has a term starting
// with term, each once, reading at most *budget entries (less what it
// read), until fn returns false. The entry's key ends with the lead key,
// which names its channel, so a lead vis does not see is never decoded.
func eachTermLead(tx *Tx, vis Visible, term string, budget *int, skipped *[]Unreadable, fn func(Handoff) bool) error {
	if term == "" {
		return nil
	}
	prefix := []byte(term)
	done := map[string]bool{}
	c := tx.bucket(bucketHandoffsByTerm).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && *budget > 0; k, _ = c.Next() {
		*budget--
		lead := string(k[bytes.IndexByte(k, 0)+1:])
		if done[lead] || !vis.Key(lead) {
			continue
		}
		done[lead] = true
		h, err := tx.Handoff(lead)
		if tx.skip(err, skipped) {
			continue
		}
		if err != nil {
			return fmt.Errorf("idx_handoffs_by_term names lead %s: %w", lead, err)
		}
		if !fn(h) {
			return nil
		}
	}
	return nil
}

// holdsAll reports whether each of words starts one of h's terms.
func holdsAll(h Handoff, words []string) bool {
	if len(words) == 0 {
		return true
	}
	terms := append(nameTerms(h.Name), contactTerms(h.Contact)...)
	terms = append(terms, normTerm(h.ConversationID))
	for _, w := range words {
		if !slices.ContainsFunc(terms, func(t string) bool { return strings.HasPrefix(t, w) }) {
			return false
		}
	}
	return true
}

// matchedBy says which of h's terms starts with term.
func matchedBy(h Handoff, term string) string {
	for _, t := range nameTerms(h.Name) {
		if strings.HasPrefix(t, term) {
			return "name"
		}
	}
	for _, t := range contactTerms(h.Contact) {
		if strings.HasPrefix(t, term) {
			return "contact"
		}
	}
	return "conversation"
}

// termKeys are h's entries in idx_handoffs_by_term, sorted, each once.
func termKeys(h *Handoff) [][]byte {
	terms := append(nameTerms(h.Name), contactTerms(h.Contact)...)
	if t := normTerm(h.ConversationID); t != "" {
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

// nameTerms are the terms of a name: the whole name, each of its words,
// and each word's parts between its punctuation ("o'brien" is found by
// "brien", "jean-luc" by "luc"). The whole name is cut at maxTerm, so a
// name has at most as many terms as maxTerm bytes allow.
func nameTerms(name string) []string {
	whole := normTerm(name)
	if whole == "" {
		return nil
	}
	out := []string{whole}
	for _, w := range strings.Fields(whole) {
		if w != whole {
			out = append(out, w)
		}
		if parts := strings.FieldsFunc(w, notWordRune); len(parts) > 1 {
			out = append(out, parts...)
		}
	}
	return out
}

// notWordRune is what splits a word of a name into its parts: anything
// but a letter, a digit or a mark.
func notWordRune(r rune) bool { return !unicode.In(r, unicode.L, unicode.N, unicode.M) }

// The phone number's digits in the index: its digits whole, and the
// suffixes of its last maxDigits (E.164's longest number) that start
// every digitStride digits and are at least minDigits long — at most 4
// entries a number. A run of digits that starts r (< digitStride) digits
// after such a suffix's start is found by looking up each r digits before
// it (digitLookups: 1 + 10 + 100 prefixes), so any run of minDigits or
// more is found, for a third of the entries every suffix would take.
const (
	minDigits   = 4
	maxDigits   = 15
	digitStride = 3
)

// contactTerms are the terms of a contact: itself, and for a phone number
// its digits alone and its digitStride-spaced suffixes, so "+1 555 249
// 0978" is found by "1555", "555249" and "0978".
func contactTerms(contact string) []string {
	t := normTerm(contact)
	if t == "" {
		return nil
	}
	out := []string{t}
	d, phone := phoneDigits(t)
	if !phone || len(d) < 3 {
		return out
	}
	if d != t {
		out = append(out, d)
	}
	cut := d[max(0, len(d)-maxDigits):]
	for i := 0; len(cut)-i >= minDigits; i += digitStride {
		if cut[i:] != d && cut[i:] != t {
			out = append(out, cut[i:])
		}
	}
	return out
}

// digitLookups are the prefixes the index is read at for a run of digits:
// the run itself, and the run after every string of 1 to digitStride-1
// digits (those of the run's place past the suffix that holds it).
func digitLookups(run string) []string {
	out := []string{run}
	lead := []string{""}
	for range digitStride - 1 {
		var next []string
		for _, p := range lead {
			for c := '0'; c <= '9'; c++ {
				next = append(next, p+string(c))
			}
		}
		for _, p := range next {
			out = append(out, p+run)
		}
		lead = next
	}
	return out
}

// holdsDigits reports whether h's number holds the run of digits ("":
// any lead): a lookup of digitLookups also meets suffixes and other terms
// that only hold the run after their first digits.
func holdsDigits(h Handoff, run string) bool {
	if run == "" {
		return true
	}
	d, phone := phoneDigits(normTerm(h.Contact))
	return phone && strings.Contains(d[max(0, len(d)-maxDigits):], run)
}

// phoneDigits are the digits of t, and whether t is a phone number: only
// digits and the characters numbers are written with ("+-(). ").
func phoneDigits(t string) (string, bool) {
	var digits strings.Builder
	for _, r := range t {
		switch {
		case r >= '0' && r <= '9':
			digits.WriteRune(r)
		case strings.ContainsRune("+-(). ", r):
		default:
			return "", false
		}
	}
	return digits.String(), true
}

// normTerm is s as the index keeps it: its marks folded away (foldMarks:
// "Zoë Müller" is "zoe muller"), lower case, spaces collapsed, no control
// characters (so no 0x00, the entries' separator), at most maxTerm bytes
// cut at a character. A query is looked up as normTerm makes it, so case
// and accents never decide a match.
func normTerm(s string) string {
	// The controls go before the spaces collapse, so none leaves a
	// space behind ("0 \x7f" is "0"); a control that is a space (a line
	// break, a tab) still parts two words.
	return normTermV11(strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, foldMarks(strings.ToValidUTF8(s, "\uFFFD"))))
}

// foldMarks is s decomposed (NFD), without its nonspacing marks (Unicode
// category Mn: accents, diacritics, Arabic and Hebrew vowel points), and
// composed again (NFC). Letters that are not a base and a mark (ø, ł, ß)
// stay as they are. normTerm makes s UTF-8 first (strings.ToLower would
// anyway); should the transform fail, s is kept as it is.
func foldMarks(s string) string {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] < utf8.RuneSelf
	}
	if ascii {
		return s
	}
	// A transform.Chain holds state, so each call makes its own.
	out, _, err := transform.String(transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC), s)
	if err != nil {
		return s
	}
	return out
}

// cutTerm is s cut to at most maxTerm bytes at the start of a character,
// without a trailing space.
func cutTerm(s string) string {
	if len(s) > maxTerm {
		cut := maxTerm
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = strings.TrimSpace(s[:cut])
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// rawChannel reads an event's channel from its stored bytes without
// decoding them: the first `"channel":"` of the record is its channel
// field (json.Marshal writes the fields in order, the channel before any
// nested value, and inside a string every quote is escaped, so the
// pattern cannot start within one). ok is false when it is not found
// near the start, or the value holds an escape: then decode.
func rawChannel(raw []byte) (channel string, ok bool) {
	const field = `"channel":"`
	head := raw[:min(len(raw), 512)]
	i := bytes.Index(head, []byte(field))
	if i < 0 {
		return "", false
	}
	rest := head[i+len(field):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// quickNeedle reports whether a text holding needle (lower case) always
// holds it, case aside, as the very bytes of the event's stored form: a
// needle of printable ASCII that JSON never escapes. A stored string
// writes such bytes as they are (its escapes are of other characters),
// whether it is the record's text or a place in the body (text_at).
func quickNeedle(needle string) bool {
	if needle == "" {
		return false
	}
	for i := 0; i < len(needle); i++ {
		if b := needle[i]; b < 0x20 || b >= 0x7f || strings.IndexByte(`"\/<>&`, b) >= 0 {
			return false
		}
	}
	return true
}

// textMayHold reports whether raw, an event's stored bytes, may hold
// needle (a quickNeedle) in its text once lower-cased: false only when no
// ASCII-case-insensitive match is there and nothing could turn into one —
// no \u escape (which could write an ASCII letter), no KELVIN SIGN or
// LATIN CAPITAL I WITH DOT ABOVE (the two runes whose lower case is
// ASCII).
func textMayHold(raw []byte, needle string) bool {
	if bytes.Contains(raw, []byte(`\u`)) || bytes.Contains(raw, []byte("\u212a")) || bytes.Contains(raw, []byte("\u0130")) {
		return true
	}
	return indexFoldASCII(raw, needle)
}

// indexFoldASCII reports whether s holds needle (ASCII, lower case),
// ASCII case aside. It jumps between the places of needle's first byte in
// either case, each found once with bytes.IndexByte.
func indexFoldASCII(s []byte, needle string) bool {
	lo := needle[0]
	up := lo
	if 'a' <= lo && lo <= 'z' {
		up = lo - 'a' + 'A'
	}
	end := len(s) - len(needle) + 1 // a match starts before it
	if end <= 0 {
		return false
	}
	// next finds c at or after i, -1 when none.
	next := func(c byte, i int) int {
		if j := bytes.IndexByte(s[i:end], c); j >= 0 {
			return i + j
		}
		return -1
	}
	nl, nu := next(lo, 0), -1
	if up != lo {
		nu = next(up, 0)
	}
	for nl >= 0 || nu >= 0 {
		at := nl
		if at < 0 || (nu >= 0 && nu < at) {
			at = nu
		}
		if equalFoldASCII(s[at:at+len(needle)], needle) {
			return true
		}
		switch {
		case at == nl:
			if nl = -1; at+1 < end {
				nl = next(lo, at+1)
			}
		default:
			if nu = -1; at+1 < end {
				nu = next(up, at+1)
			}
		}
	}
	return false
}

// equalFoldASCII reports whether a equals needle (lower case), ASCII case aside.
func equalFoldASCII(a []byte, needle string) bool {
	for i := range len(needle) {
		b := a[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != needle[i] {
			return false
		}
	}
	return true
}

// containsFold reports whether text holds needle (lower case already),
// ignoring case.
func containsFold(text, needle string) bool {
	return needle != "" && strings.Contains(strings.ToLower(text), needle)
}

// migrateLeadTerms is migration 6: it names each lead after the newest of
// its messages that gave a name, and writes its idx_handoffs_by_term
// entries.
func migrateLeadTerms(tx *Tx) error {
	if _, err := tx.tx.CreateBucketIfNotExists(bucketHandoffsByTerm); err != nil {
		return err
	}
	var keys [][]byte
	_ = tx.bucket(bucketHandoffs).ForEach(func(k, _ []byte) error {
		keys = append(keys, bytes.Clone(k))
		return nil
	})
	for _, k := range keys {
		h, err := tx.Handoff(string(k))
		if err != nil {
			return err
		}
		if h.Name == "" {
			if h.Name, err = newestName(tx, h.Key); err != nil {
				return err
			}
		}
		raw, err := encode(&h)
		if err != nil {
			return err
		}
		if err := tx.bucket(bucketHandoffs).Put(k, raw); err != nil {
			return err
		}
		for _, e := range termKeysV11(&h) { // what schemas 7 to 11 read; migration 11 writes them again
			if err := tx.bucket(bucketHandoffsByTerm).Put(e, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// newestName is the name the newest of a lead's messages that gave one gave.
func newestName(tx *Tx, lead string) (string, error) {
	prefix := append([]byte(lead), 0)
	c := tx.bucket(bucketEventsByConv).Cursor()
	for k := lastWithPrefix(c, prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		ev, err := tx.event(string(k[len(prefix):]))
		if err != nil {
			return "", err
		}
		if ev.Name != "" {
			return ev.Name, nil
		}
	}
	return "", nil
}
