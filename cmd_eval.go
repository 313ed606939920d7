package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/eval"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/workers"
)

// The most a candidate's files may hold: a facts file as config reads one
// (it goes into every prompt), a prompt file somewhat more.
const (
	maxEvalFacts  = 32 << 10
	maxEvalPrompt = 64 << 10
)

// evalCmd runs `handoff eval`: it re-drafts a sample of past approved
// turns with a candidate prompt, model or facts against the configured
// model server, and prints, beside the draft that was shown, each draft's
// edit distance to what the person sent, its guards' hits, cost and
// latency, and the summary. It never sends and never changes a lead: it
// works on a snapshot of the database copied into --out (read-only from
// a stopped server's folder or a backup file, or downloaded from a
// running server with --url), and keeps its resume state there too.
func evalCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("eval", e)
	cfgPath := fs.String("config", "", "configuration file (YAML): the model server, prompts, facts, price, clients")
	dataDir := fs.String("data", "", "a stopped server's data folder (default from the config)")
	dbFile := fs.String("db", "", "a database or backup file to evaluate instead")
	url := fs.String("url", "", "a running server's base URL: eval downloads a snapshot from it (with HANDOFF_API_TOKEN)")
	token := fs.String("token", "", "an admin API token for --url (better: HANDOFF_API_TOKEN)")
	out := fs.String("out", "", "the folder eval writes into: its snapshot, plan, journal, results.json and report.html (required)")
	client := fs.String("client", "", "only this client's turns")
	channel := fs.String("channel", "", "only this channel's turns")
	since := fs.String("since", "", "only turns drafted at or after this date or RFC 3339 time (UTC)")
	until := fs.String("until", "", "only turns drafted before this date or RFC 3339 time (UTC)")
	sample := fs.Int("sample", 100, "how many of the matching turns to draft again (0: all)")
	seed := fs.Uint64("seed", 1, "the sample's seed: the same seed draws the same sample")
	promptFile := fs.String("prompt", "", "the candidate's system prompt, from this file (replaces drafter.system_prompt and channel_prompts)")
	model := fs.String("model", "", "the candidate's model (default drafter.model)")
	factsFile := fs.String("facts", "", "the candidate's facts, from this file (replaces every client's facts)")
	label := fs.String("label", "candidate", "the candidate's prompt version in the output")
	budgetFlag := fs.String("budget", "", "the most the run may spend, all its resumes together, in drafter.price.currency (default: the daily budget that applies; 0: no cap)")
	concurrency := fs.Int("concurrency", 2, "drafting calls at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("eval takes flags only, not %q", fs.Arg(0))
	}
	if *out == "" {
		return errors.New("eval needs --out DIR, the folder it writes its results and resume state into")
	}
	if n := countSet(*dataDir != "", *dbFile != "", *url != ""); n > 1 {
		return errors.New("eval takes one of --data, --db and --url")
	}
	if *sample < 0 {
		return fmt.Errorf("--sample %d: give a number of turns, or 0 for all", *sample)
	}
	if *concurrency < 1 || *concurrency > 64 {
		return fmt.Errorf("--concurrency %d: give 1 to 64 calls at once", *concurrency)
	}
	if strings.TrimSpace(*label) == "" {
		return errors.New("--label must not be empty")
	}
	cfg, from, err := config.LoadSources(*cfgPath, e.getenv)
	if err != nil {
		return err
	}
	from.DataDir = config.Override(&cfg.DataDir, from.DataDir, *dataDir, e.getenv("HANDOFF_DATA"))
	if cfg.Drafter.Kind != "openai" {
		return fmt.Errorf("eval drafts with the configured model server, and drafter.kind is %s: give a --config whose drafter is openai (base_url, model)", cfg.Drafter.Kind)
	}

	s := eval.Settings{Client: *client, Channel: *channel, Sample: *sample, Seed: *seed}
	filter, err := evalFilter(cfg, &s, *since, *until)
	if err != nil {
		return err
	}
	cand, err := candidate(cfg, &s, *promptFile, *model, *factsFile, *label)
	if err != nil {
		return err
	}
	limit, why, err := evalBudget(cfg, *budgetFlag, s)
	if err != nil {
		return err
	}

	if err := os.MkdirAll(*out, 0o700); err != nil {
		return fmt.Errorf("eval: create --out %s: %w", *out, err)
	}
	snap := filepath.Join(*out, eval.SnapshotFile)
	plan, resuming, err := eval.ReadPlan(*out)
	if err != nil {
		return err
	}
	if resuming {
		if d := s.Differs(plan.Settings); d != "" {
			return fmt.Errorf("%s holds a run with other settings (%s): give the same flags to resume it, or another --out folder", *out, d)
		}
		if _, err := os.Stat(snap); err != nil {
			return fmt.Errorf("%s holds a run's plan but not its snapshot (%s): give another --out folder", *out, eval.SnapshotFile)
		}
	} else {
		source, err := takeSnapshot(ctx, e, snap, cfg.DataDir, *dbFile, *url, *token)
		if err != nil {
			return err
		}
		plan, err = newPlan(snap, filter, s, source)
		if err != nil {
			os.Remove(snap)
			return err
		}
	}
	st, err := store.OpenFile(snap, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()

	d, err := drafter.NewOpenAI(drafter.OpenAIConfig{
		BaseURL: cand.Drafter.BaseURL, APIKey: cand.Drafter.APIKey, Model: cand.Drafter.Model,
		PromptVersion: cand.Drafter.PromptVersion, SystemPrompt: cand.Drafter.SystemPrompt,
		ChannelPrompts: cand.Drafter.ChannelPrompts, Structured: cand.Drafter.Structured,
		Timeout: cand.Drafter.Timeout,
		Price:   drafter.Price{Input: cand.Drafter.Price.Input, Output: cand.Drafter.Price.Output, Currency: cand.Drafter.Price.Currency},
	})
	if err != nil {
		return err
	}
	run := &eval.Run{
		Store: st,
		// The draft job's own input, read from the snapshot: Router and
		// context budget as configured, nothing that writes.
		// The facts are each turn's own version (workers.DraftJob.PastInput).
		Inputs:       &workers.DraftJob{Store: st, Router: workers.NewRouter(cfg.Routing), ContextTokens: cfg.Drafter.ContextTokens, Client: cfg.ClientOf},
		Drafter:      d,
		Guard:        review.New(st, cand).Guard,
		CurrentGuard: review.New(st, cfg).Guard,
		Out:          *out, Budget: limit, Currency: cfg.Drafter.Price.Currency,
		Concurrency: *concurrency,
	}
	if s.Candidate.FactsFile != "" {
		// --facts: one text for every client, its entries numbered afresh.
		entries, _ := facts.Entries(cand.Drafter.Facts, nil, 1)
		run.Facts, run.FactsText = workers.DrafterFacts(0, entries), cand.Drafter.Facts
	}
	step := max(1, len(plan.Turns)/10)
	run.Progress = func(done, planned int) {
		if done%step == 0 || done == planned {
			fmt.Fprintf(e.stderr, "eval: %d of %d turns drafted\n", done, planned)
		}
	}
	if resuming {
		fmt.Fprintf(e.stderr, "eval: resuming the run of %s over %s\n", plan.Created.Format(time.RFC3339), plan.Source)
	}
	fmt.Fprintf(e.stderr, "eval: %d of %d matching approved turns planned; budget %s\n", len(plan.Turns), plan.Eligible, why)
	res, err := run.Execute(ctx, plan)
	if res.V == 0 { // the journal could not be opened: nothing to write
		return err
	}
	if werr := eval.WriteFiles(*out, res); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("eval stopped with %d of %d turns drafted, kept in %s (run the same command to go on): %w", len(res.Turns), res.Planned, *out, err)
	}
	if err := eval.WriteText(e.stdout, res); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s\n", filepath.Join(*out, eval.ResultsFile), filepath.Join(*out, eval.ReportFile))
	if res.Stopped == eval.StoppedSignal {
		return errors.New(eval.Status(res))
	}
	return nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// evalFilter checks --client, --channel, --since and --until against the
// config and turns them into the selection, noting them in s.
func evalFilter(cfg *config.Config, s *eval.Settings, since, until string) (eval.Filter, error) {
	var f eval.Filter
	if s.Client != "" {
		if err := cfg.CheckClients([]string{s.Client}); err != nil {
			return f, fmt.Errorf("--client: %w", err)
		}
		f.Channels = map[string]bool{}
		for _, ch := range cfg.ClientChannels(s.Client) {
			f.Channels[ch] = true
		}
	}
	if s.Channel != "" {
		if _, ok := cfg.Channel(s.Channel); !ok {
			return f, fmt.Errorf("--channel %q is not a channel of the config", s.Channel)
		}
		if s.Client != "" && !f.Channels[s.Channel] {
			return f, fmt.Errorf("--channel %q is not a channel of client %s", s.Channel, s.Client)
		}
		f.Channels = map[string]bool{s.Channel: true}
	}
	if f.Channels != nil {
		for ch := range f.Channels {
			s.Channels = append(s.Channels, ch)
		}
		slices.Sort(s.Channels)
	}
	for _, b := range []struct {
		flag, v string
		dst     *time.Time
		set     **time.Time
	}{{"--since", since, &f.Since, &s.Since}, {"--until", until, &f.Until, &s.Until}} {
		if b.v == "" {
			continue
		}
		t, err := eval.ParseTime(b.flag, b.v)
		if err != nil {
			return f, err
		}
		*b.dst, *b.set = t, &t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return f, fmt.Errorf("--until %s is not after --since %s", until, since)
	}
	return f, nil
}

// candidate is cfg with the candidate's model, prompt and facts, noting
// them in s.
func candidate(cfg *config.Config, s *eval.Settings, promptFile, model, factsFile, label string) (*config.Config, error) {
	c := *cfg
	s.Current = eval.Version{Model: cfg.Drafter.Model, PromptVersion: cfg.Drafter.PromptVersion}
	if model != "" {
		c.Drafter.Model = model
	}
	c.Drafter.PromptVersion = label
	s.Candidate = eval.Version{Model: c.Drafter.Model, PromptVersion: label}
	if promptFile != "" {
		p, err := readText("--prompt", promptFile, maxEvalPrompt)
		if err != nil {
			return nil, err
		}
		c.Drafter.SystemPrompt, c.Drafter.ChannelPrompts = p, nil
		s.Candidate.PromptFile, s.Candidate.PromptHash = promptFile, sha256Hex(p)
	}
	if factsFile != "" {
		f, err := readText("--facts", factsFile, maxEvalFacts)
		if err != nil {
			return nil, err
		}
		c.Drafter.Facts = f
		c.Clients = slices.Clone(cfg.Clients)
		for i := range c.Clients {
			c.Clients[i].Facts = f
		}
		s.Candidate.FactsFile, s.Candidate.FactsHash = factsFile, sha256Hex(f)
	}
	return &c, nil
}

// readText reads a candidate's file: UTF-8 text of at most max bytes, not empty.
func readText(flag, path string, max int) (string, error) {
	raw, err := os.ReadFile(path)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is named once, below
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: cannot read %s: %v", flag, path, err)
	case len(raw) > max:
		return "", fmt.Errorf("%s: %s is %d bytes; at most %d go into a prompt", flag, path, len(raw), max)
	case !utf8.Valid(raw):
		return "", fmt.Errorf("%s: %s is not UTF-8 text", flag, path)
	case strings.TrimSpace(string(raw)) == "":
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	}
	return strings.TrimSpace(string(raw)), nil
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// evalBudget is the run's cost cap and where it comes from: --budget, else
// the daily budget of the client evaluated (clients[].daily_budget, else
// drafter.daily_budget), which eval spends at most once a run.
func evalBudget(cfg *config.Config, flag string, s eval.Settings) (float64, string, error) {
	cur := cfg.Drafter.Price.Currency
	if flag != "" {
		v, err := strconv.ParseFloat(strings.TrimSpace(flag), 64)
		if err != nil || v < 0 || v != v || v > 1e12 {
			return 0, "", fmt.Errorf("--budget %q is not an amount (a number, 0 for no cap)", flag)
		}
		if v == 0 {
			return 0, "none (--budget 0)", nil
		}
		return v, fmt.Sprintf("%.4f %s (--budget)", v, cur), nil
	}
	client := s.Client
	if client == "" && s.Channel != "" {
		client = cfg.ClientOf(s.Channel)
	}
	if v := cfg.BudgetOf(client); v > 0 {
		where := "drafter.daily_budget"
		if cl, ok := cfg.Client(client); ok && cl.DailyBudget > 0 {
			where = "clients[" + client + "].daily_budget"
		}
		return v, fmt.Sprintf("%.4f %s (%s; --budget sets another)", v, cur, where), nil
	}
	return 0, "none (no --budget and no daily budget configured)", nil
}

// takeSnapshot copies the database into dst, eval's own copy: downloaded
// from a running server (url), or copied read-only from a backup file
// (db) or a stopped server's data folder, verified first, so that a
// damaged file is refused in a sentence and a live one is held only for
// the copy. It returns where the copy came from.
func takeSnapshot(ctx context.Context, e env, dst, dataDir, db, url, token string) (string, error) {
	if url != "" {
		// backup's own download: verified, fsynced, renamed into place.
		quiet := e
		quiet.stdout = e.stderr
		args := []string{"--url", url, "-o", dst}
		if token != "" {
			args = append(args, "--token", token)
		}
		if err := backupCmd(ctx, args, quiet); err != nil {
			return "", fmt.Errorf("eval: snapshot from %s: %w", url, err)
		}
		return migrateSnapshot(dst, "the server at "+url)
	}
	src, what := filepath.Join(dataDir, store.FileName), "the data folder "+dataDir
	if db != "" {
		src, what = db, "the file "+db
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("there is no database at %s: give --data DIR (a stopped server's data folder), --db FILE (a backup) or --url URL (a running server)", src)
	}
	verr := store.VerifyFile(src)
	if store.InUse(verr) {
		return "", fmt.Errorf("%s is in use by a running server: give --url URL (with HANDOFF_API_TOKEN) to evaluate a snapshot of it", src)
	}
	if ok, _ := store.BackupVerdict(verr); !ok {
		return "", verr
	}
	st, err := store.OpenFile(src, store.Options{ReadOnly: true})
	if store.InUse(err) {
		return "", fmt.Errorf("%s is in use by a running server: give --url URL (with HANDOFF_API_TOKEN) to evaluate a snapshot of it", src)
	}
	if err != nil {
		return "", err
	}
	err = store.WriteFileAtomic(dst, func(w io.Writer) error { _, err := st.Backup(w); return err }, nil)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("eval: copy %s: %w", src, err)
	}
	return migrateSnapshot(dst, what)
}

// migrateSnapshot brings eval's copy at path to this binary's schema (a
// backup of an older version): the copy is eval's own, so the migrations
// run on it, never on the file it came from.
func migrateSnapshot(path, what string) (string, error) {
	v, err := store.FileSchema(path)
	if err != nil {
		return "", err
	}
	if v < store.SchemaVersion {
		st, err := store.OpenFile(path, store.Options{})
		if err != nil {
			return "", err
		}
		if err := st.Close(); err != nil {
			return "", err
		}
	}
	return what, nil
}

// newPlan selects and samples the turns of the snapshot at path and
// writes the plan beside it.
func newPlan(path string, f eval.Filter, s eval.Settings, source string) (eval.Plan, error) {
	st, err := store.OpenFile(path, store.Options{ReadOnly: true})
	if err != nil {
		return eval.Plan{}, err
	}
	defer st.Close()
	plan, err := eval.NewPlan(st, f, s, source, time.Now())
	if err != nil {
		return eval.Plan{}, err
	}
	if len(plan.Turns) == 0 {
		return eval.Plan{}, errors.New("no approved turn matches the selection (--client, --channel, --since, --until): nothing to evaluate")
	}
	return plan, eval.WritePlan(filepath.Dir(path), plan)
}
