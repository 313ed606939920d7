package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// socketPayload is the interaction payload of the @slack/bolt vector name
// (a Socket Mode envelope carries it as JSON, not as a signed form).
func socketPayload(t *testing.T, sv slackVectors, name string) json.RawMessage {
	t.Helper()
	form, err := url.ParseQuery(string(sv.request(t, name).Body))
	if err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(form.Get("payload"))
}

// TestSlackSocketMode: an install with socket_mode and no public URL. The
// stand-in greets each connection; Approve over it decides through review
// and the card follows; Slack's resend of the same envelope is acked and
// decides nothing more; the same payload in a new envelope answers
// "already approved by dana" (review's idempotence); a disconnect and a
// dropped connection are each followed by a fresh apps.connections.open;
// a person of another client is refused ephemerally; Undo and the Edit
// modal's submission (its response_action in the ack's payload) work on
// the later connections. One approval, one outbox row, one delivery job.
func TestSlackSocketMode(t *testing.T) {
	ctx := context.Background()
	sv := readSlackVectors(t)
	f := newFixture(t)
	api := standin.NewSurfaceAPI(t, "xoxb-test-token")
	sock := standin.NewSlackSocket(t, api, "xapp-1-A0TEST-1-secret")
	f.cfg.Approvals.Slack = &config.SlackSurface{
		BotToken: "xoxb-test-token", SocketMode: true, AppToken: "xapp-1-A0TEST-1-secret", APIURL: sock.URL,
		Channels: map[string]string{"acme": "C0ACME", "beta": "C0BETA"},
		Users:    map[string]string{"U0DANA": "dana"},
	}
	api.Emails["U0BEA"] = "bea@beta.test"
	u, _ := url.Parse(api.URL)
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now, HTTP: &http.Client{Transport: toStandin{u}, Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	s, _ := a.Surface(ViaSlack)
	slack := s.(*slackSurface)
	slack.sock.backoff = 5 * time.Millisecond

	// The HTTP endpoint takes nothing: without a signing secret nothing
	// unsigned can decide there.
	if in, ok := a.Inbound(ViaSlack); !ok {
		t.Fatal("slack is not inbound")
	} else if ans := in.Receive(ctx, sv.request(t, "approve by dana")); ans.Status != http.StatusNotFound {
		t.Fatalf("POST /surfaces/slack in socket mode: %d %s, want 404", ans.Status, ans.Body)
	}

	d := f.pendingID(t, strings.TrimPrefix(sv.Draft, "d"), "web", "m1", "Hi Ada, yes: the blue one is in stock. 😀 «שלום» & <b>")
	if err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	if n := len(api.Calls("chat.postMessage")); n != 1 {
		t.Fatalf("chat.postMessage calls = %d, want 1", n)
	}

	lctx, stop := context.WithCancel(ctx)
	listened := make(chan struct{})
	go func() { defer close(listened); a.Listen(lctx) }()
	t.Cleanup(func() {
		stop()
		<-listened
		a.Wait()
	})

	c1 := sock.Next(t)
	if ack := c1.Interactive(t, "env-1", 0, socketPayload(t, sv, "approve by dana")); ack["payload"] != nil {
		t.Errorf("block_actions ack carries a payload: %s", ack["payload"])
	}
	got := f.draft(t, d.ID)
	if got.Status != store.DraftApproved || got.Decision == nil || got.Decision.By != "dana" || got.Decision.Via != ViaSlack || got.Decision.From != "slack T0001/U0DANA" {
		t.Fatalf("after Approve over the socket: %s %+v", got.Status, got.Decision)
	}
	// Slack resends an envelope whose ack it did not see: acked, not handled again.
	c1.Interactive(t, "env-1", 1, socketPayload(t, sv, "approve by dana"))
	if says := ephemerals(f, api); len(says) != 0 {
		t.Fatalf("the resent envelope was answered %q, want nothing", says)
	}
	// The same click in a new envelope (a resend after handoff restarted):
	// review's idempotence answers it.
	c1.Interactive(t, "env-2", 0, socketPayload(t, sv, "approve by dana"))
	if says := ephemerals(f, api); len(says) != 1 || !strings.Contains(says[0], "already approved by dana") {
		t.Fatalf("the second approval's answer = %q, want already approved by dana", says)
	}
	if after := f.draft(t, d.ID); after.OutboxID != got.OutboxID || !after.Decision.At.Equal(got.Decision.At) {
		t.Fatalf("the second approval changed the decision: %+v / %s", after.Decision, after.OutboxID)
	}
	f.runJobs(t)
	if up := api.Calls("chat.update"); len(up) != 1 || !strings.Contains(slackText(up[0].Body), "Approved by dana via slack") {
		t.Fatalf("chat.update after the approval = %+v", up)
	}

	// Slack's disconnect: handoff opens a fresh URL.
	c1.Send(t, map[string]any{"type": "disconnect", "reason": "refresh_requested", "debug_info": map[string]any{"host": "applink-standin"}})
	c2 := sock.Next(t)
	c1.Done()
	c2.Interactive(t, "env-3", 0, socketPayload(t, sv, "approve by bea of another client"))
	if says := ephemerals(f, api); len(says) != 2 || !strings.Contains(says[1], "(bea) are not an approver of this client") {
		t.Fatalf("bea's answer = %q", says)
	}
	c2.Interactive(t, "env-4", 0, socketPayload(t, sv, "undo by dana"))
	if st := f.draft(t, d.ID).Status; st != store.DraftPending {
		t.Fatalf("after Undo over the socket the draft is %s, want pending", st)
	}

	// The connection drops without a word (a NAT forgot it): handoff
	// reconnects after its backoff.
	c2.Done()
	c3 := sock.Next(t)
	ack := c3.Interactive(t, "env-5", 0, socketPayload(t, sv, "edited reply submitted by dana"))
	if string(ack["payload"]) != `{"response_action":"clear"}` {
		t.Fatalf("view_submission ack payload = %s, want response_action clear", ack["payload"])
	}
	final := f.draft(t, d.ID)
	if final.Status != store.DraftApproved || final.Decision == nil || !final.Decision.Edited ||
		final.Decision.Text != "Hi Ada, the blue one is in stock: shall I hold it for you?" {
		t.Fatalf("after the edit over the socket: %s %+v", final.Status, final.Decision)
	}
	if n := sock.Opens(); n != 3 {
		t.Errorf("apps.connections.open calls = %d, want 3 (first, after disconnect, after the drop)", n)
	}
	if n := slack.socketConnects(); n != 3 {
		t.Errorf("hellos = %d, want 3", n)
	}
	var deliveries []store.Job
	if err := f.st.View(func(tx *store.Tx) (err error) { deliveries, err = tx.JobsByCorrelation(d.CorrelationID); return err }); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range deliveries {
		if j.Kind == store.KindDeliver {
			n++
		}
	}
	if n != 1 {
		t.Errorf("delivery jobs = %d, want 1 (the undone approval's job is reused by the edit)", n)
	}
	if n := len(api.Calls("chat.postMessage")); n != 1 {
		t.Errorf("chat.postMessage calls = %d, want 1: one message per draft", n)
	}
	if bad := sock.Refused(); len(bad) > 0 {
		t.Errorf("calls the stand-in refused: %q", bad)
	}
	if bad := api.Malformed(); len(bad) > 0 {
		t.Errorf("calls the API refused as malformed: %q", bad)
	}
}

// TestSlackSocketModeBadToken: an app token Slack refuses is retried with
// backoff and never connects; Listen returns when the process stops.
func TestSlackSocketModeBadToken(t *testing.T) {
	f := newFixture(t)
	api := standin.NewSurfaceAPI(t, "xoxb-test-token")
	sock := standin.NewSlackSocket(t, api, "xapp-the-right-one")
	f.cfg.Approvals.Slack = &config.SlackSurface{BotToken: "xoxb-test-token", SocketMode: true, AppToken: "xapp-a-wrong-one", APIURL: sock.URL,
		Channels: map[string]string{"acme": "C0ACME"}}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := a.Surface(ViaSlack)
	s.(*slackSurface).sock.backoff = time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Listen(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := len(sock.Refused())
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused opens = %d within 10 s, want at least 3 (retried)", n)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after the stop")
	}
	if sock.Opens() != 0 || sock.Waiting() != 0 {
		t.Errorf("a refused token connected")
	}
}

// TestSlackSocketModeAtOnce: the same Approve delivered in two envelopes
// back to back (handled concurrently, each in its own goroutine) while root
// approves on the dashboard: both envelopes are acked, one approval stands,
// one outbox row and one delivery job, and each losing envelope's clicker
// is told whose approval stands.
func TestSlackSocketModeAtOnce(t *testing.T) {
	ctx := context.Background()
	sv := readSlackVectors(t)
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f := newFixture(t)
			api := standin.NewSurfaceAPI(t, "xoxb-test-token")
			sock := standin.NewSlackSocket(t, api, "xapp-1-A0TEST-1-secret")
			f.cfg.Approvals.Slack = &config.SlackSurface{BotToken: "xoxb-test-token", SocketMode: true, AppToken: "xapp-1-A0TEST-1-secret", APIURL: sock.URL,
				Channels: map[string]string{"acme": "C0ACME"}, Users: map[string]string{"U0DANA": "dana"}}
			u, _ := url.Parse(api.URL)
			a, err := New(f.st, f.cfg, Options{Now: f.clock.Now, HTTP: &http.Client{Transport: toStandin{u}, Timeout: 5 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			f.a = a
			d := f.pendingID(t, strings.TrimPrefix(sv.Draft, "d"), "web", "m1", "Hi Ada")
			lctx, stop := context.WithCancel(ctx)
			listened := make(chan struct{})
			go func() { defer close(listened); a.Listen(lctx) }()
			t.Cleanup(func() { stop(); <-listened; a.Wait() })
			c := sock.Next(t)

			payload := socketPayload(t, sv, "approve by dana")
			var dash review.Approved
			var dashErr error
			acks := map[string]bool{}
			testkit.Together(2, func(i int) {
				if i == 1 {
					dash, dashErr = review.New(f.st, f.cfg).Approve(ctx, d.ID, store.Decision{By: "root", At: f.clock.Now()})
					return
				}
				for _, id := range []string{"env-a", "env-b"} {
					c.Send(t, map[string]any{"envelope_id": id, "type": "interactive", "payload": payload, "accepts_response_payload": true})
				}
				for range 2 {
					rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					_, raw, err := c.C.Read(rctx)
					cancel()
					if err != nil {
						t.Errorf("no ack within 3 s: %v", err)
						return
					}
					var ack struct {
						EnvelopeID string `json:"envelope_id"`
					}
					json.Unmarshal(raw, &ack)
					acks[ack.EnvelopeID] = true
				}
			})
			if dashErr != nil || !acks["env-a"] || !acks["env-b"] {
				t.Fatalf("dashboard %v; acks %v", dashErr, acks)
			}
			final := f.draft(t, d.ID)
			if final.Status != store.DraftApproved || final.OutboxID == "" || dash.Outbox.ID != final.OutboxID {
				t.Fatalf("final %s outbox %q, the dashboard's %q", final.Status, final.OutboxID, dash.Outbox.ID)
			}
			says := ephemerals(f, api)
			wantSays := 1 // one envelope lost to the other, or both to root
			if final.Decision.By == "root" {
				wantSays = 2
			}
			if len(says) != wantSays {
				t.Fatalf("approved by %s; ephemerals %q, want %d", final.Decision.By, says, wantSays)
			}
			for _, s := range says {
				if !strings.Contains(s, "already approved by "+final.Decision.By) {
					t.Errorf("ephemeral %q, want already approved by %s", s, final.Decision.By)
				}
			}
			var jobs []store.Job
			if err := f.st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation(d.CorrelationID); return err }); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, j := range jobs {
				if j.Kind == store.KindDeliver {
					n++
				}
			}
			if n != 1 {
				t.Errorf("delivery jobs = %d, want 1", n)
			}
		})
	}
}
