package workers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/approvals"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestDigestCarriesReplyAddresses: with approvals.email, the digest that
// goes out through a real SMTP server (Mailpit) carries, under each
// draft's line, that draft's reply address — the one a mail decides it
// by — beside the link, which only opens it; without it, none.
func TestDigestCarriesReplyAddresses(t *testing.T) {
	mp := testkit.StartMailpit(t)
	host, port, err := net.SplitHostPort(mp.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	cfg := digestConfig(t, fmt.Sprintf(`providers:
  - {name: mail, kind: smtp, host: %s, port: %s, tls: none, from: "Handoff <handoff@agency.example>"}
digests:
  - {name: morning, to: mail, address: approvers@agency.example, schedule: "0 9 * * 1-5"}
`, host, port))
	cfg.Auth.SecretKey = "digest-test-secret-key"
	cfg.Approvals.Mail.Email = &config.EmailSurface{Domain: "reply.agency.example", Local: "approvals", Inbound: "postmark", Secret: "u:p"}
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, t.TempDir(), cfg, clock)
	defer g.stop(t)
	var drafts []store.Draft
	for i, tx := range []corpus.Text{corpus.TextNamed("emoji"), corpus.TextNamed("arabic")} {
		drafts = append(drafts, waiting(t, g.st, "demo", tx.From, tx.Body, dt0.Add(-time.Duration(2-i)*time.Hour)))
	}
	clock.Advance(15 * time.Second)
	if err := g.maint.ScheduledDigest(context.Background(), "morning"); err != nil {
		t.Fatal(err)
	}
	if o := waitSettled(t, g.st, delivery.DigestID("morning", "at-20260601T0900Z")); o.Status != store.OutboxSent {
		t.Fatalf("digest = %s: %s", o.Status, o.Note)
	}
	msgs := mp.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailpit holds %d messages, want the digest", len(msgs))
	}
	body := strings.ReplaceAll(mailpitText(t, mp, msgs[0].ID), "\r\n", "\n")
	for _, d := range drafts {
		addr, ok := approvals.ReplyAddress(cfg, d.ID)
		if !ok || !strings.Contains(body, link(d.ID)+"\n  decide by mail (ok, no, or your own reply) to "+addr+"\n") {
			t.Errorf("the digest lacks draft %s's reply address %q under its link:\n%s", d.ID, addr, body)
		}
	}
	if strings.Contains(body, "GET") || strings.Count(body, "approvals+") != len(drafts) {
		t.Errorf("the digest has %d reply addresses, want %d:\n%s", strings.Count(body, "approvals+"), len(drafts), body)
	}
}
