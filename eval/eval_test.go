package eval_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/eval"
	"github.com/handoff/handoff/eval/evaltest"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/quality"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/workers"
)

// callCost is what one candidate call costs: the fake model reports 11
// prompt and 7 completion tokens, priced at 1000 a million each.
const callCost = 18 * 1000 / 1e6

// invented is the candidate's reply to the long corpus text: a price
// neither the facts nor the conversation hold.
const invented = "Fish & chips for two are €99.50, see you soon."

// fixture is a closed database of n approved turns and the config.
type fixture struct {
	dir   string
	cfg   *config.Config
	model *testkit.Model
	turns []evaltest.Turn
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	m := testkit.NewModel(t)
	f := &fixture{dir: t.TempDir(), cfg: evaltest.Config(m.URL), model: m}
	st, err := store.Open(f.dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.turns = evaltest.Build(t, st, f.cfg, n)
	if err := st.Check(); err != nil {
		t.Fatalf("the fixture's Check: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// The candidate answers every turn from its own words: the long text
	// with an invented price, every other one with the facts' figures.
	m.Answer(func(c testkit.ModelCall) testkit.Reply {
		reply := "Thanks for writing! Fish & chips are €12 and we open at 09:00."
		if last := c.Req.Messages[len(c.Req.Messages)-1]; strings.Contains(last.Text(), "Fish & chips for <2> please") {
			reply = invented
		}
		raw, _ := json.Marshal(map[string]any{"reply": reply, "intent": "sales", "name": nil, "email": nil, "phone": nil, "summary": "s", "confidence": 0.9})
		return testkit.JSONReply(string(raw))
	})
	return f
}

func (f *fixture) path() string { return filepath.Join(f.dir, store.FileName) }

// open opens the fixture read-only, closed at cleanup.
func (f *fixture) open(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.OpenFile(f.path(), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// run wires an evaluation as handoff eval does, with cand as the
// candidate's config (nil: the fixture's).
func (f *fixture) run(t *testing.T, st *store.Store, out string, cand *config.Config, budget float64, conc int) *eval.Run {
	t.Helper()
	if cand == nil {
		c := *f.cfg
		c.Drafter.PromptVersion = "cand"
		cand = &c
	}
	d, err := drafter.NewOpenAI(drafter.OpenAIConfig{
		BaseURL: cand.Drafter.BaseURL, Model: cand.Drafter.Model, PromptVersion: cand.Drafter.PromptVersion,
		Timeout: cand.Drafter.Timeout,
		Price:   drafter.Price{Input: cand.Drafter.Price.Input, Output: cand.Drafter.Price.Output, Currency: "USD"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &eval.Run{
		Store: st, Inputs: &workers.DraftJob{Store: st, Router: workers.NewRouter(f.cfg.Routing), Client: f.cfg.ClientOf},
		Drafter: d, Guard: review.New(st, cand).Guard, CurrentGuard: review.New(st, f.cfg).Guard,
		Out: out, Budget: budget, Currency: "USD", Concurrency: conc,
	}
	if cand.Drafter.Facts != f.cfg.Drafter.Facts { // --facts
		entries, _ := facts.Entries(cand.Drafter.Facts, nil, 1)
		r.Facts, r.FactsText = workers.DrafterFacts(0, entries), cand.Drafter.Facts
	}
	return r
}

func plan(t *testing.T, st *store.Store, out string, sample int, seed uint64) eval.Plan {
	t.Helper()
	p, err := eval.NewPlan(st, eval.Filter{}, eval.Settings{
		Sample: sample, Seed: seed,
		Current: eval.Version{Model: "m-current", PromptVersion: "v1"}, Candidate: eval.Version{Model: "m-current", PromptVersion: "cand"},
	}, "the fixture", evaltest.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := eval.WritePlan(out, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:])
}

// answered counts the model's answered calls by correlation id.
func answered(m *testkit.Model) map[string]int {
	n := map[string]int{}
	for _, c := range m.Calls() {
		if !c.Reply.Hang {
			n[c.Correlation()]++
		}
	}
	return n
}

// TestEvaluatesEverySampledTurnOnce: 250 of 300 approved turns drafted
// again on four connections, each once, measured as the quality package
// measures, guarded, priced and timed, the summary the sum of the turns,
// and the database file not changed by a byte.
func TestEvaluatesEverySampledTurnOnce(t *testing.T) {
	f := newFixture(t, 300)
	before := fileSum(t, f.path())
	st := f.open(t)
	statsBefore, err := st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	p := plan(t, st, out, 250, 7)
	if p.Eligible != 300 || len(p.Turns) != 250 {
		t.Fatalf("plan: %d eligible, %d planned; want 300 and 250", p.Eligible, len(p.Turns))
	}
	res, err := f.run(t, st, out, nil, 0, 4).Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Stopped != "" || len(res.Turns) != 250 {
		t.Fatalf("complete %v, stopped %q, %d turns; want a complete run of 250", res.Complete, res.Stopped, len(res.Turns))
	}
	byID := map[string]evaltest.Turn{}
	for _, tn := range f.turns {
		byID[tn.Draft.ID] = tn
	}
	calls := answered(f.model)
	if len(f.model.Calls()) != 250 {
		t.Errorf("the model got %d calls; want 250, one a turn", len(f.model.Calls()))
	}
	var dist []float64
	for i, tn := range res.Turns {
		want, ok := byID[tn.DraftID]
		switch {
		case !ok:
			t.Fatalf("turn %s is not one of the fixture's", tn.DraftID)
		case tn.DraftID != p.Turns[i]:
			t.Errorf("turn %d is %s; want the plan's %s", i, tn.DraftID, p.Turns[i])
		case tn.Error != "":
			t.Errorf("turn %s: %s", tn.DraftID, tn.Error)
		case calls[want.Draft.CorrelationID] != 1:
			t.Errorf("turn %s was drafted %d times; want once", tn.DraftID, calls[want.Draft.CorrelationID])
		}
		if tn.Sent != want.Sent || tn.Current.Text != want.Draft.Text {
			t.Errorf("turn %s: sent %q, shown %q; want %q, %q", tn.DraftID, tn.Sent, tn.Current.Text, want.Sent, want.Draft.Text)
		}
		if d, _ := quality.Distance(want.Draft.Text, want.Sent); tn.Current.Distance != d {
			t.Errorf("turn %s: shown distance %v; want %v", tn.DraftID, tn.Current.Distance, d)
		}
		if d, _ := quality.Distance(tn.Candidate.Text, want.Sent); tn.Candidate.Distance != d {
			t.Errorf("turn %s: candidate distance %v; want %v", tn.DraftID, tn.Candidate.Distance, d)
		}
		dist = append(dist, tn.Candidate.Distance)
		// The candidate's figures are in the facts but for the long text's
		// turn; its English answers a customer who wrote in another
		// language (Arabic, Hebrew) with a language hit.
		long := strings.HasPrefix(tn.Customer, "Fish & chips for <2>")
		lang := quality.CompareLanguages(tn.Customer, tn.Candidate.Text).Differs
		if got, want := tn.Candidate.GuardHits > 0, long || lang; got != want {
			t.Errorf("turn %s (customer %.30q): candidate %q has %d guard hits; want hits %v (language differs: %v)", tn.DraftID, tn.Customer, tn.Candidate.Text, tn.Candidate.GuardHits, want, lang)
		}
		// Invented the first time; later in its conversation, the
		// earlier reply holds the same figures.
		if strings.Contains(want.Draft.Text, "€49.99") && want.Round == 0 {
			if n := len(tn.Current.Guards.Figures); n != 2 {
				t.Errorf("turn %s: the shown draft's invented price and time gave %d figure hits; want 2", tn.DraftID, n)
			}
			if lang := quality.CompareLanguages(tn.Customer, want.Draft.Text).Differs; tn.Current.GuardHits != 2+btoi(lang) {
				t.Errorf("turn %s: the shown draft has %d guard hits; want its 2 figures and %d for its language", tn.DraftID, tn.Current.GuardHits, btoi(lang))
			}
		}
		if tn.Candidate.Cost != callCost || tn.Candidate.Model != "m-current" || tn.Candidate.PromptVersion != "cand" {
			t.Errorf("turn %s: candidate cost %v, model %q, version %q; want %v, m-current, cand", tn.DraftID, tn.Candidate.Cost, tn.Candidate.Model, tn.Candidate.PromptVersion, callCost)
		}
		if tn.Current.LatencyMS == nil || *tn.Current.LatencyMS != float64(evaltest.DraftLatency.Milliseconds()) {
			t.Errorf("turn %s: shown latency %v; want the attempt's %v", tn.DraftID, tn.Current.LatencyMS, evaltest.DraftLatency)
		}
		if tn.Candidate.LatencyMS == nil {
			t.Errorf("turn %s: no candidate latency", tn.DraftID)
		}
	}
	s := res.Summary
	if s.Compared != 250 || s.Failed != 0 {
		t.Errorf("summary compared %d, failed %d; want 250, 0", s.Compared, s.Failed)
	}
	mean := 0.0
	for _, d := range dist {
		mean += d
	}
	mean /= float64(len(dist))
	if s.Candidate.MeanDistance == nil || math.Abs(*s.Candidate.MeanDistance-mean) > 1e-12 {
		t.Errorf("candidate mean distance %v; want %v", s.Candidate.MeanDistance, mean)
	}
	if math.Abs(s.Candidate.Cost-250*callCost) > 1e-9 || math.Abs(res.Spent-250*callCost) > 1e-9 {
		t.Errorf("candidate cost %v, spent %v; want %v", s.Candidate.Cost, res.Spent, 250*callCost)
	}
	if s.Current.LatencyP50 == nil || *s.Current.LatencyP50 != 800 || s.Candidate.Timed != 250 {
		t.Errorf("shown p50 %v, candidate timed %d; want 800 and 250", s.Current.LatencyP50, s.Candidate.Timed)
	}
	if s.Candidate.FigureHits == 0 || s.Current.FigureHits == 0 {
		t.Errorf("figure hits shown %d, candidate %d; want some on each side", s.Current.FigureHits, s.Candidate.FigureHits)
	}

	// A later turn is drafted from its conversation as the draft job
	// would: the earlier message and the reply that was approved for it.
	seen := false
	for _, c := range f.model.Calls() {
		for _, tn := range f.turns[:100] {
			if c.Req.Saw(tn.Sent) && c.Correlation() != tn.Draft.CorrelationID && len(c.Req.Messages) > 2 {
				seen = true
			}
		}
	}
	if !seen {
		t.Error("no later turn's request carried an earlier turn's approved reply as its history")
	}

	statsAfter, err := st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if statsAfter != statsBefore {
		t.Errorf("the database's counts went from %+v to %+v", statsBefore, statsAfter)
	}
	if after := fileSum(t, f.path()); after != before {
		t.Error("the database file changed")
	}
}

// TestBudgetStopsAndAResumeGoesOn: the budget stops the run once spent,
// over by at most one call, with what it drafted kept; a resume with more
// budget drafts the rest, none of the first part again.
func TestBudgetStopsAndAResumeGoesOn(t *testing.T) {
	f := newFixture(t, 60)
	st := f.open(t)
	out := t.TempDir()
	p := plan(t, st, out, 0, 3)
	const budget = 0.1
	res, err := f.run(t, st, out, nil, budget, 3).Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != eval.StoppedBudget || res.Complete {
		t.Fatalf("stopped %q, complete %v; want stopped by the budget", res.Stopped, res.Complete)
	}
	if res.Spent < budget || res.Spent > budget+callCost+1e-12 {
		t.Errorf("spent %v; want the budget %v reached, by at most one call (%v)", res.Spent, budget, callCost)
	}
	if n := len(f.model.Calls()); n != len(res.Turns) {
		t.Errorf("%d model calls for %d turns drafted; want one a turn", n, len(res.Turns))
	}
	if got := eval.Status(res); !strings.Contains(got, "budget") || !strings.Contains(got, "--budget") {
		t.Errorf("status %q does not say the budget stopped it", got)
	}
	first := len(res.Turns)

	res, err = f.run(t, st, out, nil, 0, 3).Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || len(res.Turns) != 60 {
		t.Fatalf("the resume: complete %v with %d turns; want all 60", res.Complete, len(res.Turns))
	}
	for corr, n := range answered(f.model) {
		if n != 1 {
			t.Errorf("correlation %s drafted %d times; want once", corr, n)
		}
	}
	if n := len(f.model.Calls()); n != 60 {
		t.Errorf("%d model calls in all (%d before the stop); want 60", n, first)
	}
}

// TestAJournalLineCutShortIsDraftedAgain: a kill mid-write leaves half a
// line; the resume cuts it off and drafts that turn, and only that one.
func TestAJournalLineCutShortIsDraftedAgain(t *testing.T) {
	f := newFixture(t, 12)
	st := f.open(t)
	out := t.TempDir()
	p := plan(t, st, out, 0, 1)
	if _, err := f.run(t, st, out, nil, 0, 1).Execute(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, eval.JournalFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw[:len(raw)-9], 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := f.run(t, st, out, nil, 0, 1).Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || len(f.model.Calls()) != 13 {
		t.Fatalf("complete %v after %d calls; want complete after 13 (12 and the cut one again)", res.Complete, len(f.model.Calls()))
	}
	raw, _ = os.ReadFile(path)
	if lines := strings.Count(string(raw), "\n"); lines != 12 || !strings.HasSuffix(string(raw), "\n") {
		t.Errorf("the journal has %d whole lines; want 12", lines)
	}
}

// TestResultsDecodeAndTheReportEscapes: results.json reads back strictly,
// texts byte for byte; report.html shows a <script> body as text.
func TestResultsDecodeAndTheReportEscapes(t *testing.T) {
	f := newFixture(t, 12)
	st := f.open(t)
	out := t.TempDir()
	p := plan(t, st, out, 0, 1)
	res, err := f.run(t, st, out, nil, 0, 2).Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := eval.WriteFiles(out, res); err != nil {
		t.Fatal(err)
	}
	back, err := eval.ReadResults(filepath.Join(out, eval.ResultsFile))
	if err != nil {
		t.Fatalf("results.json does not decode: %v", err)
	}
	if len(back.Turns) != 12 || back.Summary.Compared != 12 {
		t.Fatalf("results.json holds %d turns, %d compared; want 12", len(back.Turns), back.Summary.Compared)
	}
	texts := map[string]bool{}
	for _, tn := range back.Turns {
		texts[tn.Current.Text], texts[tn.Customer] = true, true
	}
	for _, want := range []string{evaltest.Script, f.turns[5].Draft.Text} {
		if !texts[want] {
			t.Errorf("results.json lost the text %q", want)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, eval.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	if strings.Contains(page, "<script") || strings.Contains(page, "<b>soon") {
		t.Error("report.html carries a body's markup unescaped")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(&#34;eval&#34;)&lt;/script&gt; Thanks &amp; see you &lt;b&gt;soon&lt;/b&gt;") {
		t.Error("report.html does not show the <script> draft as escaped text")
	}
	var text strings.Builder
	if err := eval.WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mean distance to sent", "latency p95 ms", "guard hits", "shown (v1, m-current)", "candidate (cand, m-current)", "complete"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the printed report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestCandidateFactsHoldItsFigures: with the candidate's facts naming the
// price it states, neither its prompt nor its guard miss it.
func TestCandidateFactsHoldItsFigures(t *testing.T) {
	f := newFixture(t, 30)
	st := f.open(t)
	out := t.TempDir()
	c := *f.cfg
	c.Drafter.Facts = "Two fish & chips are €99.50."
	c.Clients = slices.Clone(f.cfg.Clients)
	c.Drafter.PromptVersion = "cand"
	p := plan(t, st, out, 0, 1)
	res, err := f.run(t, st, out, &c, 0, 2).Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for _, tn := range res.Turns {
		if tn.Candidate.Text == invented {
			long++
			if tn.Candidate.GuardHits != 0 {
				t.Errorf("turn %s: %d guard hits on a price the candidate's facts hold", tn.DraftID, tn.Candidate.GuardHits)
			}
		}
	}
	if long == 0 {
		t.Fatal("no turn had the long text; the test checks nothing")
	}
	if !f.model.Calls()[0].Req.Saw("Two fish & chips are €99.50.") {
		t.Error("the candidate's prompt does not carry its facts")
	}
}

// TestSampleIsDeterministic: the same ids and seed draw the same sample in
// the same order; another seed another.
func TestSampleIsDeterministic(t *testing.T) {
	var ids []string
	for i := range 500 {
		ids = append(ids, fmt.Sprintf("d%04d", i))
	}
	a, b := eval.Sample(ids, 50, 9), eval.Sample(slices.Clone(ids), 50, 9)
	if !slices.Equal(a, b) || len(a) != 50 {
		t.Fatalf("two samples with seed 9 differ (%d, %d)", len(a), len(b))
	}
	if slices.Equal(a, eval.Sample(ids, 50, 10)) {
		t.Error("seeds 9 and 10 drew the same sample")
	}
	if all := eval.Sample(ids, 0, 9); len(all) != 500 {
		t.Errorf("sample 0 drew %d; want all 500", len(all))
	}
}

// TestAServerFailureStopsTheRun: a 503 is the server's failure, not the
// turn's: the run stops with the error and what it finished, and the next
// run drafts the failed turn again. An answer that is no draft is the
// turn's own result, kept and left out of the summary.
func TestAServerFailureStopsTheRun(t *testing.T) {
	f := newFixture(t, 12)
	st := f.open(t)
	out := t.TempDir()
	p := plan(t, st, out, 0, 1)
	good := testkit.JSONReply(`{"reply":"Thanks, see you at 09:00.","intent":"sales","name":null,"email":null,"phone":null,"summary":"s","confidence":0.9}`)
	f.model.Answer(func(c testkit.ModelCall) testkit.Reply {
		switch c.N {
		case 3:
			return testkit.JSONReply("this is not a draft {")
		case 5:
			return testkit.ErrorReply(503, "overloaded", "server_error")
		}
		return good
	})
	res, err := f.run(t, st, out, nil, 0, 1).Execute(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Execute = %v; want the server's 503", err)
	}
	if res.Stopped != eval.StoppedError || len(res.Turns) != 4 || res.Summary.Failed != 1 || res.Summary.Compared != 3 {
		t.Fatalf("stopped %q with %d turns, %d failed, %d compared; want an error stop after 4 turns, 1 failed", res.Stopped, len(res.Turns), res.Summary.Failed, res.Summary.Compared)
	}
	if !strings.Contains(res.Turns[2].Error, "not valid") {
		t.Errorf("turn 3's error is %q; want the invalid answer", res.Turns[2].Error)
	}
	f.model.Answer(func(testkit.ModelCall) testkit.Reply { return good })
	res, err = f.run(t, st, out, nil, 0, 1).Execute(context.Background(), p)
	if err != nil || !res.Complete || len(res.Turns) != 12 || res.Summary.Failed != 1 {
		t.Fatalf("the second run: %v, complete %v, %d turns, %d failed; want all 12, the invalid one kept", err, res.Complete, len(res.Turns), res.Summary.Failed)
	}
	if n := len(f.model.Calls()); n != 13 {
		t.Errorf("%d calls; want 13 (12 and the 503 again)", n)
	}
}

// TestASignalStopsCleanly: the context ending (SIGINT, SIGTERM) cuts the
// calls in flight, keeps every finished turn, and the next run drafts the
// rest, the cut ones included, and none twice.
func TestASignalStopsCleanly(t *testing.T) {
	f := newFixture(t, 30)
	st := f.open(t)
	out := t.TempDir()
	p := plan(t, st, out, 0, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	good := testkit.JSONReply(`{"reply":"Thanks, see you at 09:00.","intent":"sales","name":null,"email":null,"phone":null,"summary":"s","confidence":0.9}`)
	f.model.Answer(func(c testkit.ModelCall) testkit.Reply {
		if c.N > 10 {
			cancel()
			return testkit.Reply{Hang: true}
		}
		return good
	})
	// One call at a time, so the stop comes with exactly 10 turns done
	// and no answer of the server left unread.
	res, err := f.run(t, st, out, nil, 0, 1).Execute(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != eval.StoppedSignal || len(res.Turns) != 10 {
		t.Fatalf("stopped %q with %d turns; want a signal stop after 10", res.Stopped, len(res.Turns))
	}
	f.model.Answer(func(testkit.ModelCall) testkit.Reply { return good })
	res, err = f.run(t, st, out, nil, 0, 3).Execute(context.Background(), p)
	if err != nil || !res.Complete {
		t.Fatalf("the second run: %v, complete %v", err, res.Complete)
	}
	for corr, n := range answered(f.model) {
		if n != 1 {
			t.Errorf("correlation %s answered %d times; want once", corr, n)
		}
	}
	if n := len(answered(f.model)); n != 30 {
		t.Errorf("%d turns answered; want 30", n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestARateLimitIsWaitedOut: a 429 is asked again after its wait (here
// bounded by RateWait), and the turn is drafted, once answered.
func TestARateLimitIsWaitedOut(t *testing.T) {
	f := newFixture(t, 3)
	st := f.open(t)
	out := t.TempDir()
	p := plan(t, st, out, 0, 1)
	f.model.Queue(testkit.RateLimited("30", "slow down"), testkit.RateLimited("30", "slow down"))
	r := f.run(t, st, out, nil, 0, 1)
	r.RateWait = 5 * time.Millisecond
	res, err := r.Execute(context.Background(), p)
	if err != nil || !res.Complete || res.Summary.Compared != 3 {
		t.Fatalf("Execute: %v, complete %v, %d compared; want the 3 turns drafted", err, res.Complete, res.Summary.Compared)
	}
	if n := len(f.model.Calls()); n != 5 {
		t.Errorf("%d calls; want 5 (two 429s asked again)", n)
	}
	// A third 429 in a row is the server's failure: the run stops.
	out = t.TempDir()
	p = plan(t, st, out, 0, 1)
	r.Out = out
	f.model.Queue(testkit.RateLimited("30", "slow down"), testkit.RateLimited("30", "slow down"), testkit.RateLimited("30", "slow down"))
	if _, err := r.Execute(context.Background(), p); err == nil || !strings.Contains(err.Error(), "rate limiting") {
		t.Errorf("three 429s: %v; want the run stopped by the rate limit", err)
	}
}
