package web

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
	"github.com/handoff/handoff/views"
)

// fakeModel is the fake model (testkit.Model) scripted to fail (500)
// while told to and to answer a valid draft otherwise.
type fakeModel struct{ *testkit.Model }

func newFakeModel(t *testing.T, failNext int) fakeModel {
	t.Helper()
	f := fakeModel{testkit.NewModel(t)}
	f.set(failNext)
	return f
}

// set makes the next n calls fail (-1: all of them, 0: none).
func (f fakeModel) set(failNext int) {
	f.Answer(func(c testkit.ModelCall) testkit.Reply { // one call at a time
		if failNext != 0 {
			if failNext > 0 {
				failNext--
			}
			return testkit.ErrorReply(http.StatusInternalServerError, "fake model is down", "server_error")
		}
		return testkit.JSONReply(fmt.Sprintf(`{"reply":"Model reply #%d","intent":"support","name":"Ada","email":"","phone":"","summary":"asks about shipping","confidence":0.9}`, c.N))
	})
}

// counts returns every call and the successful ones.
func (f fakeModel) counts() (calls, ok int) {
	all := f.Calls()
	for _, c := range all {
		if c.Reply.Status == 0 {
			ok++
		}
	}
	return len(all), ok
}

// newFakeProvider is an http provider's receiver (testkit/standin): it
// refuses every message with 400 while told to (set), and otherwise keeps
// each reference once.
func newFakeProvider(t *testing.T, refuse bool) *fakeProvider {
	t.Helper()
	f := &fakeProvider{standin.New(t, "http")}
	f.Dedupe = true
	f.set(refuse)
	return f
}

// fakeProvider is the stand-in, told to refuse or not.
type fakeProvider struct{ *standin.Server }

func (f *fakeProvider) set(refuse bool) {
	if refuse {
		f.SetScript(standin.Refuse)
	} else {
		f.SetScript(standin.OK)
	}
}

// seen is the Idempotency-Key of every request, and the messages the
// provider holds (client_ref -> its id).
func (f *fakeProvider) seen() (keys []string, accepted map[string]string) {
	for _, p := range f.Sends() {
		keys = append(keys, p.Key)
	}
	accepted = map[string]string{}
	for _, m := range f.Accepted() {
		accepted[m.Ref] = m.ID
	}
	return keys, accepted
}

// dlConfig drafts with model and delivers on four channels: "auto" to the
// sandbox, "crm" to an http provider at prov, "stall" to a sandbox that
// accepts and then times out and can look nothing up (all three approved
// automatically), and "manual" (approved by a person) to the same stalling
// sandbox. Jobs get two attempts.
func dlConfig(model fakeModel, prov *fakeProvider) *config.Config {
	cfg := config.Default()
	cfg.Drafter = config.Drafter{Kind: "openai", BaseURL: model.URL, Model: "m", PromptVersion: "p1", Timeout: 5 * time.Second}
	cfg.Retry.MaxAttempts = 2
	cfg.Providers = []config.Provider{
		{Name: "stall", Kind: "sandbox", TimeoutAfterAccept: true, NoLookup: true, Timeout: 5 * time.Second},
	}
	if prov != nil {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "crm", Kind: "http", URL: prov.SendURL(), Timeout: 5 * time.Second})
	}
	base := cfg.Channels[0]
	cfg.Channels = nil
	for _, ch := range []struct {
		name, provider string
		auto           bool
	}{{"auto", "sandbox", true}, {"crm", "crm", true}, {"stall", "stall", true}, {"manual", "stall", false}} {
		if ch.provider == "crm" && prov == nil {
			continue
		}
		c := base
		c.Name, c.Provider, c.AutoApprove = ch.name, ch.provider, ch.auto
		cfg.Channels = append(cfg.Channels, c)
	}
	return cfg
}

// deadLetterPath is the API path of an action on item id.
func deadLetterPath(id, action string) string {
	return "/api/v1/dead-letters/" + strings.NewReplacer("+", "%2B", ":", "%3A").Replace(url.PathEscape(id)) + "/" + action
}

// deadLetters lists the dead letters through the API.
func deadLetters(t *testing.T, e *testEnv, query string) []map[string]any {
	t.Helper()
	ans := apiGet(t, e, "/api/v1/dead-letters?"+query)
	var out []map[string]any
	items, _ := ans["dead_letters"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any))
	}
	return out
}

// waitDeadLetter waits until the item of eventKey in state is on the list
// and every job of the event has ended. (A reply is parked before its
// delivery job finishes; a replay in between is lost until the minutely
// sweep: see TestReplayWhileDeliveryJobFinishes in store.)
func waitDeadLetter(t *testing.T, e *testEnv, eventKey, state string) map[string]any {
	t.Helper()
	var got map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		got = nil
		for _, it := range deadLetters(t, e, "") {
			if it["event_key"] == eventKey && it["state"] == state {
				got = it
			}
		}
		return got != nil && settled(t, e, eventKey)
	}, eventKey+" to be a dead letter in "+state)
	return got
}

// settled reports whether every job of an event has ended.
func settled(t *testing.T, e *testEnv, eventKey string) bool {
	t.Helper()
	for _, j := range list(apiGet(t, e, timelinePath(eventKey))["jobs"]) {
		switch j.(map[string]any)["state"] {
		case "completed", "discarded", "cancelled":
		default:
			return false
		}
	}
	return true
}

// rowOf returns the outbox row of an event's reply through the API.
func rowOf(t *testing.T, e *testEnv, eventKey string) map[string]any {
	t.Helper()
	tl := apiGet(t, e, timelinePath(eventKey))
	o, _ := tl["outbox"].(map[string]any)
	return o
}

// waitRow waits until the reply of eventKey is in status.
func waitRow(t *testing.T, e *testEnv, eventKey, status string) map[string]any {
	t.Helper()
	var o map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		o = rowOf(t, e, eventKey)
		return o != nil && o["status"] == status
	}, "the reply of "+eventKey+" to be "+status)
	return o
}

func errorOf(ans map[string]any) string { s, _ := ans["error"].(string); return s }

// jobOf returns an event's job of kind from its timeline.
func jobOf(tl map[string]any, kind string) map[string]any {
	jobs, _ := tl["jobs"].([]any)
	for _, j := range jobs {
		if jm := j.(map[string]any); jm["kind"] == kind {
			return jm
		}
	}
	return nil
}

func list(v any) []any { l, _ := v.([]any); return l }

// TestReplayAfterModelFailure: a model that always fails discards the draft
// job; once the model works, a replay drafts once and the reply goes out once.
func TestReplayAfterModelFailure(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t, -1)
	e, _ := newEnv(t, dlConfig(model, nil), envOptions{})
	sendLead(t, e, "auto", "m-1", leadContact)
	key := "auto:m-1"
	dl := waitDeadLetter(t, e, key, "discarded")
	job, _ := dl["job"].(map[string]any)
	attempts := list(job["attempts"])
	if dl["kind"] != "job" || dl["safe"] != true || !strings.Contains(dl["why"].(string), "no draft was stored") || len(attempts) != 2 {
		t.Fatalf("dead letter %v, want a safe discarded job after 2 attempts", dl)
	}
	if !strings.Contains(dl["error"].(string), "500") {
		t.Errorf("error %q, want the model's 500", dl["error"])
	}
	calls, ok := model.counts()
	if calls != 2 || ok != 0 {
		t.Fatalf("model calls %d (ok %d), want 2 failed", calls, ok)
	}

	model.set(0)
	code, ans := apiPost(t, e, deadLetterPath(dl["id"].(string), "replay"), "")
	if code != http.StatusOK || ans["status"] != "replayed" {
		t.Fatalf("replay: %d %v", code, ans)
	}
	row := waitRow(t, e, key, "sent")
	if calls, ok := model.counts(); calls != 3 || ok != 1 {
		t.Errorf("model calls %d (ok %d), want exactly one more, successful", calls, ok)
	}
	msgs := sandboxFor(t, e, row["id"].(string))
	if len(msgs) != 1 || msgs[0]["repeats"] != float64(0) {
		t.Errorf("sandbox messages %v, want exactly one", msgs)
	}
	tl := apiGet(t, e, timelinePath(key))
	dj := jobOf(tl, "draft")
	as := list(dj["attempts"])
	replays := list(dj["replays"])
	if dj["id"] != dl["id"] || dj["state"] != "completed" || len(as) != 3 || len(replays) != 1 || replays[0].(map[string]any)["by"] != "api-token" {
		t.Fatalf("draft job after replay: %v", dj)
	}
	execs := map[any]bool{}
	for _, a := range as {
		execs[a.(map[string]any)["execution_id"]] = true
	}
	if len(execs) != 3 || as[2].(map[string]any)["outcome"] != "completed" {
		t.Errorf("attempts %v, want three execution ids, the last completed", as)
	}
	if d, _ := tl["draft"].(map[string]any); d["execution_id"] != as[2].(map[string]any)["execution_id"] || d["text"] != "Model reply #3" {
		t.Errorf("draft %v, want the replay's", d)
	}
	if rest := deadLetters(t, e, ""); len(rest) != 0 {
		t.Errorf("dead letters left: %v", rest)
	}
}

// TestReplayRefusedReply: a provider that answers 400 fails the reply; once
// it is fixed, a replay sends it with the same key, once.
func TestReplayRefusedReply(t *testing.T) {
	t.Parallel()
	prov := newFakeProvider(t, true)
	e, _ := newEnv(t, dlConfig(newFakeModel(t, 0), prov), envOptions{})
	sendLead(t, e, "crm", "c-1", leadContact)
	key := "crm:c-1"
	dl := waitDeadLetter(t, e, key, "failed")
	id := dl["id"].(string)
	if dl["kind"] != "outbox" || dl["safe"] != true || !strings.Contains(dl["error"].(string), "400") {
		t.Fatalf("dead letter %v, want a safe failed reply naming the 400", dl)
	}
	prov.set(false)
	if code, ans := apiPost(t, e, deadLetterPath(id, "replay"), `{}`); code != http.StatusOK {
		t.Fatalf("replay: %d %v", code, ans)
	}
	row := waitRow(t, e, key, "sent")
	keys, accepted := prov.seen()
	if len(keys) != 2 || keys[0] != id || keys[1] != id {
		t.Errorf("Idempotency-Key of each request %v, want %s twice", keys, id)
	}
	if len(accepted) != 1 || accepted[id] == "" || row["provider_id"] != accepted[id] {
		t.Errorf("provider holds %v, row says %v; want exactly one message, under %s", accepted, row["provider_id"], id)
	}
	if row["id"] != id || len(list(row["replays"])) != 1 {
		t.Errorf("row %v, want the same id with one replay", row)
	}
}

// TestReplayUnknownOutcome: a provider that timed out and cannot be asked
// leaves the reply needing reconciliation; a replay is refused until a
// person confirms, and then the provider gets the same reference again and
// refuses it visibly.
func TestReplayUnknownOutcome(t *testing.T) {
	t.Parallel()
	e, _ := newEnv(t, dlConfig(newFakeModel(t, 0), nil), envOptions{})
	sendLead(t, e, "stall", "s-1", leadContact)
	key := "stall:s-1"
	dl := waitDeadLetter(t, e, key, "needs_reconciliation")
	id := dl["id"].(string)
	if dl["safe"] != false || len(list(dl["effects"])) < 2 {
		t.Fatalf("dead letter %v, want unsafe with its effects", dl)
	}
	path := deadLetterPath(id, "replay")
	code, ans := apiPost(t, e, path, "")
	if code != http.StatusConflict || !strings.Contains(errorOf(ans), "may already have this message") || !strings.Contains(errorOf(ans), `"confirm"`) {
		t.Fatalf("unconfirmed replay: %d %v, want 409 naming the reason", code, ans)
	}
	if code, ans := apiPost(t, e, path, `{"confirm":"somebody else"}`); code != http.StatusBadRequest {
		t.Errorf("confirm with another id: %d %v, want 400", code, ans)
	}
	if code, ans := apiPost(t, e, path, `{"regenerate":true}`); code != http.StatusBadRequest || !strings.Contains(errorOf(ans), "only a draft job") {
		t.Errorf("regenerating a reply: %d %v, want 400", code, ans)
	}
	if msgs := sandboxFor(t, e, id); len(msgs) != 1 || msgs[0]["repeats"] != float64(0) {
		t.Fatalf("after refused replays, sandbox %v; want the one message, no repeat", msgs)
	}
	if row := rowOf(t, e, key); row["status"] != "needs_reconciliation" || len(list(row["attempts"])) != 1 {
		t.Fatalf("refused replays changed the row: %v", row)
	}

	code, ans = apiPost(t, e, path, fmt.Sprintf(`{"confirm":%q}`, id))
	if code != http.StatusOK {
		t.Fatalf("confirmed replay: %d %v", code, ans)
	}
	// The sandbox refuses the second copy with a 409, which is ambiguous
	// by the spec: the reply needs a person again, and says why.
	var row map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		row = rowOf(t, e, key)
		return len(list(row["attempts"])) == 2 && row["status"] == "needs_reconciliation" && settled(t, e, key)
	}, "the replayed reply to be parked again")
	msgs := sandboxFor(t, e, id)
	if len(msgs) != 1 || msgs[0]["repeats"] != float64(1) {
		t.Errorf("sandbox %v, want one message for %s and its refused repeat", msgs, id)
	}
	if row["id"] != id || !strings.Contains(row["note"].(string), "refusing a second copy") {
		t.Errorf("row %v, want the same reference sent twice, the second refused visibly", row)
	}
	if r := list(row["replays"]); len(r) != 1 || r[0].(map[string]any)["confirmed"] != true {
		t.Errorf("replays %v, want one confirmed", r)
	}
}

// TestReplayRegenerate: a draft job discarded by the model, replayed to be
// drafted afresh, stores a draft; the replay says so on the timeline.
func TestReplayRegenerate(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t, -1)
	e, _ := newEnv(t, dlConfig(model, nil), envOptions{})
	sendLead(t, e, "manual", "g-1", leadContact)
	key := "manual:g-1"
	dl := waitDeadLetter(t, e, key, "discarded")
	model.set(0)
	if code, ans := apiPost(t, e, deadLetterPath(dl["id"].(string), "replay"), `{"regenerate":true}`); code != http.StatusOK {
		t.Fatalf("replay: %d %v", code, ans)
	}
	d := waitDraft(t, e, key)
	tl := apiGet(t, e, timelinePath(key))
	r := list(jobOf(tl, "draft")["replays"])
	if len(r) != 1 || r[0].(map[string]any)["regenerate"] != true || d["status"] != "pending_approval" || d["model"] != "m" {
		t.Errorf("replays %v draft %v, want a regenerate replay and a pending draft", r, d)
	}
	if ds := list(tl["drafts"]); len(ds) != 1 {
		t.Errorf("drafts %v, want one", ds)
	}
	if _, ok := model.counts(); ok != 1 {
		t.Errorf("successful model calls %d, want 1", ok)
	}
}

// TestBulkReplayMixed: over a safe job, a failed reply and a reply that may
// have been sent, the bulk replay replays the first two and skips the third
// saying why.
func TestBulkReplayMixed(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t, -1)
	prov := newFakeProvider(t, true)
	e, _ := newEnv(t, dlConfig(model, prov), envOptions{})
	sendLead(t, e, "auto", "b-1", "+15550000001")
	job := waitDeadLetter(t, e, "auto:b-1", "discarded")
	model.set(0)
	sendLead(t, e, "crm", "b-2", "+15550000002")
	sendLead(t, e, "stall", "b-3", "+15550000003")
	failed := waitDeadLetter(t, e, "crm:b-2", "failed")
	unsure := waitDeadLetter(t, e, "stall:b-3", "needs_reconciliation")
	prov.set(false)

	code, ans := apiPost(t, e, "/api/v1/dead-letters/replay", `{}`)
	if code != http.StatusAccepted || ans["state"] != "running" || ans["total"] != float64(3) {
		t.Fatalf("bulk: %d %v", code, ans)
	}
	status := "/api/v1/dead-letters/bulk/" + ans["id"].(string)
	var st map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = apiGet(t, e, status)
		return st["state"] != "running"
	}, "the bulk replay to end")
	replayed := list(st["replayed"])
	skipped := list(st["skipped"])
	if st["state"] != "done" || len(replayed) != 2 || replayed[0] != job["id"] || replayed[1] != failed["id"] || len(list(st["failed"])) != 0 {
		t.Fatalf("bulk status %v, want %v and %v replayed", st, job["id"], failed["id"])
	}
	if len(skipped) != 1 || skipped[0].(map[string]any)["id"] != unsure["id"] || !strings.Contains(skipped[0].(map[string]any)["why"].(string), "may already have this message") {
		t.Errorf("skipped %v, want %v with its why", skipped, unsure["id"])
	}
	waitRow(t, e, "auto:b-1", "sent")
	waitRow(t, e, "crm:b-2", "sent")
	if row := rowOf(t, e, "stall:b-3"); row["status"] != "needs_reconciliation" || len(list(row["replays"])) != 0 {
		t.Errorf("the skipped reply changed: %v", row)
	}
	if msgs := sandboxFor(t, e, unsure["id"].(string)); len(msgs) != 1 || msgs[0]["repeats"] != float64(0) {
		t.Errorf("the skipped reply reached the sandbox again: %v", msgs)
	}
	if code, ans := e.do(t, http.MethodGet, "/api/v1/dead-letters/bulk/nope", "", nil, tokenHeader()); code != http.StatusNotFound {
		t.Errorf("unknown run: %d %v", code, ans)
	}
	if code, ans := apiPost(t, e, "/api/v1/dead-letters/replay", `{"older_than":"soon"}`); code != http.StatusBadRequest {
		t.Errorf("bad filter: %d %v", code, ans)
	}
}

// TestBulkReplayCancel holds a bulk run before its second item, cancels it
// there, and checks that no further item was replayed.
func TestBulkReplayCancel(t *testing.T) {
	t.Parallel()
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	model := newFakeModel(t, -1)
	e, _ := newEnv(t, dlConfig(model, nil), envOptions{pause: func(i int) {
		if i == 1 {
			once.Do(func() { close(reached) })
			<-release
		}
	}})
	const n = 12
	for i := range n {
		sendLead(t, e, "manual", fmt.Sprintf("k-%02d", i), fmt.Sprintf("+1555000%04d", i))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(deadLetters(t, e, "kind=job")) == n }, "every draft job to be discarded")
	model.set(0)

	code, ans := apiPost(t, e, "/api/v1/dead-letters/replay", `{"kind":"job"}`)
	if code != http.StatusAccepted || ans["total"] != float64(n) {
		t.Fatalf("bulk: %d %v", code, ans)
	}
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the bulk replay never reached its second item")
	}
	path := "/api/v1/dead-letters/bulk/" + ans["id"].(string)
	if code, ans := apiPost(t, e, path+"/cancel", ""); code != http.StatusOK || ans["state"] != "running" {
		t.Errorf("cancel: %d %v, want 200 while the run winds down", code, ans)
	}
	close(release)
	var st map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = apiGet(t, e, path)
		return st["state"] != "running"
	}, "the bulk replay to stop")
	if st["state"] != "cancelled" || len(list(st["replayed"])) != 1 || st["total"] != float64(n) {
		t.Fatalf("after cancel: %v, want cancelled after one of %d", st, n)
	}
	if rest := deadLetters(t, e, "kind=job"); len(rest) != n-1 {
		t.Errorf("%d jobs left on the list, want %d", len(rest), n-1)
	}
	wantAudit(t, e.st, "api-token", "replay job")
}

// TestBulkReplaySurvivesRestart: a bulk run is a job with its progress in
// the store. Held before its second item while the process stops, it is
// handed back to the queue; the process started again on the same folder
// resumes it there, and every item ends replayed exactly once.
func TestBulkReplaySurvivesRestart(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	var once sync.Once
	model := newFakeModel(t, -1)
	cfg := dlConfig(model, nil)
	e, _ := newEnv(t, cfg, envOptions{pauseCtx: func(ctx context.Context, i int) {
		if i == 1 {
			once.Do(func() { close(held) })
			<-ctx.Done() // until the runner stops
		}
	}})
	const n = 4
	for i := range n {
		sendLead(t, e, "manual", fmt.Sprintf("r-%02d", i), fmt.Sprintf("+1555200%04d", i))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(deadLetters(t, e, "kind=job")) == n }, "every draft job to be discarded")
	model.set(0)
	code, ans := apiPost(t, e, "/api/v1/dead-letters/replay", `{"kind":"job"}`)
	if code != http.StatusAccepted || ans["state"] != "running" || ans["total"] != float64(n) {
		t.Fatalf("bulk: %d %v", code, ans)
	}
	id := ans["id"].(string)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the bulk replay never reached its second item")
	}
	// Stop at once: the runner does not wait for the held run, it ends its
	// context and hands the job back.
	stopNow, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.app.Stop(stopNow); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if run := bulkRunIn(t, cfg.DataDir, id); run.State != store.BulkRunning || len(run.Replayed) != 1 {
		t.Fatalf("stored run after Stop: %+v, want running after one item", run)
	}

	again := NewApp(t, cfg, nil, testToken) // the same data folder
	if err := again.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	e2 := &testEnv{url: "http://" + again.Addr().String(), st: again.Store(), cfg: cfg}
	var st map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = apiGet(t, e2, "/api/v1/dead-letters/bulk/"+id)
		return st["state"] != "running"
	}, "the resumed bulk replay to end")
	replayed := list(st["replayed"])
	if st["state"] != "done" || len(replayed) != n || len(list(st["skipped"])) != 0 || len(list(st["failed"])) != 0 {
		t.Fatalf("after the restart: %v, want done with all %d replayed", st, n)
	}
	var items []string
	if err := e2.st.View(func(tx *store.Tx) error {
		run, err := tx.BulkRun(id)
		items = run.Items
		return err
	}); err != nil || len(items) != n {
		t.Fatalf("stored items %v (%v), want %d", items, err, n)
	}
	for i, item := range items {
		if replayed[i] != item {
			t.Errorf("replayed %v, want the items in order %v", replayed, items)
		}
		j, err := e2.st.Job(item)
		if err != nil {
			t.Fatal(err)
		}
		if len(j.Replays) != 1 {
			t.Errorf("job %s has %d replays, want 1", item, len(j.Replays))
		}
	}
	if rest := deadLetters(t, e2, "kind=job"); len(rest) != 0 {
		t.Errorf("still on the list after the resumed run: %v", rest)
	}
}

// bulkRunIn reads the run id from the closed store in dir.
func bulkRunIn(t *testing.T, dir, id string) store.BulkRun {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var run store.BulkRun
	if err := st.View(func(tx *store.Tx) error {
		run, err = tx.BulkRun(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestCancelDeadLetterAPI: a cancel needs a reason and takes the item off the list.
func TestCancelDeadLetterAPI(t *testing.T) {
	t.Parallel()
	e, _ := newEnv(t, dlConfig(newFakeModel(t, -1), nil), envOptions{})
	sendLead(t, e, "manual", "x-1", leadContact)
	dl := waitDeadLetter(t, e, "manual:x-1", "discarded")
	path := deadLetterPath(dl["id"].(string), "cancel")
	for _, body := range []string{"", `{}`, `{"reason":"  "}`, `{"reason":"x","by":"me"}`} {
		if code, ans := apiPost(t, e, path, body); code != http.StatusBadRequest {
			t.Errorf("cancel with %q: %d %v, want 400", body, code, ans)
		}
	}
	if code, ans := apiPost(t, e, path, `{"reason":"the lead wrote again by phone"}`); code != http.StatusOK || ans["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, ans)
	}
	if rest := deadLetters(t, e, ""); len(rest) != 0 {
		t.Errorf("still listed: %v", rest)
	}
	if code, _ := apiPost(t, e, deadLetterPath(dl["id"].(string), "replay"), ""); code != http.StatusConflict && code != http.StatusNotFound {
		t.Errorf("replaying a cancelled job: %d, want 409 or 404", code)
	}
	if code, _ := apiPost(t, e, deadLetterPath("nope", "cancel"), `{"reason":"x"}`); code != http.StatusNotFound {
		t.Errorf("unknown id: %d, want 404", code)
	}
	if code, _ := apiPost(t, e, deadLetterPath("nope", "dance"), ""); code != http.StatusNotFound {
		t.Errorf("unknown action: %d, want 404", code)
	}
	wantAuditBy(t, e.st, "api-token", "cancel job", dl["id"].(string))
}

// wantAuditBy checks that who did action on target. (A cancel records no
// client address: store.Dismissal has no From.)
func wantAuditBy(t *testing.T, st *store.Store, who, action, target string) {
	t.Helper()
	log, err := st.AuditLog(500)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range log {
		if en.Action == action && en.Who == who && en.Target == target {
			return
		}
	}
	t.Errorf("no audit entry %q by %s on %s in %+v", action, who, target, log)
}

// refusingClients is two clients' channels, web-a (acme) and web-b (bolt),
// approved automatically and delivered to a sandbox that refuses every
// message for good: each lead becomes one failed reply, a dead letter.
func refusingClients() *config.Config {
	cfg := twoClients()
	cfg.Retry.MaxAttempts = 1
	cfg.Providers = []config.Provider{{Name: "refuse", Kind: "sandbox", Fail: "permanent"}}
	for i := range cfg.Channels {
		cfg.Channels[i].AutoApprove, cfg.Channels[i].Provider = true, "refuse"
	}
	return cfg
}

// failedReplies sends n leads on each channel and waits until every reply failed.
func failedReplies(t *testing.T, e *testEnv, per map[string]int) {
	t.Helper()
	total := 0
	for ch, n := range per {
		for i := range n {
			sendLead(t, e, ch, fmt.Sprintf("%s-%03d", ch, i), fmt.Sprintf("+1555%s%04d", map[string]string{"web-a": "1", "web-b": "2"}[ch], i))
		}
		total += n
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		c, err := e.st.Counts(nil)
		return err == nil && c.FailedReplies == total
	}, fmt.Sprintf("%d failed replies", total))
}

var (
	rowIDRe    = regexp.MustCompile(`name="id" value="([^"]+)"`)
	nextLinkRe = regexp.MustCompile(`rel="next" href="([^"]+)"`)
	prevLinkRe = regexp.MustCompile(`rel="prev" href="([^"]+)"`)
)

// tablePage is one page of the dead-letter table as a person sees it.
type tablePage struct {
	ids        []string
	next, prev string
	size       int
}

func readTable(t *testing.T, b *browser, path string) tablePage {
	t.Helper()
	p := b.getOK(path)
	tp := tablePage{size: len(p.body)}
	for _, m := range rowIDRe.FindAllStringSubmatch(p.body, -1) {
		tp.ids = append(tp.ids, html.UnescapeString(m[1]))
	}
	if m := nextLinkRe.FindStringSubmatch(p.body); m != nil {
		tp.next = html.UnescapeString(m[1])
	}
	if m := prevLinkRe.FindStringSubmatch(p.body); m != nil {
		tp.prev = html.UnescapeString(m[1])
	}
	return tp
}

// TestDeadLetterTablePages walks 120 dead letters of two clients through
// the table's Next and Previous links: pages of 50, every item exactly
// once, the same pages backwards, a filter kept across pages; a page's
// HTML stays bounded. The list is an admin's: a person limited to a client
// reaches none of its routes, for their client's items or the other's.
func TestDeadLetterTablePages(t *testing.T) {
	t.Parallel()
	e, _ := newEnv(t, refusingClients(), envOptions{})
	failedReplies(t, e, map[string]int{"web-a": 70, "web-b": 50})
	rows, err := e.st.OutboxByStatus(store.OutboxFailed, 1000)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{} // id -> channel
	for _, o := range rows {
		all[o.ID] = o.Channel
	}
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")

	walk := func(first string) []tablePage {
		var pages []tablePage
		for path := first; path != ""; path = pages[len(pages)-1].next {
			pages = append(pages, readTable(t, admin, path))
			if len(pages) > 10 {
				t.Fatalf("more than 10 pages: the Next links go round")
			}
		}
		return pages
	}
	pages := walk("/dead-letters")
	seen := map[string]int{}
	var sizes []int
	for i, p := range pages {
		sizes = append(sizes, len(p.ids))
		for _, id := range p.ids {
			seen[id]++
		}
		if (i == 0) != (p.prev == "") {
			t.Errorf("page %d: previous link %q, want one on every page but the first", i+1, p.prev)
		}
		if p.size > 60_000 {
			t.Errorf("page %d is %d bytes of HTML, want at most 60 KB", i+1, p.size)
		}
	}
	if fmt.Sprint(sizes) != "[50 50 20]" {
		t.Errorf("page sizes %v, want [50 50 20]", sizes)
	}
	for id, n := range seen {
		if n != 1 || all[id] == "" {
			t.Errorf("%s is on %d pages (a failed reply: %v), want once", id, n, all[id] != "")
		}
	}
	if len(seen) != len(all) {
		t.Errorf("the pages hold %d items, want all %d", len(seen), len(all))
	}
	// Backwards from the last page: the same pages.
	back := pages[len(pages)-1]
	for i := len(pages) - 2; i >= 0; i-- {
		back = readTable(t, admin, back.prev)
		if fmt.Sprint(back.ids) != fmt.Sprint(pages[i].ids) {
			t.Errorf("page %d backwards differs from forwards", i+1)
		}
	}
	if back.prev != "" {
		t.Errorf("the first page, reached backwards, links to a previous one: %q", back.prev)
	}

	// A filter holds across pages: only web-b's 50.
	filtered := walk("/dead-letters?channel=web-b")
	n := 0
	for _, p := range filtered {
		for _, id := range p.ids {
			n++
			if all[id] != "web-b" {
				t.Errorf("channel=web-b lists %s of %s", id, all[id])
			}
		}
		if p.next != "" && !strings.Contains(p.next, "channel=web-b") {
			t.Errorf("the next link %q drops the filter", p.next)
		}
	}
	if n != 50 || len(filtered) != 1 {
		t.Errorf("channel=web-b: %d items on %d pages, want 50 on 1", n, len(filtered))
	}

	// A person of one client reaches no dead letter, theirs or the other's.
	var mine, theirs string
	for id, ch := range all {
		if ch == "web-a" {
			mine = id
		} else {
			theirs = id
		}
	}
	ann := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	for _, path := range []string{"/dead-letters", "/dead-letters?after=o:" + url.QueryEscape(mine), views.DeadLetterURL(mine), views.DeadLetterURL(theirs)} {
		if p := ann.get(path); p.code != http.StatusNotFound && p.code != http.StatusForbidden || has(p.body, mine) || has(p.body, theirs) {
			t.Errorf("acme's approver, GET %s: %d, want 404 or 403 naming no item", path, p.code)
		}
	}
	for _, path := range []string{"/dead-letters/replay-selected", dlPagePath(mine, "replay"), dlPagePath(mine, "lookup")} {
		if p := ann.post(path, url.Values{"id": {mine}}); p.code != http.StatusNotFound && p.code != http.StatusForbidden {
			t.Errorf("acme's approver, POST %s: %d, want 404 or 403", path, p.code)
		}
	}
	if o, _ := e.st.OutboxRow(mine); o.Status != store.OutboxFailed || len(o.Replays) != 0 {
		t.Errorf("a limited person's posts changed %s: %s %v", mine, o.Status, o.Replays)
	}
	if ov := ann.getOK("/"); strings.Contains(ov.body, "dead letters") || strings.Contains(ov.body, "to reconcile") {
		t.Errorf("acme's approver's overview counts dead letters or replies to reconcile")
	}
}

// TestReplaySelectedRunsOnce: "Replay selected" is one POST that starts
// the durable bulk replay over the ticked rows only: each of them sent
// once when the provider takes them again, the rows not ticked untouched.
func TestReplaySelectedRunsOnce(t *testing.T) {
	t.Parallel()
	e, _ := newEnv(t, refusingClients(), envOptions{})
	failedReplies(t, e, map[string]int{"web-a": 6})
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	ids := readTable(t, admin, "/dead-letters").ids
	if len(ids) != 6 {
		t.Fatalf("%d rows, want 6", len(ids))
	}
	picked, left := ids[:4], ids[4:]
	if p := admin.do(http.MethodPost, "/dead-letters/replay-selected", url.Values{"id": picked}, nil); p.code != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d, want 403", p.code)
	}
	p := admin.post("/dead-letters/replay-selected", url.Values{"id": picked})
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/dead-letters/bulk/") {
		t.Fatalf("replay selected: %d %q, want a redirect to the run", p.code, p.header.Get("Location"))
	}
	runID := strings.TrimPrefix(p.header.Get("Location"), "/dead-letters/bulk/")
	var run store.BulkRun
	testkit.Eventually(t, 10*time.Second, func() bool {
		_ = e.st.View(func(tx *store.Tx) error { var err error; run, err = tx.BulkRun(runID); return err })
		return run.State == store.BulkDone
	}, "the run to end")
	if fmt.Sprint(run.Items) != fmt.Sprint(picked) || len(run.Replayed) != 4 {
		t.Errorf("run items %v replayed %v, want the 4 ticked", run.Items, run.Replayed)
	}
	wantAuditBy(t, e.st, "boss", "replay outbox", picked[0])
	for _, id := range picked {
		testkit.Eventually(t, 10*time.Second, func() bool {
			o, _ := e.st.OutboxRow(id)
			return o.Status == store.OutboxFailed && len(o.Replays) == 1 && o.Replays[0].By == "boss"
		}, id+" to fail again (the provider still refuses)")
	}
	for _, id := range left {
		if o, _ := e.st.OutboxRow(id); len(o.Replays) != 0 {
			t.Errorf("%s was not ticked but was replayed", id)
		}
	}
	too := make([]string, maxSelected+1)
	for i := range too {
		too[i] = fmt.Sprintf("x%d", i)
	}
	if p := admin.post("/dead-letters/replay-selected", url.Values{"id": too}); p.code != http.StatusBadRequest {
		t.Errorf("%d ids: %d, want 400", len(too), p.code)
	}
}
