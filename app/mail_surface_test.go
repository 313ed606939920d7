package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// postmarkReply is a reply as Postmark's inbound webhook posts it, its
// SPF and DKIM verdicts in Headers as Postmark passes them on.
func postmarkReply(from, to, text, spf string) []byte {
	_, domain, _ := strings.Cut(from, "@")
	raw, _ := json.Marshal(map[string]any{
		"FromName": "", "MessageStream": "inbound", "From": from, "FromFull": map[string]any{"Email": from, "Name": "", "MailboxHash": ""},
		"To": to, "ToFull": []any{map[string]any{"Email": to, "Name": "", "MailboxHash": ""}}, "Cc": "", "CcFull": []any{},
		"OriginalRecipient": to, "Subject": "Re: Approve a reply", "MessageID": "73e6d360-66eb-11e1-8e72-a8904824019b",
		"Date": "Wed, 2 Dec 2026 10:00:00 +0000", "TextBody": text, "HtmlBody": "", "StrippedTextReply": "",
		"Headers": []any{
			map[string]string{"Name": "Message-ID", "Value": "<CAE-" + from + "@mail.gmail.com>"},
			map[string]string{"Name": "Received-SPF", "Value": spf + " (sender SPF authorized) identity=mailfrom; envelope-from=" + from},
			map[string]string{"Name": "Authentication-Results", "Value": "mx.postmarkapp.com; dkim=pass header.d=" + domain},
		},
		"Attachments": []any{},
	})
	return raw
}

// TestEmailSurfaceWired: the wired process mails a waiting draft once
// through a real SMTP server (Mailpit), its Reply-To the draft's reply
// address; a reply from a person of another client, posted by Postmark to
// POST /surfaces/email, is refused and answered by mail in one sentence;
// dana's "ok" under the quoted mail approves it via email and the one
// reply is sent; a post without Postmark's credentials is a 401.
func TestEmailSurfaceWired(t *testing.T) {
	mp := testkit.StartMailpit(t)
	host, port, err := net.SplitHostPort(mp.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PM_INBOUND": "postmark:inbound-pass"}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`undo_window: 0s
providers:
  - {name: mail, kind: smtp, host: %s, port: %s, tls: none, from: "Handoff <handoff@agency.example>"}
approvals:
  sweep: 1s
  email:
    domain: reply.agency.example
    inbound: postmark
    secret_env: PM_INBOUND
    provider: mail
    to: {default: approvers@agency.example}
`, host, port)), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.SecretKey = "wired-app-secret-key-0123456789abcdef"
	for i := range cfg.Channels {
		cfg.Channels[i].Coalesce = 0
	}
	a := apptest.Start(t, cfg, app.Deps{APIToken: token})
	base := apptest.URL(a)
	for _, u := range []store.User{
		{Name: "dana", Role: store.RoleApprover, Email: "dana@agency.example"},
		{Name: "bea", Role: store.RoleApprover, Email: "bea@beta.example", Clients: []string{"beta"}},
	} {
		u.ID, u.PasswordHash, u.CreatedAt = store.NewUserID(), []byte("x"), time.Now()
		if err := a.Store().CreateUser(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	msg, _ := json.Marshal(map[string]string{"id": "m-1", "from": "+15550001234", "name": "Ada", "text": corpus.TextNamed("hebrew").Body})
	if code := call(t, http.MethodPost, base+"/hooks/demo", string(msg), nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	var card testkit.MailpitMessage
	testkit.Eventually(t, 20*time.Second, func() bool {
		ms := mp.Search(t, "to:approvers@agency.example")
		if len(ms) == 1 {
			card = ms[0]
		}
		return len(ms) == 1
	}, "the draft's mail in Mailpit")
	replyTo := mp.Headers(t, card.ID)["Reply-To"]
	if len(replyTo) != 1 || !strings.HasPrefix(replyTo[0], "<approvals+d") || !strings.HasSuffix(replyTo[0], "@reply.agency.example>") {
		t.Fatalf("the card's Reply-To = %q, want the draft's reply address", replyTo)
	}
	addr := strings.Trim(replyTo[0], "<>")
	if !strings.HasPrefix(card.Subject, "Approve a reply to Ada") {
		t.Errorf("the card's subject = %q", card.Subject)
	}

	post := func(body []byte, auth string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/surfaces/email", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(auth)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	quoted := "\n\nOn Wed, Dec 2, 2026 at 10:00 AM Handoff <" + addr + "> wrote:\n> Draft reply\n"
	if code := post(postmarkReply("dana@agency.example", addr, "ok"+quoted, "Pass"), ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	if code := post(postmarkReply("bea@beta.example", addr, "ok"+quoted, "Pass"), "postmark:inbound-pass"); code != http.StatusOK {
		t.Fatalf("bea's reply: %d, want 200", code)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return len(mp.Search(t, "to:bea@beta.example")) == 1 }, "the refusal's answer to bea")
	answer := mp.Search(t, "to:bea@beta.example")[0]
	if text := mailpitBody(t, mp, answer.ID); !strings.Contains(text, "You (bea) are not an approver of this client's drafts; nothing was decided.") {
		t.Errorf("the answer to bea = %q", text)
	}
	if code := post(postmarkReply("dana@agency.example", addr, "ok"+quoted, "Pass"), "postmark:inbound-pass"); code != http.StatusOK {
		t.Fatalf("dana's reply: %d, want 200", code)
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		tl := eventTimeline(t, base, "m-1")
		return tl.Outbox != nil && tl.Outbox.Status == string(store.OutboxSent)
	}, "the reply sent")
	tl := eventTimeline(t, base, "m-1")
	d, err := a.Store().Draft(tl.Draft.ID)
	if err != nil || d.Decision == nil || d.Decision.By != "dana" || d.Decision.Via != "email" {
		t.Fatalf("the draft's decision = %+v, %v; want dana via email", d.Decision, err)
	}
	if n := len(mp.Search(t, "to:approvers@agency.example")); n != 1 {
		t.Errorf("%d mails of the draft, want 1", n)
	}
}

// mailpitBody is the plain text of Mailpit's message id.
func mailpitBody(t *testing.T, mp testkit.Mailpit, id string) string {
	t.Helper()
	resp, err := http.Get(mp.API + "/api/v1/message/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Text string }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.Text
}
