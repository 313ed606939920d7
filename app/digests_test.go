package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/workers"
)

// TestDigestWiredAndLinkOnlyOpens: the wired process runs a digest of the
// configured digests through its provider, and the digest's link, opened by
// a signed-in approver, shows the draft and decides nothing: the draft
// still waits and no reply exists.
func TestDigestWiredAndLinkOnlyOpens(t *testing.T) {
	cfg, err := config.Parse([]byte(`base_url: http://handoff.test
digests:
  - {name: team, to: sandbox, schedule: "0 9 * * 1-5", oldest_after: 30m}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Channels {
		cfg.Channels[i].Coalesce = 0
	}
	a := apptest.Start(t, cfg, app.Deps{APIToken: token})
	base := apptest.URL(a)
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234","name":"Ada","text":"Can you call me back today?"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	var tl timeline
	testkit.Eventually(t, 10*time.Second, func() bool { tl = eventTimeline(t, base, "m-1"); return tl.Draft != nil }, "the draft")

	// The cron would fire at 9:00; the test enqueues the same job.
	ctx := context.Background()
	err = a.Store().Update(ctx, func(tx *store.Tx) error {
		_, _, err := jobs.Enqueue(tx, workers.DigestArgs{Digest: "team", Period: "at-test"}, jobs.Opts{MaxAttempts: 3, Now: time.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Jobs().Wake()
	var msg store.SandboxMessage
	testkit.Eventually(t, 10*time.Second, func() bool {
		msg, err = a.Store().SandboxLookup(delivery.DigestID("team", "at-test"))
		return err == nil
	}, "the digest at the sandbox")
	m := regexp.MustCompile(`http://handoff\.test(/drafts\?id=\S+)`).FindStringSubmatch(msg.Text)
	if m == nil || !strings.Contains(m[1], tl.Draft.ID) || !strings.Contains(msg.Text, "Ada (demo") {
		t.Fatalf("digest text has no link to draft %s:\n%s", tl.Draft.ID, msg.Text)
	}

	hash, err := password.Hash("a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Store().CreateUser(ctx, store.User{Name: "dana", Role: store.RoleApprover, PasswordHash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/login", url.Values{"name": {"dana"}, "password": {"a long enough password"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(base + m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/drafts" || !strings.Contains(string(page), tl.Draft.ID) {
		t.Fatalf("GET %s as dana: %d at %s, want the queue open on draft %s", m[1], resp.StatusCode, resp.Request.URL, tl.Draft.ID)
	}
	d, err := a.Store().Draft(tl.Draft.ID)
	if err != nil || d.Status != store.DraftPending || d.OutboxID != "" {
		t.Fatalf("after opening the link the draft is %s with outbox %q (%v), want still waiting with none", d.Status, d.OutboxID, err)
	}
}
