// Package drill rehearses the failures handoff exists to survive before
// they happen for real: it starts a fresh temporary instance of the binary
// with a fake model, then runs duplicate, timeout, crash and replay fixtures
// against it and says, for each, what was expected and what happened. Two
// of them send through an outside HTTP provider that the drill serves
// itself: one that drops a reused keep-alive connection after accepting,
// and one slower than the instance's timeout.
//
// The instance is a real child process (SIGKILL is the only honest crash),
// every wait is a poll with a deadline, and only 127.0.0.1 is contacted.
package drill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// maxAttempts is the instance's retry.max_attempts: a job is on the
// dead-letter list after this many failed attempts.
const maxAttempts = 3

// Options configures Run.
type Options struct {
	Binary string    // the handoff binary to start as the instance
	Keep   bool      // keep the temporary folder and the instance's log
	Break  string    // sabotage one fixture's instance, to prove the drill can fail (see Breaks)
	Only   []string  // run only these fixtures (and those they build on); empty runs all (see Fixtures)
	Out    io.Writer // progress and the result table; nil discards
}

// Breaks lists the sabotages Options.Break accepts, each a change to the
// instance, never to what the fixture expects.
var Breaks = map[string]string{
	"idempotency": "fixture idempotency's provider does not honour idempotency keys",
	"lookup":      "fixture kill-mid-delivery's provider cannot look a message up",
	"settle":      "fixture late-lookup's provider gets lookup_settle: 1ms, so a lookup's early \"not found\" counts as not sent",
	"dedupe":      "fixture drop-reused's provider is declared to deduplicate by Idempotency-Key, which it does not",
}

// Fixtures lists the fixture names in the order they run.
func Fixtures() []string {
	var names []string
	for _, f := range fixtures {
		names = append(names, f.name)
	}
	return names
}

// fixture is one rehearsed failure.
type fixture struct {
	name     string                                               // for Options.Only
	label    string                                               // for the table
	expected string                                               // what the contract says must happen
	needs    []string                                             // fixtures whose leftovers this one uses
	run      func(d *drill, ctx context.Context, r *result) error // a method expression, (*drill).name
}

// result is what one fixture saw.
type result struct {
	label, expected string
	happened        string
	model           string // calls to the model
	messages        string // messages at the provider
	states          string // final states of jobs, outbox rows and leads
	failures        []string
	took            time.Duration
}

// check records a failure unless ok.
func (r *result) check(ok bool, format string, args ...any) {
	if !ok {
		r.failures = append(r.failures, fmt.Sprintf(format, args...))
	}
}

func (r *result) pass() bool { return len(r.failures) == 0 }

// drill is one run of the fixtures.
type drill struct {
	opt    Options
	out    io.Writer
	model  *model
	remote *remote // the outside HTTP provider
	inst   *instance
	// nokeyRow is the outbox row fixture no-key left needing
	// reconciliation; replay-reply replays it.
	nokeyRow string
}

// Run starts a fresh temporary instance of opt.Binary, runs the fixtures
// against it, prints a table of what was expected and what happened, and
// stops and removes everything (unless opt.Keep). ok is true when every
// fixture passed; err is a drill that could not run at all.
func Run(ctx context.Context, opt Options) (ok bool, err error) {
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	if opt.Binary == "" {
		return false, errors.New("drill: no binary to start")
	}
	if _, known := Breaks[opt.Break]; opt.Break != "" && !known {
		return false, fmt.Errorf("drill: %q is not a sabotage this drill knows", opt.Break)
	}
	selected, err := selectFixtures(opt.Only)
	if err != nil {
		return false, err
	}

	dir, err := os.MkdirTemp("", "handoff-drill-")
	if err != nil {
		return false, fmt.Errorf("drill: %w", err)
	}
	logPath := filepath.Join(dir, "handoff.log")
	defer func() {
		if opt.Keep {
			fmt.Fprintf(out, "kept %s (instance log: %s)\n", dir, logPath)
		} else {
			os.RemoveAll(dir)
		}
	}()
	logFile, err := os.Create(logPath)
	if err != nil {
		return false, fmt.Errorf("drill: %w", err)
	}
	defer logFile.Close()

	m := newModel()
	defer m.close()
	rm, err := newRemote()
	if err != nil {
		return false, err
	}
	defer rm.close()
	cfg := configYAML(m.baseURL(), drillChannels, providers(opt.Break), remotes(rm, opt.Break))
	d := &drill{opt: opt, out: out, model: m, remote: rm,
		inst: newInstance(opt.Binary, dir, cfg, randomHex(24), randomHex(16), logFile)}
	// The instance is stopped whatever happens, before its folder goes.
	defer func() {
		if d.inst.cur() != nil {
			how := "exit status 0"
			if err := d.inst.stop(); err != nil {
				how = err.Error()
			}
			fmt.Fprintf(out, "instance stopped (%s)\n", how)
		}
	}()

	if opt.Break != "" {
		fmt.Fprintf(out, "drill: sabotaged on purpose: %s\n", Breaks[opt.Break])
	}
	fmt.Fprintf(out, "drill: temporary instance of %s in %s\n", opt.Binary, dir)
	if err := d.inst.start(ctx); err != nil {
		return false, fmt.Errorf("drill: the instance did not start: %w (its log: %s; rerun with --keep to keep it)", err, logPath)
	}

	var results []*result
	for _, f := range selected {
		if ctx.Err() != nil {
			break
		}
		r := &result{label: f.label, expected: f.expected}
		start := time.Now()
		if !d.inst.running() {
			// An earlier fixture left the instance down; this one needs it.
			if err := d.inst.start(ctx); err != nil {
				r.check(false, "the instance did not start: %v", err)
			}
		}
		if r.pass() {
			if err := f.run(d, ctx, r); err != nil {
				r.check(false, "%v", err)
			}
		}
		r.took = time.Since(start)
		verdict := "PASS"
		if !r.pass() {
			verdict = "FAIL"
		}
		fmt.Fprintf(out, "drill: %s: %s (%.1fs)\n", f.label, verdict, r.took.Seconds())
		results = append(results, r)
	}
	printTable(out, results)
	ok = len(results) == len(selected)
	for _, r := range results {
		ok = ok && r.pass()
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("drill: interrupted: %w", ctx.Err())
	}
	if !ok && !opt.Keep {
		fmt.Fprintln(out, "rerun with --keep to keep the instance's data and log")
	}
	return ok, nil
}

// selectFixtures is the fixtures named in only, with those they build on,
// in run order.
func selectFixtures(only []string) ([]fixture, error) {
	if len(only) == 0 {
		return fixtures, nil
	}
	want := map[string]bool{}
	var add func(name string) error
	add = func(name string) error {
		i := slices.IndexFunc(fixtures, func(f fixture) bool { return f.name == name })
		if i < 0 {
			return fmt.Errorf("drill: there is no fixture %q (there are %s)", name, strings.Join(Fixtures(), ", "))
		}
		want[name] = true
		for _, n := range fixtures[i].needs {
			if err := add(n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range only {
		if err := add(name); err != nil {
			return nil, err
		}
	}
	var out []fixture
	for _, f := range fixtures {
		if want[f.name] {
			out = append(out, f)
		}
	}
	return out, nil
}

// printTable prints one row per fixture, then why each failure failed.
func printTable(w io.Writer, results []*result) {
	rows := [][]string{{"fixture", "expected", "happened", "model calls", "provider messages", "final states", "result"}}
	for _, r := range results {
		verdict := "PASS"
		if !r.pass() {
			verdict = "FAIL"
		}
		rows = append(rows, []string{r.label, r.expected, r.happened, r.model, r.messages, r.states, verdict})
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	line := func(row []string) {
		var b strings.Builder
		for i, cell := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell)))
			}
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w)
	line(rows[0])
	sep := make([]string, len(width))
	for i, n := range width {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
	passed := 0
	for _, r := range results {
		if r.pass() {
			passed++
			continue
		}
		fmt.Fprintf(w, "\n%s failed:\n", r.label)
		for _, f := range r.failures {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	}
	fmt.Fprintf(w, "\n%d of %d fixtures passed\n", passed, len(results))
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
