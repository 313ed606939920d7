package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/eval"
	"github.com/handoff/handoff/eval/evaltest"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// evalConfig is the YAML of evaltest.Config: the same channels, clients,
// drafter and price, read by the command as a user's file would be.
func evalConfig(t *testing.T, modelURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "handoff.yaml")
	facts := filepath.Join(filepath.Dir(path), "facts.txt")
	if err := os.WriteFile(facts, []byte(evaltest.Config(modelURL).Drafter.Facts), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
clients:
  - {id: acme, name: Acme}
  - {id: other, name: Other}
channels:
  - name: web
    client: acme
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: sandbox
  - name: shop
    client: other
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: sandbox
drafter:
  kind: openai
  base_url: %s
  model: m-current
  prompt_version: v1
  facts_file: %s
  timeout: 10s
  price: {input: 1000, output: 1000, currency: USD}
routing: {version: r1, default_owner: sales}
`, modelURL, facts)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// evalData is a stopped server's data folder holding n approved turns.
func evalData(t *testing.T, modelURL string, n int) (string, []evaltest.Turn) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	turns := evaltest.Build(t, st, evaltest.Config(modelURL), n)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, turns
}

// candidateReply is a valid draft.
func candidateReply(c testkit.ModelCall) testkit.Reply {
	return testkit.JSONReply(`{"reply":"Thanks! Fish & chips are €12 and we open at 09:00.","intent":"sales","name":null,"email":null,"phone":null,"summary":"s","confidence":0.9}`)
}

func journalLines(path string) int {
	raw, _ := os.ReadFile(path)
	return bytes.Count(raw, []byte("\n"))
}

// TestEvalResumesAfterSIGKILL runs handoff eval as a child process,
// SIGKILLs it with 40 turns journalled and two calls in flight, and runs
// it again: every planned turn is answered by the model exactly once over
// both runs (the two cut calls are asked again, their first asking never
// answered), the results are complete, and the production database file
// is the same to the byte.
func TestEvalResumesAfterSIGKILL(t *testing.T) {
	m := testkit.NewModel(t)
	dataDir, _ := evalData(t, m.URL, 150)
	cfgPath := evalConfig(t, m.URL)
	before := sha256File(t, dbFile(dataDir))
	out := filepath.Join(t.TempDir(), "eval")
	const first = 40
	m.Answer(func(c testkit.ModelCall) testkit.Reply {
		if c.N > first {
			return testkit.Reply{Hang: true}
		}
		return candidateReply(c)
	})
	args := []string{"eval", "--config", cfgPath, "--data", dataDir, "--out", out, "--sample", "120", "--seed", "5", "--concurrency", "2"}
	list, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(list), childVarsEnv+"={}")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(out, eval.JournalFile)
	hung := func() int {
		n := 0
		for _, c := range m.Calls() {
			if c.Reply.Hang {
				n++
			}
		}
		return n
	}
	testkit.Eventually(t, time.Minute, func() bool { return journalLines(journal) == first && hung() == 2 }, "40 turns journalled and two calls in flight")
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(out, eval.ResultsFile)); err == nil {
		t.Fatalf("the killed run wrote results; its output:\n%s", stderr.String())
	}

	m.Answer(candidateReply)
	c := runCLI(t, "", nil, args...)
	c.wantOK(t)
	if !strings.Contains(c.stdout.String(), "complete: every planned turn drafted") || !strings.Contains(c.stderr.String(), "resuming the run") {
		t.Errorf("the resume printed %q (stderr %q); want it to resume and complete", c.stdout.String(), c.stderr.String())
	}
	plan, ok, err := eval.ReadPlan(out)
	if err != nil || !ok || len(plan.Turns) != 120 {
		t.Fatalf("the plan: %v, %v, %d turns", ok, err, len(plan.Turns))
	}
	st, err := store.OpenFile(dbFile(dataDir), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	corr := map[string]string{}
	for _, id := range plan.Turns {
		d, err := st.Draft(id)
		if err != nil {
			t.Fatal(err)
		}
		corr[d.CorrelationID] = id
	}
	st.Close()
	answered := map[string]int{}
	for _, call := range m.Calls() {
		if _, ok := corr[call.Correlation()]; !ok {
			t.Errorf("a call for correlation %s, no planned turn's", call.Correlation())
		}
		if !call.Reply.Hang {
			answered[call.Correlation()]++
		}
	}
	for cid, id := range corr {
		if answered[cid] != 1 {
			t.Errorf("turn %s was answered %d times over both runs; want once", id, answered[cid])
		}
	}
	if n := len(m.Calls()); n != 122 {
		t.Errorf("%d calls in all; want 122 (120 answered, 2 cut by the kill)", n)
	}
	res, err := eval.ReadResults(filepath.Join(out, eval.ResultsFile))
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if !res.Complete || len(res.Turns) != 120 || res.Summary.Compared != 120 {
		t.Errorf("results: complete %v, %d turns, %d compared; want 120", res.Complete, len(res.Turns), res.Summary.Compared)
	}
	if after := sha256File(t, dbFile(dataDir)); after != before {
		t.Error("the production database file changed")
	}
}

// TestEvalFromARunningServer: with the server running, the data folder is
// refused in a sentence naming --url, and --url evaluates a snapshot the
// server sends, creating no event, draft, job or outbox row in it.
func TestEvalFromARunningServer(t *testing.T) {
	const token = "T-eval-token-1234567890"
	m := testkit.NewModel(t)
	m.Answer(candidateReply)
	dataDir, _ := evalData(t, m.URL, 30)
	cfgPath := evalConfig(t, m.URL)
	cfg, err := config.Load(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dataDir
	a := startApp(t, cfg, token)
	count := func() [4]int {
		s, err := a.Store().Stats()
		if err != nil {
			t.Fatal(err)
		}
		o, err := outboxRows(a.Store())
		if err != nil {
			t.Fatal(err)
		}
		return [4]int{s.Events, s.Drafts, s.Jobs, o}
	}
	before := count()
	out := filepath.Join(t.TempDir(), "eval")

	runCLI(t, "", nil, "eval", "--config", cfgPath, "--data", dataDir, "--out", out).wantErr(t, "in use by a running server", "--url")

	c := runCLI(t, "", map[string]string{"HANDOFF_API_TOKEN": token}, "eval", "--config", cfgPath, "--url", appURL(a), "--out", out, "--sample", "0")
	c.wantOK(t)
	res, err := eval.ReadResults(filepath.Join(out, eval.ResultsFile))
	if err != nil || !res.Complete || len(res.Turns) != 30 || !strings.Contains(res.Source, "the server at") {
		t.Fatalf("results: %v, complete %v, %d turns, source %q", err, res.Complete, len(res.Turns), res.Source)
	}
	if len(m.Calls()) != 30 {
		t.Errorf("%d model calls; want 30", len(m.Calls()))
	}
	if after := count(); after != before {
		t.Errorf("events, drafts, jobs and outbox rows went from %v to %v", before, after)
	}
}

// TestEvalRefusals: each bad invocation is one sentence naming the
// problem, and nothing is written.
func TestEvalRefusals(t *testing.T) {
	m := testkit.NewModel(t)
	m.Answer(candidateReply)
	dataDir, _ := evalData(t, m.URL, 9)
	cfgPath := evalConfig(t, m.URL)
	out := filepath.Join(t.TempDir(), "eval")
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte{0xff, 0xfe, 'x'}, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"eval", "--config", cfgPath, "--data", dataDir}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"no out", base, []string{"--out DIR"}},
		{"template drafter", []string{"eval", "--data", dataDir, "--out", out}, []string{"drafter.kind is template"}},
		{"unknown client", append(base, "--out", out, "--client", "nobody"), []string{"--client", `"nobody"`}},
		{"channel of another client", append(base, "--out", out, "--client", "acme", "--channel", "shop"), []string{`--channel "shop"`, "client acme"}},
		{"bad since", append(base, "--out", out, "--since", "yesterday"), []string{"--since", "yesterday"}},
		{"until before since", append(base, "--out", out, "--since", "2026-11-02", "--until", "2026-11-01"), []string{"--until"}},
		{"bad budget", append(base, "--out", out, "--budget", "lots"), []string{"--budget", "lots"}},
		{"facts not UTF-8", append(base, "--out", out, "--facts", bad), []string{"--facts", "UTF-8"}},
		{"missing prompt", append(base, "--out", out, "--prompt", bad+".none"), []string{"--prompt", "no such file"}},
		{"two sources", append(base, "--out", out, "--db", dbFile(dataDir)), []string{"one of --data, --db and --url"}},
		{"nothing matches", append(base, "--out", out, "--since", "2030-01-01"), []string{"no approved turn matches"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, "", nil, c.args...)
			r.wantErr(t, c.want...)
			if strings.Contains(r.err.Error(), "\n") {
				t.Errorf("the error is more than one line: %q", r.err)
			}
			if _, err := os.Stat(filepath.Join(out, eval.PlanFile)); err == nil {
				t.Error("a refused run wrote a plan")
			}
		})
	}
	if len(m.Calls()) != 0 {
		t.Errorf("the refusals made %d model calls", len(m.Calls()))
	}

	// A resume asking for another run is refused, naming the flag.
	runCLI(t, "", nil, append(base, "--out", out, "--sample", "5", "--budget", "0")...).wantOK(t)
	runCLI(t, "", nil, append(base, "--out", out, "--sample", "6")...).wantErr(t, "other settings", "--sample 6, not 5")
	// A resume with the same settings drafts nothing again.
	runCLI(t, "", nil, append(base, "--out", out, "--sample", "5", "--concurrency", "1")...).wantOK(t)
	if len(m.Calls()) != 5 {
		t.Errorf("%d model calls after a run and a resume of 5 turns; want 5", len(m.Calls()))
	}

	// A backup file is evaluated as the data folder is, and left as it was.
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(backup, mustRead(t, dbFile(dataDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256File(t, backup)
	other := filepath.Join(t.TempDir(), "eval")
	r := runCLI(t, "", nil, "eval", "--config", cfgPath, "--db", backup, "--out", other, "--client", "acme", "--sample", "0")
	r.wantOK(t)
	res, err := eval.ReadResults(filepath.Join(other, eval.ResultsFile))
	if err != nil || !res.Complete || !strings.Contains(res.Source, backup) {
		t.Fatalf("results of --db: %v, complete %v, source %q", err, res.Complete, res.Source)
	}
	for _, tn := range res.Turns {
		if tn.Channel != "web" {
			t.Errorf("--client acme evaluated a turn of channel %s", tn.Channel)
		}
	}
	if len(res.Turns) == 0 || sha256File(t, backup) != sum {
		t.Errorf("--db evaluated %d turns; the file changed: %v", len(res.Turns), sha256File(t, backup) != sum)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// startApp runs the whole process on cfg with API token token.
func startApp(t *testing.T, cfg *config.Config, token string) *app.App {
	t.Helper()
	return apptest.Start(t, cfg, app.Deps{APIToken: token})
}

func appURL(a *app.App) string { return apptest.URL(a) }

// outboxRows counts the outbox rows in every status.
func outboxRows(st *store.Store) (int, error) {
	// One read: the server's deliveries move rows between statuses
	// meanwhile, and a read per status counted a moving row twice.
	n := 0
	err := st.View(func(tx *store.Tx) error {
		for _, s := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxNeedsReconciliation, store.OutboxFailed} {
			if err := tx.EachOutbox(s, func(store.Outbox) error { n++; return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
