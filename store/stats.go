package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Stats counts the records of each kind.
type Stats struct {
	Events int `json:"events"`
	Jobs   int `json:"jobs"`
	Drafts int `json:"drafts"`
	Ready  int `json:"jobs_ready"`
	Leased int `json:"jobs_leased"`
}

// Stats counts records in one read transaction.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.view(func(tx *Tx) error {
		st = Stats{
			Events: tx.bucket(bucketEvents).Stats().KeyN,
			Jobs:   tx.bucket(bucketJobs).Stats().KeyN,
			Drafts: tx.bucket(bucketDrafts).Stats().KeyN,
			Ready:  tx.bucket(bucketJobsReady).Stats().KeyN,
			Leased: tx.bucket(bucketJobsLeased).Stats().KeyN,
		}
		return nil
	})
	return st, err
}

// The overview's drafting figures are kept, like the queue's counts, in
// meta and moved by every write of a draft (PutDraft, deleteDraft) in that
// write's own transaction, so the overview reads a few keys a day however
// many drafts there are (schema 11 on; migration 10 fills them, and Check
// proves them against a scan of the drafts):
//
//	"stats:drafts:" day(YYYY-MM-DD) 0x00 channel 0x00 prompt version 0x00 currency
//	  → drafts, waiting, unchanged, edited, rejected (8 bytes each), cost (8 bytes, in billionths),
//	    own replies, drafted again, closed (8 bytes each; schema 13 on, a shorter value reads them as 0)
//
// A draft that ended without a person's rejection — replaced by the reply
// a person wrote, drafted again, or its lead closed without a reply — is
// counted as that outcome (Decision.Outcome), not as rejected, so the
// rejection rate says what people thought of the prompt's drafts.
//
// The day is the draft's creation day in UTC. A draft a person wrote
// (drafter "person") costs nothing and tunes no prompt: it is not counted.
// The channel is part of the key, so a person limited to some clients sums
// exactly the keys of their channels. The cost is kept in integer
// billionths of its currency so that moves in and out add up exactly.
var draftStatsPrefix = []byte("stats:drafts:")

// DraftFigure is the drafts of one day, channel, prompt version and
// currency, and how people decided them.
type DraftFigure struct {
	Day           string // YYYY-MM-DD, UTC
	Channel       string
	PromptVersion string
	Currency      string
	Drafts        int // every draft, superseded ones included
	Waiting       int // pending approval
	Unchanged     int // approved as drafted
	Edited        int // approved after an edit
	Rejected      int // rejected by a person
	OwnReplies    int // replaced by the reply a person wrote
	DraftedAgain  int // replaced by a new draft a person asked for
	Closed        int // its lead closed without a reply
	Cost          float64
}

// The outcomes of a draft that ended rejected without a person's
// rejection (Decision.Outcome).
const (
	OutcomeOwnReply   = "own_reply"
	OutcomeDraftAgain = "draft_again"
	OutcomeClosed     = "closed"
)

// draftTally is what a figure's value holds; cost in billionths.
type draftTally [9]int64

const (
	tallyDrafts = iota
	tallyWaiting
	tallyUnchanged
	tallyEdited
	tallyRejected
	tallyCost
	tallyOwnReply
	tallyDraftAgain
	tallyClosed
)

// tallyFieldsBefore13 is how many fields a figure held before schema 13
// counted the outcomes apart.
const tallyFieldsBefore13 = 6

// costUnits is a cost in the billionths the figures keep.
func costUnits(c float64) int64 { return int64(math.Round(c * 1e9)) }

// draftFigureFields is the part of a draft the figures read: the migration
// and Check decode only these.
type draftFigureFields struct {
	Channel       string          `json:"channel"`
	Status        DraftStatus     `json:"status"`
	Drafter       string          `json:"drafter"`
	PromptVersion string          `json:"prompt_version"`
	CreatedAt     time.Time       `json:"created_at"`
	Cost          float64         `json:"cost"`
	Currency      string          `json:"currency"`
	Decision      *figureDecision `json:"decision"`
}

type figureDecision struct {
	Edited  bool   `json:"edited"`
	Outcome string `json:"outcome"`
}

func figureFieldsOf(d *Draft) draftFigureFields {
	f := draftFigureFields{
		Channel: d.Channel, Status: d.Status, Drafter: d.Drafter, PromptVersion: d.PromptVersion,
		CreatedAt: d.CreatedAt, Cost: d.Cost, Currency: d.Currency,
	}
	if d.Decision != nil {
		f.Decision = &figureDecision{Edited: d.Decision.Edited, Outcome: d.Decision.Outcome}
	}
	return f
}

// tally is the draft's share of the figures: its key, and what it adds;
// nil key for a draft the figures leave out.
func (f draftFigureFields) tally() ([]byte, draftTally) {
	var t draftTally
	if f.Drafter == "person" {
		return nil, t
	}
	t[tallyDrafts] = 1
	switch {
	case f.Status == DraftApproved && f.Decision != nil && f.Decision.Edited:
		t[tallyEdited] = 1
	case f.Status == DraftApproved:
		t[tallyUnchanged] = 1
	case f.Status == DraftRejected && f.Decision != nil && f.Decision.Outcome == OutcomeOwnReply:
		t[tallyOwnReply] = 1
	case f.Status == DraftRejected && f.Decision != nil && f.Decision.Outcome == OutcomeDraftAgain:
		t[tallyDraftAgain] = 1
	case f.Status == DraftRejected && f.Decision != nil && f.Decision.Outcome == OutcomeClosed:
		t[tallyClosed] = 1
	case f.Status == DraftRejected:
		t[tallyRejected] = 1
	case f.Status == DraftPending:
		t[tallyWaiting] = 1
	}
	t[tallyCost] = costUnits(f.Cost)
	return draftStatsKey(f.CreatedAt.UTC().Format(time.DateOnly), f.Channel, f.PromptVersion, f.Currency), t
}

func draftStatsKey(day, channel, version, currency string) []byte {
	k := append(bytes.Clone(draftStatsPrefix), day...)
	k = append(append(k, 0), channel...)
	k = append(append(k, 0), version...)
	return append(append(k, 0), currency...)
}

// parseDraftStatsKey splits a figure's key: the day is fixed-width, the
// channel ends at the first 0x00 (channel names hold none), the currency
// starts after the last; the prompt version is what is between.
func parseDraftStatsKey(k []byte) (DraftFigure, bool) {
	rest, ok := bytes.CutPrefix(k, draftStatsPrefix)
	if !ok || len(rest) < len(time.DateOnly)+1 || rest[len(time.DateOnly)] != 0 {
		return DraftFigure{}, false
	}
	f := DraftFigure{Day: string(rest[:len(time.DateOnly)])}
	rest = rest[len(time.DateOnly)+1:]
	i, j := bytes.IndexByte(rest, 0), bytes.LastIndexByte(rest, 0)
	if i < 0 || j == i {
		return DraftFigure{}, false
	}
	f.Channel, f.PromptVersion, f.Currency = string(rest[:i]), string(rest[i+1:j]), string(rest[j+1:])
	return f, true
}

func readTally(v []byte) (draftTally, bool) {
	var t draftTally
	if len(v) != 8*len(t) && len(v) != 8*tallyFieldsBefore13 {
		return t, false
	}
	for i := range len(v) / 8 {
		t[i] = int64(binary.BigEndian.Uint64(v[8*i:]))
	}
	return t, true
}

func (t draftTally) bytes() []byte {
	out := make([]byte, 8*len(t))
	for i, n := range t {
		binary.BigEndian.PutUint64(out[8*i:], uint64(n))
	}
	return out
}

// addTally adds sign×t to the figure at key, deleting it once it counts no
// draft. A figure that would go below zero (it drifted: Check says so)
// stops at zero rather than fail the decision being written.
func addTally(tx *Tx, key []byte, t draftTally, sign int64) error {
	meta := tx.bucket(bucketMeta)
	cur, _ := readTally(meta.Get(key))
	for i := range cur {
		cur[i] = max(0, cur[i]+sign*t[i])
	}
	if cur[tallyDrafts] == 0 {
		return meta.Delete(key)
	}
	return meta.Put(key, cur.bytes())
}

// moveDraftFigures moves the figures from old, the draft as read in this
// transaction (nil: none), to d (nil: deleted). PutDraft and deleteDraft
// call it.
func moveDraftFigures(tx *Tx, old, d *Draft) error {
	var ko, kn []byte
	var to, tn draftTally
	if old != nil {
		ko, to = figureFieldsOf(old).tally()
	}
	if d != nil {
		kn, tn = figureFieldsOf(d).tally()
	}
	if bytes.Equal(ko, kn) && to == tn {
		return nil
	}
	if ko != nil {
		if err := addTally(tx, ko, to, -1); err != nil {
			return err
		}
	}
	if kn != nil {
		return addTally(tx, kn, tn, 1)
	}
	return nil
}

// DraftFigures returns the figures of the drafts created on since's UTC
// day or later in the channels v sees, by day, channel, prompt version and
// currency, in key order: a read of the few keys those days have.
func (s *Store) DraftFigures(v Visible, since time.Time) ([]DraftFigure, error) {
	var out []DraftFigure
	err := s.view(func(tx *Tx) error {
		out = nil
		seek := append(bytes.Clone(draftStatsPrefix), since.UTC().Format(time.DateOnly)...)
		c := tx.bucket(bucketMeta).Cursor()
		for k, val := c.Seek(seek); k != nil && bytes.HasPrefix(k, draftStatsPrefix); k, val = c.Next() {
			f, ok := parseDraftStatsKey(k)
			t, ok2 := readTally(val)
			if !ok || !ok2 || !v.Channel(f.Channel) {
				continue // Check names a key that does not read
			}
			f.Drafts, f.Waiting, f.Unchanged = int(t[tallyDrafts]), int(t[tallyWaiting]), int(t[tallyUnchanged])
			f.Edited, f.Rejected, f.Cost = int(t[tallyEdited]), int(t[tallyRejected]), float64(t[tallyCost])/1e9
			f.OwnReplies, f.DraftedAgain, f.Closed = int(t[tallyOwnReply]), int(t[tallyDraftAgain]), int(t[tallyClosed])
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: draft figures: %w", err)
	}
	return out, nil
}

// recountFromDrafts sums the figures and counts each channel's drafts in each
// status from the drafts themselves, in one pass decoding only the fields
// they read; an unreadable draft is left out (the drafts table's check
// names it). A person's draft is in the channel counts, not the figures.
func recountFromDrafts(tx *Tx) (figures map[string]draftTally, channels map[[2]string]int) {
	figures, channels = map[string]draftTally{}, map[[2]string]int{}
	_ = tx.bucket(bucketDrafts).ForEach(func(_, raw []byte) error {
		var f draftFigureFields
		if json.Unmarshal(raw, &f) != nil {
			return nil
		}
		channels[[2]string{f.Channel, string(f.Status)}]++
		k, t := f.tally()
		if k == nil {
			return nil
		}
		sum := figures[string(k)]
		for i := range sum {
			sum[i] += t[i]
		}
		figures[string(k)] = sum
		return nil
	})
	return figures, channels
}

// storedDraftFigures reads every figure in meta by key; bad is each key
// under the prefix that does not read as one.
func storedDraftFigures(tx *Tx) (good map[string]draftTally, bad [][]byte) {
	good = map[string]draftTally{}
	c := tx.bucket(bucketMeta).Cursor()
	for k, v := c.Seek(draftStatsPrefix); k != nil && bytes.HasPrefix(k, draftStatsPrefix); k, v = c.Next() {
		_, ok := parseDraftStatsKey(k)
		t, ok2 := readTally(v)
		if !ok || !ok2 {
			bad = append(bad, bytes.Clone(k))
			continue
		}
		good[string(k)] = t
	}
	return good, bad
}

// migrateDraftFigures is migration 10: it writes the drafting figures,
// the per-channel draft counts and the open outbox rows' counts from the
// records there are.
func migrateDraftFigures(tx *Tx) error {
	for _, prefix := range [][]byte{draftStatsPrefix, channelDraftCountPrefix} {
		if err := deletePrefix(tx, prefix); err != nil {
			return err
		}
	}
	meta := tx.bucket(bucketMeta)
	figures, channels := recountFromDrafts(tx)
	for k, t := range figures {
		if err := meta.Put([]byte(k), t.bytes()); err != nil {
			return err
		}
	}
	for k, n := range channels {
		if err := putCount(tx, channelDraftCountKey(k[0], DraftStatus(k[1])), n); err != nil {
			return err
		}
	}
	return fillOutboxCounts(tx) // outboxcounts.go
}

// checkDraftFigures proves the drafting figures and the per-channel draft
// counts in meta against a scan of the drafts (schema 11 on).
func checkDraftFigures(tx *Tx, kept bool) []error {
	if !kept {
		return nil
	}
	var problems []error
	stored, bad := storedDraftFigures(tx)
	for _, k := range bad {
		problems = append(problems, fmt.Errorf("check: meta key %q is not a drafting figure", k))
	}
	figures, channels := recountFromDrafts(tx)
	problems = append(problems, diffCounts(stored, figures, strings.Compare, func(k string, got, want draftTally) error {
		f, _ := parseDraftStatsKey([]byte(k))
		return fmt.Errorf("check: the drafting figure of %s, channel %s, prompt %s, currency %q says %v (drafts, waiting, unchanged, edited, rejected, cost in billionths, own replies, drafted again, closed), the drafts hold %v",
			f.Day, f.Channel, f.PromptVersion, f.Currency, got, want)
	})...)
	storedCh, badCh := storedPairCounts(tx, channelDraftCountPrefix)
	for _, k := range badCh {
		problems = append(problems, fmt.Errorf("check: meta key %q is not a channel's draft count", k))
	}
	return append(problems, diffCounts(storedCh, channels, comparePair, func(k [2]string, got, want int) error {
		return fmt.Errorf("check: the count of channel %s's %s drafts says %d, the drafts bucket holds %d", k[0], k[1], got, want)
	})...)
}

// diffCounts compares counts kept beside the records (stored) with a
// recount of the records (actual), key by key in cmp's order, a key
// missing from either side counting as zero, and words each that differs
// with say. Every derived count Check proves goes through it.
func diffCounts[K comparable, V comparable](stored, actual map[K]V, cmp func(a, b K) int, say func(k K, got, want V) error) []error {
	keys := slices.Collect(maps.Keys(stored))
	for k := range actual {
		if _, ok := stored[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, cmp)
	var problems []error
	for _, k := range keys {
		if got, want := stored[k], actual[k]; got != want {
			problems = append(problems, say(k, got, want))
		}
	}
	return problems
}

// storedPairCounts reads every count in meta under prefix whose key is
// prefix, a, 0x00, b (a job's kind and state, a channel and a draft
// status), by (a, b); bad is each key there that does not read as one.
func storedPairCounts(tx *Tx, prefix []byte) (good map[[2]string]int, bad [][]byte) {
	good = map[[2]string]int{}
	c := tx.bucket(bucketMeta).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		a, b, ok := bytes.Cut(k[len(prefix):], []byte{0})
		if !ok || len(v) != 8 {
			bad = append(bad, bytes.Clone(k))
			continue
		}
		good[[2]string{string(a), string(b)}] = int(binary.BigEndian.Uint64(v))
	}
	return good, bad
}

// comparePair orders pair keys by their first part, then their second.
func comparePair(a, b [2]string) int {
	return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
}

// channelDraftCountPrefix starts the count of drafts of one channel in one
// status, moved with the all-channel counts (count:drafts:<status>), so a
// person limited to some clients reads their waiting drafts from a few
// keys too: "count:channel_drafts:" channel 0x00 status → 8-byte count.
var channelDraftCountPrefix = []byte("count:channel_drafts:")

func channelDraftCountKey(channel string, s DraftStatus) []byte {
	return append(append(append(bytes.Clone(channelDraftCountPrefix), channel...), 0), s...)
}

// visibleDraftCount is how many drafts in status the channels v sees hold,
// from the per-channel counts: every channel's when v sees them all.
func visibleDraftCount(tx *Tx, v Visible, status DraftStatus) int {
	if v.all {
		return count(tx, draftCountKey(status))
	}
	n := 0
	for ch := range v.channels {
		n += count(tx, channelDraftCountKey(ch, status))
	}
	return n
}

// migrateDraftOutcomes is migration 12: each draft rejected before the
// outcomes were kept apart is given the one it had — replaced by a
// regeneration ("replaced by <id>"): the reply a person wrote when that
// draft is a person's, else drafted again (also when it is gone); ended by
// closing its lead ("closed without a reply: …"): closed — and the figures
// are counted again from the drafts. Every draft stays; one that cannot be
// read is left as it is (Check names it). It also counts the leads by
// status and channel (leadCountPrefix).
func migrateDraftOutcomes(tx *Tx) error {
	type change struct{ old, d Draft }
	var changes []change
	err := tx.bucket(bucketDrafts).ForEach(func(_, raw []byte) error {
		var d Draft
		if json.Unmarshal(raw, &d) != nil || d.Status != DraftRejected || d.Decision == nil || d.Decision.Outcome != "" {
			return nil
		}
		old := d
		dec := *d.Decision
		switch {
		case dec.By == "regeneration" && strings.HasPrefix(dec.Reason, "replaced by "):
			dec.Outcome = OutcomeDraftAgain
			if by, err := tx.Draft(strings.TrimPrefix(dec.Reason, "replaced by ")); err == nil && by.Drafter == "person" {
				dec.Outcome = OutcomeOwnReply
			}
		case strings.HasPrefix(dec.Reason, "closed without a reply"):
			dec.Outcome = OutcomeClosed
		default:
			return nil
		}
		d.Decision = &dec
		changes = append(changes, change{old, d})
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range changes {
		if err := tx.PutDraft(&c.old, &c.d); err != nil {
			return fmt.Errorf("draft %s: %w", c.d.ID, err)
		}
	}
	if err := migrateDraftFigures(tx); err != nil {
		return err
	}
	return fillLeadCounts(tx)
}

// leadCountPrefix starts the count of the leads of one channel in one
// status (schema 13 on), moved by every write of a lead (PutHandoff):
// "count:leads:" status 0x00 channel → 8-byte count. The stuck count reads
// it: the leads of a status stuck before a time are its count less those
// that entered it since, so the walk covers the recent leads, not a
// backlog however long it grew. The channel is the lead key's, as the
// visibility rules read it.
var leadCountPrefix = []byte("count:leads:")

func leadCountKey(status HandoffStatus, leadKey string) []byte {
	ch, _, _ := strings.Cut(leadKey, ":")
	return append(append(append(bytes.Clone(leadCountPrefix), status...), 0), ch...)
}

// moveLeadCount moves the lead counts from old, the lead as read in this
// transaction (nil: new), to h.
func moveLeadCount(tx *Tx, old, h *Handoff) error {
	if old != nil && old.Status == h.Status && old.Key == h.Key {
		return nil
	}
	if old != nil && old.Status != "" {
		if err := addCount(tx, leadCountKey(old.Status, old.Key), -1); err != nil {
			return err
		}
	}
	if h.Status == "" {
		return nil // a lead not yet in a status is in no index either
	}
	return addCount(tx, leadCountKey(h.Status, h.Key), 1)
}

// visibleLeadCount is how many leads of status the channels v sees hold.
func visibleLeadCount(tx *Tx, v Visible, status HandoffStatus) int {
	prefix := append(append(bytes.Clone(leadCountPrefix), status...), 0)
	n := 0
	c := tx.bucket(bucketMeta).Cursor()
	for k, val := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
		if len(val) == 8 && (v.all || v.channels[string(k[len(prefix):])]) {
			n += int(binary.BigEndian.Uint64(val))
		}
	}
	return n
}

// countStuckFromCounts counts the leads v sees of each status of
// stuckBefore that entered it before its time: the status's count less the
// index keys from that time on, reading at most scan of those (0: all).
// ok is false when a status had more recent leads than scan: the caller
// walks the old ones instead.
func countStuckFromCounts(tx *Tx, v Visible, stuckBefore map[HandoffStatus]time.Time, scan int) (n int, ok bool) {
	idx := tx.bucket(bucketHandoffsByStatus)
	for st, before := range stuckBefore {
		prefix := append([]byte(st), 0)
		recent, read := 0, 0
		c := idx.Cursor()
		for k, _ := c.Seek(append(bytes.Clone(prefix), timeKey(before, "")...)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if scan > 0 && read == scan {
				return 0, false
			}
			read++
			if _, key := splitTimeKey(k[len(prefix):]); v.Key(key) {
				recent++
			}
		}
		n += max(0, visibleLeadCount(tx, v, st)-recent)
	}
	return n, true
}

// recountLeads counts the leads by status and channel from the leads
// themselves, decoding only those two fields; an unreadable lead is left
// out (the leads table's check names it).
func recountLeads(tx *Tx) map[string]int {
	out := map[string]int{}
	_ = tx.bucket(bucketHandoffs).ForEach(func(k, raw []byte) error {
		var f struct {
			Status HandoffStatus `json:"status"`
		}
		if json.Unmarshal(raw, &f) != nil || f.Status == "" {
			return nil
		}
		out[string(leadCountKey(f.Status, string(k)))]++
		return nil
	})
	return out
}

// fillLeadCounts writes the lead counts from the leads (migration 12).
func fillLeadCounts(tx *Tx) error {
	if err := deletePrefix(tx, leadCountPrefix); err != nil {
		return err
	}
	for k, n := range recountLeads(tx) {
		if err := putCount(tx, []byte(k), n); err != nil {
			return err
		}
	}
	return nil
}

// checkLeadCounts proves the lead counts against a scan of the leads
// (schema 13 on).
func checkLeadCounts(tx *Tx) []error {
	stored := map[string]int{}
	var problems []error
	c := tx.bucket(bucketMeta).Cursor()
	for k, v := c.Seek(leadCountPrefix); k != nil && bytes.HasPrefix(k, leadCountPrefix); k, v = c.Next() {
		if len(v) != 8 || !bytes.Contains(k[len(leadCountPrefix):], []byte{0}) {
			problems = append(problems, fmt.Errorf("check: meta key %q is not a count of leads", k))
			continue
		}
		stored[string(k)] = int(binary.BigEndian.Uint64(v))
	}
	return append(problems, diffCounts(stored, recountLeads(tx), strings.Compare, func(k string, got, want int) error {
		st, ch, _ := strings.Cut(k[len(leadCountPrefix):], "\x00")
		return fmt.Errorf("check: the count of channel %s's leads in status %s says %d, the leads hold %d", ch, st, got, want)
	})...)
}
