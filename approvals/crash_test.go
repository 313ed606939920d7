package approvals

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/testkit/standin"
)

// The child process of TestSlackCardCrashBetweenAcceptAndRecord: its
// data folder and the stand-in's address.
const (
	crashDirEnv = "HANDOFF_APPROVALS_CRASH_DIR"
	crashAPIEnv = "HANDOFF_APPROVALS_CRASH_API"
	crashToken  = "xoxb-crash-token"
)

func crashConfig(api string) *config.Config {
	cfg := testConfig()
	cfg.Approvals.Slack = &config.SlackSurface{
		BotToken: crashToken, SigningSecret: "crash-signing-secret", APIURL: api,
		Channels: map[string]string{"acme": "C0ACME", "beta": "C0BETA"},
	}
	return cfg
}

// TestSlackCardCrashBetweenAcceptAndRecord: a process posts a draft's card
// and is killed (SIGKILL) after Slack accepted the post and before the
// answer came back, so nothing of the post is recorded but its mark. The
// next process does not post blind: it finds the card in
// conversations.history by its metadata and records its ts — one message
// in the channel — and the card follows the draft's decision from there.
func TestSlackCardCrashBetweenAcceptAndRecord(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(t, dir, os.Getenv(crashAPIEnv))
		return
	}
	ctx := context.Background()
	clock := testkit.NewClock(t0)
	api := standin.NewSurfaceAPI(t, crashToken)
	api.Now = clock.Now
	accepted := make(chan struct{})
	var once sync.Once
	api.Set(func(api *standin.SurfaceAPI) {
		api.Accepted = func(method string, r *http.Request) {
			if method != "chat.postMessage" {
				return
			}
			once.Do(func() { close(accepted) })
			<-r.Context().Done() // the answer never leaves: its caller is killed first
		}
	})
	dir := t.TempDir()
	cfg := crashConfig(api.URL)

	// The first process: the draft, its placeholder card and announce job.
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(st, cfg, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, cfg: cfg, a: a, clock: clock}
	for _, u := range []store.User{{Name: "dana", Role: store.RoleApprover, Email: "dana@acme.test", Clients: []string{"acme"}}} {
		u.ID, u.CreatedAt, u.PasswordHash = ulid.Make().String(), t0, []byte("x")
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	d := f.pendingText(t, "web", "m1", corpus.TextNamed("fish").Body, corpus.TextNamed("slashes").Body)
	f.sweep(t)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The second process runs the announce job and is killed mid-post.
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlackCardCrashBetweenAcceptAndRecord$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashAPIEnv+"="+api.URL)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-accepted:
	case err := <-exited:
		t.Fatalf("the child exited before its post reached Slack: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the child's post did not reach Slack within 2 minutes\n%s", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatalf("the child exited cleanly; want it killed\n%s", out.String())
	}
	if msgs := api.Messages("C0ACME"); len(msgs) != 1 {
		t.Fatalf("messages in the channel after the crash = %v, want the one Slack accepted", msgs)
	}

	// The third process: the job's lease ends, its retry looks the card up.
	st = testkit.OpenStore(t, dir)
	clock.Advance(10 * time.Minute)
	if a, err = New(st, cfg, Options{Now: clock.Now}); err != nil {
		t.Fatal(err)
	}
	f = &fixture{st: st, cfg: cfg, a: a, clock: clock}
	c := f.card(t, ViaSlack, d.ID)
	if c.Posting.IsZero() || c.Ref != "" {
		t.Fatalf("card after the crash = %+v, want its post marked and no ts", c)
	}
	if _, err := st.Reap(ctx, clock.Now(), true); err != nil {
		t.Fatal(err)
	}
	runs := f.runAll(t)
	if len(runs) != 1 || runs[0].err != nil || runs[0].job.Attempt != 2 {
		t.Fatalf("the retry = %+v, want attempt 2 to succeed", runs)
	}
	msgs := api.Messages("C0ACME")
	c = f.card(t, ViaSlack, d.ID)
	if len(msgs) != 1 || len(api.Calls("chat.postMessage")) != 1 || len(api.Calls("conversations.history")) != 1 || msgs[0] != c.Ref+" "+slackCardEvent {
		t.Fatalf("after the retry: messages %v, posts %d, lookups %d, card %+v; want the one message found, nothing posted again",
			msgs, len(api.Calls("chat.postMessage")), len(api.Calls("conversations.history")), c)
	}
	if _, err := a.Decide(ctx, Ask{Via: ViaSlack, Draft: d.ID, Action: Approve, Person: mustUser(t, f, "dana"), From: "slack U0DANA"}); err != nil {
		t.Fatal(err)
	}
	f.runAll(t)
	if ups := api.Calls("chat.update"); len(ups) != 1 || ups[0].Body["ts"] != c.Ref {
		t.Fatalf("chat.update calls = %+v, want the found card's", ups)
	}
}

// crashChild is the process killed mid-post: it claims the announce job
// and runs it; the stand-in never answers the post, and the parent kills
// this process. Returning at all is a failure.
func crashChild(t *testing.T, dir, api string) {
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Second)
	a, err := New(st, crashConfig(api), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	jobs, err := st.Claim(ctx, now, store.ClaimLimits{Kinds: map[string]int{KindAnnounce: 1}}, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim = %v, %v; want the announce job", jobs, err)
	}
	err = a.Run(ctx, jobs[0])
	t.Fatalf("the post returned (%v); the parent should have killed this process first", err)
}

// TestDeadCardDescribesUncertainty: the dead letter of a card that may be
// in its chat says so, and says a replay posts nothing.
func TestDeadCardDescribesUncertainty(t *testing.T) {
	f, api, _ := telegramFixture(t)
	d := f.pendingText(t, "web", "m1", corpus.TextNamed("long").Body, corpus.TextNamed("arabic").Body)
	api.Set(func(api *standin.SurfaceAPI) { api.Lose["sendMessage"] = 1 })
	f.sweep(t)
	f.runAll(t)
	f.clock.Advance(2 * time.Hour)
	runs := f.runAll(t)
	if len(runs) != 1 || runs[0].err == nil {
		t.Fatalf("retry = %+v", runs)
	}
	job, err := f.st.Job(runs[0].job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var dl store.DeadLetter
	dl.Job = &job
	if err := f.st.View(func(tx *store.Tx) error { DeadCard{}.Describe(tx, &dl); return nil }); err != nil {
		t.Fatal(err)
	}
	if !dl.Safe || dl.Draft == nil || dl.Draft.ID != d.ID || len(dl.Effects) != 1 || !strings.Contains(dl.Effects[0], "may already be in -1001234567890") {
		t.Fatalf("dead letter = safe %v draft %v effects %q why %q", dl.Safe, dl.Draft, dl.Effects, dl.Why)
	}
	// The replay posts nothing.
	if err := f.a.Announce(context.Background(), ViaTelegram, d.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(api.Calls("sendMessage")); n != 1 {
		t.Fatalf("sendMessage calls after a replay = %d, want 1", n)
	}
}
