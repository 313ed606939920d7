package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// ReasonCodes are the one-tap reasons a person may give for an edit or a
// rejection (Decision.ReasonCode), in the order the quality figures keep
// them: the list is part of the figures' stored form, so a code is only
// ever added at its end.
var ReasonCodes = []string{"wrong_facts", "tone", "language", "too_long", "not_needed", "other"}

// Guards is what the checks before a person found in a draft
// (review.Guard): the languages of the customer's message and of the
// reply, and the figures the reply states that neither the client's facts
// nor the conversation hold.
type Guards struct {
	// CustomerLanguage and ReplyLanguage are ISO 639-3 codes ("deu"),
	// empty when the text was too short or its detection unsure.
	CustomerLanguage string `json:"customer_language,omitempty"`
	ReplyLanguage    string `json:"reply_language,omitempty"`
	// LanguageDiffers: both known, and not the same.
	LanguageDiffers bool `json:"language_differs,omitempty"`
	// Figures are the reply's figures found in neither, as written there.
	Figures []GuardFigure `json:"figures,omitempty"`
	// AutoApproveHeld says the channel approves its drafts itself and left
	// this one for a person, because it is flagged.
	AutoApproveHeld bool `json:"auto_approve_held,omitempty"`
}

// GuardFigure is one figure of a reply: its kind (price, date, time,
// phone, url, email, percent, amount) and its text as written.
type GuardFigure struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// Flagged says the guards found something a person should look at: such
// a draft is never approved by auto_approve.
func (g *Guards) Flagged() bool { return g != nil && (g.LanguageDiffers || len(g.Figures) > 0) }

// The quality figures are kept beside the drafting figures (stats.go) in
// meta, moved by the same writes in the same transaction, and proved by
// Check against a scan of the drafts:
//
//	"stats:quality:" day(YYYY-MM-DD) 0x00 channel 0x00 prompt version
//	  → guarded, language flags, figure flags, measured, distance sum
//	    (in millionths), then one count per ReasonCodes entry (8 bytes each)
//
// guarded counts the drafts the guards ran on, measured the approvals
// whose distance to what was sent is known. A person's own draft is not
// counted, as in the drafting figures. No migration fills them: a draft
// stored before they were kept has no guards, distance or reason code, and
// so no share.
var qualityStatsPrefix = []byte("stats:quality:")

const (
	qGuarded = iota
	qLanguage
	qFigures
	qMeasured
	qDistance
	qReasons
)

type qualityTally [qReasons + 6]int64

// QualityFigure is how much people changed the drafts of one day, channel
// and prompt version, why, and what the guards flagged.
type QualityFigure struct {
	Day           string `json:"day"`
	Channel       string `json:"channel"`
	PromptVersion string `json:"prompt_version"`
	Guarded       int    `json:"guarded"`
	LanguageFlags int    `json:"language_flagged"`
	FigureFlags   int    `json:"figures_flagged"`
	// Measured approvals, and the sum of their distances (0 to 1 each).
	Measured    int            `json:"measured"`
	DistanceSum float64        `json:"distance_sum"`
	Reasons     map[string]int `json:"reasons,omitempty"`
}

// qualityFields is the part of a draft the quality figures read.
type qualityFields struct {
	Channel       string      `json:"channel"`
	Status        DraftStatus `json:"status"`
	Drafter       string      `json:"drafter"`
	PromptVersion string      `json:"prompt_version"`
	CreatedAt     time.Time   `json:"created_at"`
	Guards        *Guards     `json:"guards"`
	Decision      *struct {
		Distance   *float64 `json:"distance"`
		ReasonCode string   `json:"reason_code"`
	} `json:"decision"`
}

func qualityFieldsOf(d *Draft) qualityFields {
	f := qualityFields{Channel: d.Channel, Status: d.Status, Drafter: d.Drafter, PromptVersion: d.PromptVersion, CreatedAt: d.CreatedAt, Guards: d.Guards}
	if d.Decision != nil {
		f.Decision = &struct {
			Distance   *float64 `json:"distance"`
			ReasonCode string   `json:"reason_code"`
		}{d.Decision.Distance, d.Decision.ReasonCode}
	}
	return f
}

// tally is the draft's share: its key and what it adds; nil key for none.
func (f qualityFields) tally() ([]byte, qualityTally) {
	var t qualityTally
	if f.Drafter == "person" {
		return nil, t
	}
	if f.Guards != nil {
		t[qGuarded] = 1
		if f.Guards.LanguageDiffers {
			t[qLanguage] = 1
		}
		if len(f.Guards.Figures) > 0 {
			t[qFigures] = 1
		}
	}
	if dec := f.Decision; dec != nil {
		if dec.Distance != nil && f.Status == DraftApproved {
			t[qMeasured] = 1
			t[qDistance] = int64(math.Round(min(max(*dec.Distance, 0), 1) * 1e6))
		}
		for i, c := range ReasonCodes {
			if dec.ReasonCode == c {
				t[qReasons+i] = 1
			}
		}
	}
	if t == (qualityTally{}) {
		return nil, t
	}
	k := append(bytes.Clone(qualityStatsPrefix), f.CreatedAt.UTC().Format(time.DateOnly)...)
	k = append(append(k, 0), f.Channel...)
	return append(append(k, 0), f.PromptVersion...), t
}

func parseQualityKey(k []byte) (QualityFigure, bool) {
	rest, ok := bytes.CutPrefix(k, qualityStatsPrefix)
	if !ok || len(rest) < len(time.DateOnly)+1 || rest[len(time.DateOnly)] != 0 {
		return QualityFigure{}, false
	}
	f := QualityFigure{Day: string(rest[:len(time.DateOnly)])}
	ch, version, ok := bytes.Cut(rest[len(time.DateOnly)+1:], []byte{0})
	if !ok {
		return QualityFigure{}, false
	}
	f.Channel, f.PromptVersion = string(ch), string(version)
	return f, true
}

func readQualityTally(v []byte) (qualityTally, bool) {
	var t qualityTally
	if len(v) != 8*len(t) {
		return t, false
	}
	for i := range t {
		t[i] = int64(binary.BigEndian.Uint64(v[8*i:]))
	}
	return t, true
}

func (t qualityTally) bytes() []byte {
	out := make([]byte, 8*len(t))
	for i, n := range t {
		binary.BigEndian.PutUint64(out[8*i:], uint64(n))
	}
	return out
}

// moveQualityFigures moves the quality figures from old (nil: none) to d
// (nil: deleted), as moveDraftFigures does the drafting figures.
func moveQualityFigures(tx *Tx, old, d *Draft) error {
	var ko, kn []byte
	var to, tn qualityTally
	if old != nil {
		ko, to = qualityFieldsOf(old).tally()
	}
	if d != nil {
		kn, tn = qualityFieldsOf(d).tally()
	}
	if bytes.Equal(ko, kn) && to == tn {
		return nil
	}
	meta := tx.bucket(bucketMeta)
	add := func(k []byte, t qualityTally, sign int64) error {
		cur, _ := readQualityTally(meta.Get(k))
		for i := range cur {
			cur[i] = max(0, cur[i]+sign*t[i]) // a drifted figure stops at zero; Check says so
		}
		if cur == (qualityTally{}) {
			return meta.Delete(k)
		}
		return meta.Put(k, cur.bytes())
	}
	if ko != nil {
		if err := add(ko, to, -1); err != nil {
			return err
		}
	}
	if kn != nil {
		return add(kn, tn, 1)
	}
	return nil
}

// QualityFigures returns the quality figures of the drafts created on
// since's UTC day or later in the channels v sees, in key order: a read of
// the few keys those days have, never of the drafts.
func (s *Store) QualityFigures(v Visible, since time.Time) ([]QualityFigure, error) {
	var out []QualityFigure
	err := s.view(func(tx *Tx) error {
		out = nil
		seek := append(bytes.Clone(qualityStatsPrefix), since.UTC().Format(time.DateOnly)...)
		c := tx.bucket(bucketMeta).Cursor()
		for k, val := c.Seek(seek); k != nil && bytes.HasPrefix(k, qualityStatsPrefix); k, val = c.Next() {
			f, ok := parseQualityKey(k)
			t, ok2 := readQualityTally(val)
			if !ok || !ok2 || !v.Channel(f.Channel) {
				continue // Check names a key that does not read
			}
			f.Guarded, f.LanguageFlags, f.FigureFlags = int(t[qGuarded]), int(t[qLanguage]), int(t[qFigures])
			f.Measured, f.DistanceSum = int(t[qMeasured]), float64(t[qDistance])/1e6
			for i, c := range ReasonCodes {
				if n := t[qReasons+i]; n > 0 {
					if f.Reasons == nil {
						f.Reasons = map[string]int{}
					}
					f.Reasons[c] = int(n)
				}
			}
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: quality figures: %w", err)
	}
	return out, nil
}

// checkQualityFigures proves the quality figures against a scan of the
// drafts, decoding only the fields they read.
func checkQualityFigures(tx *Tx) []error {
	var problems []error
	stored := map[string]qualityTally{}
	c := tx.bucket(bucketMeta).Cursor()
	for k, v := c.Seek(qualityStatsPrefix); k != nil && bytes.HasPrefix(k, qualityStatsPrefix); k, v = c.Next() {
		_, ok := parseQualityKey(k)
		t, ok2 := readQualityTally(v)
		if !ok || !ok2 {
			problems = append(problems, fmt.Errorf("check: meta key %q is not a quality figure", k))
			continue
		}
		stored[string(k)] = t
	}
	actual := map[string]qualityTally{}
	_ = tx.bucket(bucketDrafts).ForEach(func(_, raw []byte) error {
		var f qualityFields
		if json.Unmarshal(raw, &f) != nil {
			return nil // the drafts table's check names it
		}
		if k, t := f.tally(); k != nil {
			sum := actual[string(k)]
			for i := range sum {
				sum[i] += t[i]
			}
			actual[string(k)] = sum
		}
		return nil
	})
	return append(problems, diffCounts(stored, actual, strings.Compare, func(k string, got, want qualityTally) error {
		f, _ := parseQualityKey([]byte(k))
		return fmt.Errorf("check: the quality figure of %s, channel %s, prompt %s says %v (guarded, language and figure flags, measured, distance in millionths, reasons %v), the drafts hold %v",
			f.Day, f.Channel, f.PromptVersion, got, ReasonCodes, want)
	})...)
}
