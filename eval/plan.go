package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/handoff/handoff/store"
)

// Settings are what a run evaluates: the selection of turns and the
// candidate. A resume must ask for the same; the budget and the
// concurrency may change between resumes.
type Settings struct {
	Client  string `json:"client,omitempty"`
	Channel string `json:"channel,omitempty"`
	// Channels are the channels the selection keeps; empty: every one.
	Channels []string   `json:"channels,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	Sample   int        `json:"sample"`
	Seed     uint64     `json:"seed"`
	// Candidate is what drafts again; Current names the configured drafter.
	Candidate Version `json:"candidate"`
	Current   Version `json:"current"`
}

// Version names a drafter: its model, prompt version, and the hashes of
// its prompt and facts files ("" when the configured ones are used).
type Version struct {
	Model         string `json:"model"`
	PromptVersion string `json:"prompt_version"`
	PromptFile    string `json:"prompt_file,omitempty"`
	PromptHash    string `json:"prompt_hash,omitempty"`
	FactsFile     string `json:"facts_file,omitempty"`
	FactsHash     string `json:"facts_hash,omitempty"`
}

// Differs names, as "--flag X, not Y", the first setting in which s asks
// for another run than was, which a resume cannot take; "" when none.
func (s Settings) Differs(was Settings) string {
	day := func(t *time.Time) string {
		if t == nil {
			return "none"
		}
		return t.UTC().Format(time.RFC3339)
	}
	or := func(v, none string) string {
		if v == "" {
			return none
		}
		return v
	}
	for _, c := range []struct{ flag, now, was string }{
		{"--client", or(s.Client, "none"), or(was.Client, "none")},
		{"--channel", or(s.Channel, "none"), or(was.Channel, "none")},
		{"--since", day(s.Since), day(was.Since)},
		{"--until", day(s.Until), day(was.Until)},
		{"--sample", fmt.Sprint(s.Sample), fmt.Sprint(was.Sample)},
		{"--seed", fmt.Sprint(s.Seed), fmt.Sprint(was.Seed)},
		{"--model", s.Candidate.Model, was.Candidate.Model},
		{"--label", s.Candidate.PromptVersion, was.Candidate.PromptVersion},
		{"--prompt (its content)", or(s.Candidate.PromptHash, "the configured prompt"), or(was.Candidate.PromptHash, "the configured prompt")},
		{"--facts (its content)", or(s.Candidate.FactsHash, "the configured facts"), or(was.Candidate.FactsHash, "the configured facts")},
	} {
		if c.now != c.was {
			return fmt.Sprintf("%s %s, not %s", c.flag, c.now, c.was)
		}
	}
	return ""
}

// Plan is which turns a run drafts, in order, fixed by its first part so
// that every resume drafts the same sample whatever the database holds by
// then.
type Plan struct {
	V        int       `json:"v"`
	Created  time.Time `json:"created"`
	Settings Settings  `json:"settings"`
	// Source says where the snapshot came from.
	Source string `json:"source"`
	// Eligible counts the approved turns that matched the selection.
	Eligible int `json:"eligible"`
	// Turns are the approved drafts' ids, in the order they are drafted.
	Turns []string `json:"turns"`
}

// Filter selects the past turns a run may sample.
type Filter struct {
	Channels     map[string]bool // nil: every channel
	Since, Until time.Time       // zero: unbounded; Until is exclusive
}

// Eligible lists the ids of the approved drafts that f keeps, oldest
// first: a draft a model or template wrote (not one a person wrote, which
// no draft was shown for) that a person approved, on one of f's channels,
// drafted within f's times.
func Eligible(st *store.Store, f Filter) ([]string, error) {
	var ids []string
	keep := func(d store.Draft) bool {
		switch {
		case d.Decision == nil, d.Drafter == "person", d.Drafter == "":
		case f.Channels != nil && !f.Channels[d.Channel]:
		case !f.Since.IsZero() && d.CreatedAt.Before(f.Since):
		case !f.Until.IsZero() && !d.CreatedAt.Before(f.Until):
		default:
			ids = append(ids, d.ID)
		}
		return false // collected here: no page is kept
	}
	var after []byte
	for {
		_, next, partial, err := st.DraftsWhere(store.DraftFilter{Status: store.DraftApproved, After: after, Limit: 1, Keep: keep, Scan: 2000})
		if err != nil {
			return nil, err
		}
		if !partial || next == nil {
			return ids, nil
		}
		after = next
	}
}

// Sample is n of ids (every one when n is 0 or more than there are) in an
// order drawn from seed: the same ids and seed give the same sample in the
// same order. Drafted in that order, the turns a stopped run finished are
// a sample too.
func Sample(ids []string, n int, seed uint64) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	rng := rand.New(rand.NewPCG(seed, 0x68616e646f6666)) // "handoff"
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if n > 0 && n < len(out) {
		out = out[:n]
	}
	return out
}

// ReadPlan reads the plan of the output folder dir; ok is false when it
// has none (a new run).
func ReadPlan(dir string) (p Plan, ok bool, err error) {
	raw, err := os.ReadFile(filepath.Join(dir, PlanFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Plan{}, false, nil
	}
	if err != nil {
		return Plan{}, false, fmt.Errorf("eval: read the plan: %w", err)
	}
	if err := decodeStrict(raw, &p); err != nil {
		return Plan{}, false, fmt.Errorf("eval: %s in %s cannot be read (%v): give another --out folder", PlanFile, dir, err)
	}
	if p.V != formVersion {
		return Plan{}, false, fmt.Errorf("eval: %s in %s is version %d, this binary reads %d: give another --out folder", PlanFile, dir, p.V, formVersion)
	}
	return p, true, nil
}

// WritePlan writes p into dir, fsynced and renamed into place.
func WritePlan(dir string, p Plan) error {
	p.V = formVersion
	err := store.WriteFileAtomic(filepath.Join(dir, PlanFile), func(w io.Writer) error { return writeJSON(w, p) }, nil)
	if err != nil {
		return fmt.Errorf("eval: write the plan: %w", err)
	}
	return nil
}

// writeJSON writes v indented, with <, > and & as they are.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// decodeStrict decodes raw into v, refusing keys v does not know.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// ParseTime reads a --since or --until value: a date (2026-11-01, UTC
// midnight) or an RFC 3339 time.
func ParseTime(flag, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%s %q is neither a date (2026-11-01) nor an RFC 3339 time (2026-11-01T09:00:00Z)", flag, s)
}

// NewPlan selects the turns f keeps from st and samples them as s asks.
func NewPlan(st *store.Store, f Filter, s Settings, source string, now time.Time) (Plan, error) {
	ids, err := Eligible(st, f)
	if err != nil {
		return Plan{}, fmt.Errorf("eval: select the approved turns: %w", err)
	}
	return Plan{V: formVersion, Created: now.UTC(), Settings: s, Source: source, Eligible: len(ids), Turns: Sample(ids, s.Sample, s.Seed)}, nil
}
