// Package eval re-drafts a sample of past approved turns with a candidate
// prompt, model or facts, and measures each new draft against what the
// person actually sent, beside the draft that was shown then: the edit
// distance (quality.Distance), the guards' hits (review.Guard), the cost
// and the latency. It never writes to the database it reads: it runs on a
// read-only store (a snapshot the command copies first), and keeps its
// own state in an output folder — the plan (which turns, in which order),
// a journal appended and fsynced per finished turn (so a run stopped or
// killed resumes without drafting a finished turn again), results.json
// and report.html. It stands above workers (the draft job's input) and
// review (the guards); handoff eval wires it.
package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/quality"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// The files of an output folder.
const (
	PlanFile     = "plan.json"
	JournalFile  = "journal.jsonl"
	ResultsFile  = "results.json"
	ReportFile   = "report.html"
	SnapshotFile = "snapshot.db"
)

// formVersion is the version of every file eval writes.
const formVersion = 1

// Drafter writes the candidate's draft of one turn.
type Drafter interface {
	Draft(ctx context.Context, in drafter.Input) (drafter.Output, error)
}

// Inputs builds the drafter's input of a past draft's turn
// (workers.DraftJob.PastInput).
type Inputs interface {
	PastInput(d store.Draft) (drafter.Input, review.GuardInput, error)
}

// GuardFunc runs the guards on a reply (review.Review.Guard).
type GuardFunc func(reply string, in review.GuardInput) *store.Guards

// Run is one evaluation over an output folder.
type Run struct {
	Store  *store.Store // read-only: the snapshot
	Inputs Inputs
	// Drafter is the candidate; Guard guards its drafts (with the
	// candidate's facts), CurrentGuard the drafts shown (with the facts
	// version each was written from).
	Drafter      Drafter
	Guard        GuardFunc
	CurrentGuard GuardFunc
	// Facts, when set, are the candidate's facts (--facts), given to its
	// drafter and its guard instead of each turn's own (the version its
	// draft was written from, Inputs); FactsText their text.
	Facts     *drafter.Facts
	FactsText string
	Out       string // the output folder
	// Budget is the most the run may spend, all its resumes together (0:
	// no cap), in Currency.
	Budget      float64
	Currency    string
	Concurrency int // calls at once; 0: 1
	// Progress, when set, is told of each finished turn (done of planned).
	Progress func(done, planned int)
	// Now is the clock of the latencies and of the files' times; nil: time.Now.
	Now func() time.Time
	// RateWait bounds one wait on a rate-limited model server; 0: a minute.
	RateWait time.Duration
}

// The reasons a run stops before every turn is drafted.
const (
	StoppedBudget = "budget" // the budget is spent
	StoppedSignal = "signal" // the context ended (SIGINT, SIGTERM)
	StoppedError  = "error"  // the model server or the output folder failed
)

// errBudget ends a worker whose next call the budget does not allow.
var errBudget = errors.New("eval: the budget is spent")

// Execute drafts every turn of plan not already in the journal, appending
// each to it as it finishes, and returns the results of every turn the
// journal holds. It stops cleanly when the budget is reached
// (Results.Stopped) or ctx ends; what it finished is kept either way. A
// model server that fails (unreachable, a timeout, a 5xx, a refused
// request, rate limits past the retries) stops the run with that error,
// and the results so far: the failure is the server's, not the turn's, so
// the turn is drafted again by the next run. An answer that is not a
// valid draft, or a refusal, is the turn's result.
func (r *Run) Execute(ctx context.Context, plan Plan) (Results, error) {
	j, done, err := openJournal(filepath.Join(r.Out, JournalFile))
	if err != nil {
		return Results{}, err
	}
	defer j.close()
	b := newBudget(r.Budget)
	for _, t := range done { // what the run's earlier parts spent
		if t.Candidate.LatencyMS != nil {
			b.spent += t.Candidate.Cost
			b.largest = max(b.largest, t.Candidate.Cost)
			b.calls++
		}
	}
	var todo []string
	for _, id := range plan.Turns {
		if _, ok := done[id]; !ok {
			todo = append(todo, id)
		}
	}
	var (
		mu       sync.Mutex
		next     int
		stopped  string
		firstErr error
		finished = len(done)
	)
	take := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stopped != "" || firstErr != nil || next == len(todo) {
			return "", false
		}
		next++
		return todo[next-1], true
	}
	stop := func(why string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if stopped == "" && why != "" {
			stopped = why
		}
		if firstErr == nil && err != nil {
			firstErr = err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWaits := context.AfterFunc(ctx, b.wake)
	defer stopWaits()
	var wg sync.WaitGroup
	for range max(r.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id, ok := take()
				if !ok {
					return
				}
				t, err := r.one(ctx, id, b)
				switch {
				case err == nil:
					// Finished, even if a stop came meanwhile: kept.
				case errors.Is(err, errBudget):
					stop(StoppedBudget, nil)
					return
				case ctx.Err() != nil:
					stop(StoppedSignal, nil)
					return
				case err != nil:
					stop("", err)
					cancel()
					return
				}
				if err := j.append(t); err != nil {
					stop("", err)
					cancel()
					return
				}
				mu.Lock()
				done[id] = t
				finished++
				if r.Progress != nil { // one at a time, in order
					r.Progress(finished, len(plan.Turns))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res := r.results(plan, done, b)
	if firstErr != nil {
		res.Stopped = StoppedError
		return res, firstErr
	}
	if len(done) < len(plan.Turns) {
		res.Stopped = stopped
		if res.Stopped == "" {
			res.Stopped = StoppedSignal
		}
	}
	return res, nil
}

// one evaluates the turn of the approved draft id: the draft shown, as
// stored, and the candidate's, drafted now.
func (r *Run) one(ctx context.Context, id string, b *budget) (Turn, error) {
	d, err := r.Store.Draft(id)
	if errors.Is(err, store.ErrNotFound) {
		return Turn{DraftID: id, Error: "the draft is no longer in the database"}, nil
	}
	if err != nil {
		return Turn{}, err
	}
	t := Turn{
		DraftID: d.ID, EventKey: d.EventKey, Channel: d.Channel, ConversationID: d.ConversationID,
		DraftedAt: d.CreatedAt, Sent: Sent(d),
		Current: Side{
			Text: d.Text, Drafter: d.Drafter, Model: d.Model, PromptVersion: d.PromptVersion,
			Cost: d.Cost, Currency: d.Currency, PromptTokens: d.PromptTokens, OutputTokens: d.OutputTokens,
		},
	}
	if d.Decision != nil {
		t.ApprovedAt = d.Decision.At
		t.Edited = d.Decision.Edited
	}
	t.Current.measure(t.Sent)
	t.Current.LatencyMS = r.latency(d)
	in, gi, err := r.Inputs.PastInput(d)
	if err != nil {
		t.Error = "its turn cannot be read: " + err.Error()
		return t, nil
	}
	t.Customer = in.Text
	if d.Drafter != "template" && d.Drafter != "person" && r.CurrentGuard != nil {
		// Guarded again over the same input as the candidate, so the two
		// are counted alike (the stored guards may predate them).
		t.Current.guard(r.CurrentGuard(d.Text, gi))
	}
	cgi := gi
	if r.Facts != nil {
		in.Facts, cgi.Facts = r.Facts, r.FactsText
	}
	out, lat, err := r.draft(ctx, in, b)
	if err != nil && ctx.Err() != nil {
		return Turn{}, ctx.Err()
	}
	if errors.Is(err, errBudget) {
		return Turn{}, err
	}
	t.Candidate = Side{
		Drafter: out.Drafter, Model: out.Model, PromptVersion: out.PromptVersion,
		Cost: out.Cost, Currency: out.Currency, PromptTokens: out.PromptTokens, OutputTokens: out.OutputTokens,
		LatencyMS: &lat,
	}
	var invalid *drafter.InvalidOutput
	var refused *drafter.Refused
	switch {
	case errors.As(err, &invalid), errors.As(err, &refused):
		t.Error = "the candidate could not draft it: " + err.Error()
		return t, nil
	case err != nil:
		return Turn{}, fmt.Errorf("the model server failed on turn %s: %w", d.ID, err)
	}
	t.Candidate.Text = out.Text
	t.Candidate.measure(t.Sent)
	if r.Guard != nil {
		t.Candidate.guard(r.Guard(out.Text, cgi))
	}
	return t, nil
}

// draft asks the candidate once the budget lets the call through, and
// again after a rate limit (never after any other failure: that is the
// turn's result). lat is the last call's duration in milliseconds.
func (r *Run) draft(ctx context.Context, in drafter.Input, b *budget) (out drafter.Output, lat float64, err error) {
	for attempt := 1; ; attempt++ {
		reserve, err := b.take(ctx)
		if err != nil {
			return drafter.Output{}, 0, err
		}
		t0 := r.now()
		out, err = r.Drafter.Draft(ctx, in)
		lat = float64(r.now().Sub(t0).Microseconds()) / 1000
		b.done(reserve, out.Cost)
		var limited *drafter.RateLimited
		if !errors.As(err, &limited) || attempt == 3 {
			return out, lat, err
		}
		wait := min(max(limited.After, time.Second), r.rateWait())
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return out, lat, ctx.Err()
		case <-tm.C:
		}
	}
}

func (r *Run) rateWait() time.Duration {
	if r.RateWait > 0 {
		return r.RateWait
	}
	return time.Minute
}

// latency is how long the attempt that stored d took, from its job's
// attempt record; nil when the job is gone (retention) or never ended.
func (r *Run) latency(d store.Draft) *float64 {
	if d.ExecutionID == "" {
		return nil
	}
	tl, err := r.Store.Timeline(d.EventKey)
	if err != nil {
		return nil
	}
	for _, j := range tl.Jobs {
		for _, a := range j.Attempts {
			if a.ExecutionID == d.ExecutionID && a.EndedAt != nil {
				ms := float64(a.EndedAt.Sub(a.StartedAt).Microseconds()) / 1000
				return &ms
			}
		}
	}
	return nil
}

func (r *Run) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Sent is what the person approved of d: the decision's text, edits
// included, or the draft's own when the decision kept none.
func Sent(d store.Draft) string {
	if d.Decision != nil && d.Decision.Text != "" {
		return d.Decision.Text
	}
	return d.Text
}

// Turn is one past turn evaluated: the draft that was shown (Current),
// the candidate's, and what the person sent.
type Turn struct {
	DraftID        string    `json:"draft_id"`
	EventKey       string    `json:"event_key,omitempty"`
	Channel        string    `json:"channel,omitempty"`
	ConversationID string    `json:"conversation_id,omitempty"`
	DraftedAt      time.Time `json:"drafted_at,omitzero"`
	ApprovedAt     time.Time `json:"approved_at,omitzero"`
	Edited         bool      `json:"edited,omitempty"`
	// Customer is the turn's messages, as the drafter is given them.
	Customer  string `json:"customer,omitempty"`
	Sent      string `json:"sent"`
	Current   Side   `json:"current"`
	Candidate Side   `json:"candidate"`
	// Error says why the turn has no candidate draft (the model failed,
	// the turn cannot be read); such a turn is left out of the summary.
	Error string `json:"error,omitempty"`
}

// Side is one draft of a turn measured against what was sent.
type Side struct {
	Text          string  `json:"text"`
	Drafter       string  `json:"drafter,omitempty"`
	Model         string  `json:"model,omitempty"`
	PromptVersion string  `json:"prompt_version,omitempty"`
	Distance      float64 `json:"distance"`
	// DistanceApprox: the texts were too long for an exact measure.
	DistanceApprox bool          `json:"distance_approx,omitempty"`
	Guards         *store.Guards `json:"guards,omitempty"`
	// GuardHits counts the guards' findings: a language that differs, and
	// each figure found neither in the facts nor in the conversation.
	GuardHits    int     `json:"guard_hits"`
	Cost         float64 `json:"cost"`
	Currency     string  `json:"currency,omitempty"`
	PromptTokens int64   `json:"prompt_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	// LatencyMS is the drafting call's duration; nil when not known (the
	// shown draft's job record is gone).
	LatencyMS *float64 `json:"latency_ms,omitempty"`
}

func (s *Side) measure(sent string) {
	s.Distance, s.DistanceApprox = quality.Distance(s.Text, sent)
}

func (s *Side) guard(g *store.Guards) {
	s.Guards, s.GuardHits = g, 0
	if g == nil {
		return
	}
	if g.LanguageDiffers {
		s.GuardHits++
	}
	s.GuardHits += len(g.Figures)
}

// results are the turns of plan the journal holds, in the plan's order,
// and their summary.
func (r *Run) results(plan Plan, done map[string]Turn, b *budget) Results {
	res := Results{
		V: formVersion, Settings: plan.Settings, Source: plan.Source, Eligible: plan.Eligible,
		Planned: len(plan.Turns), Currency: r.Currency, Spent: b.spent, Written: r.now().UTC(),
		Turns: []Turn{},
	}
	if r.Budget > 0 {
		res.Budget = &r.Budget
	}
	for _, id := range plan.Turns {
		if t, ok := done[id]; ok {
			res.Turns = append(res.Turns, t)
		}
	}
	res.Complete = len(res.Turns) == len(plan.Turns)
	res.Summary = Summarize(res.Turns)
	return res
}

// Results is what results.json holds.
type Results struct {
	V        int       `json:"v"`
	Settings Settings  `json:"settings"`
	Source   string    `json:"source"`
	Written  time.Time `json:"written"`
	// Eligible counts the approved turns that matched; Planned those
	// sampled from them; Turns are those drafted so far.
	Eligible int  `json:"eligible"`
	Planned  int  `json:"planned"`
	Complete bool `json:"complete"`
	// Stopped says why a run that is not complete stopped: StoppedBudget
	// or StoppedSignal.
	Stopped  string   `json:"stopped,omitempty"`
	Budget   *float64 `json:"budget,omitempty"`
	Spent    float64  `json:"spent"`
	Currency string   `json:"currency,omitempty"`
	Summary  Summary  `json:"summary"`
	Turns    []Turn   `json:"turns"`
}

// WriteFiles writes results.json and report.html into dir, each through
// a temporary file renamed into place.
func WriteFiles(dir string, res Results) error {
	if err := store.WriteFileAtomic(filepath.Join(dir, ResultsFile), func(w io.Writer) error { return writeJSON(w, res) }, nil); err != nil {
		return fmt.Errorf("eval: write %s: %w", ResultsFile, err)
	}
	if err := store.WriteFileAtomic(filepath.Join(dir, ReportFile), func(w io.Writer) error { return WriteHTML(w, res) }, nil); err != nil {
		return fmt.Errorf("eval: write %s: %w", ReportFile, err)
	}
	return nil
}

// ReadResults reads a results.json.
func ReadResults(path string) (Results, error) {
	var res Results
	raw, err := os.ReadFile(path)
	if err != nil {
		return res, err
	}
	return res, decodeStrict(raw, &res)
}

// sortedChannels is a set's names in order.
func sortedChannels(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
