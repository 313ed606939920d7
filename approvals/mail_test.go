package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

const mailSecretKey = "app-secret-key-for-tests-0123456789"

// emailFixture is a fixture whose approvals have the email surface with
// inbound provider inbound (its corpus secret), without a provider to
// send mail: refusals are audited only.
func emailFixture(t *testing.T, inbound string) (*fixture, *emailSurface) {
	t.Helper()
	f := newFixture(t)
	f.cfg.Auth.SecretKey = mailSecretKey
	f.cfg.Approvals.Mail.Email = &config.EmailSurface{Domain: "reply.example.com", Local: "approvals", Inbound: inbound, Secret: corpus.Secret(inbound)}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	s, ok := a.Surface(ViaEmail)
	if !ok {
		t.Fatal("the email surface is not open")
	}
	t.Cleanup(a.Wait)
	return f, s.(*emailSurface)
}

// replyMail is one reply as a person's mail program sends it, and the
// verdicts the inbound provider gives it.
type replyMail struct {
	From, To    string
	Text, HTML  string
	SPF, DKIM   string // "pass", "fail", "neutral", ""
	DKIMDomain  string // the domain of the DKIM verdict; "" for From's
	MessageID   string
	Subject     string
	FromDisplay string
}

func (m replyMail) dkimDomain() string {
	if m.DKIMDomain != "" {
		return m.DKIMDomain
	}
	_, d, _ := strings.Cut(m.From, "@")
	return d
}

// inboundPost is m as the inbound provider posts it, signed as it signs:
// Postmark's JSON with its Headers (Received-SPF, Authentication-Results),
// Mailgun's form with X-Mailgun-Spf and X-Mailgun-Dkim-Check-Result,
// SendGrid's multipart with its SPF and dkim fields.
func inboundPost(t *testing.T, preset string, m replyMail, now time.Time) *Request {
	t.Helper()
	if m.MessageID == "" {
		m.MessageID = "<CAE-reply-" + strconv.FormatInt(now.UnixNano(), 36) + "@mail.gmail.com>"
	}
	if m.Subject == "" {
		m.Subject = "Re: Approve a reply to Ada (Acme · web)"
	}
	from := m.From
	if m.FromDisplay != "" {
		from = fmt.Sprintf("%q <%s>", m.FromDisplay, m.From)
	}
	h := http.Header{}
	var body []byte
	switch preset {
	case "postmark":
		headers := []map[string]string{
			{"Name": "Return-Path", "Value": "<" + m.From + ">"},
			{"Name": "Message-ID", "Value": m.MessageID},
			{"Name": "X-Spam-Status", "Value": "No"},
		}
		if m.SPF != "" {
			headers = append(headers, map[string]string{"Name": "Received-SPF", "Value": strings.ToUpper(m.SPF[:1]) + m.SPF[1:] + " (sender SPF authorized) identity=mailfrom; client-ip=209.85.220.41; helo=mail-sor-f41.google.com; envelope-from=" + m.From + "; receiver=" + m.To})
		}
		if m.DKIM != "" {
			headers = append(headers, map[string]string{"Name": "Authentication-Results", "Value": "mx.postmarkapp.com; dkim=" + m.DKIM + " header.d=" + m.dkimDomain() + " header.s=google header.b=abc123"})
		}
		raw, _ := json.Marshal(map[string]any{
			"FromName": m.FromDisplay, "MessageStream": "inbound", "From": m.From,
			"FromFull": map[string]any{"Email": m.From, "Name": m.FromDisplay, "MailboxHash": ""},
			"To":       m.To, "ToFull": []any{map[string]any{"Email": m.To, "Name": "", "MailboxHash": ""}},
			"Cc": "", "CcFull": []any{}, "OriginalRecipient": m.To, "Subject": m.Subject,
			"MessageID": "73e6d360-66eb-11e1-8e72-" + fmt.Sprintf("%012d", now.UnixNano()%1e12), "ReplyTo": "", "MailboxHash": "",
			"Date": now.Format(time.RFC1123Z), "TextBody": m.Text, "HtmlBody": m.HTML, "StrippedTextReply": "",
			"Tag": "", "Headers": headers, "Attachments": []any{},
		})
		body = raw
		h.Set("Content-Type", "application/json")
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(corpus.Secret(preset))))
	case "mailgun":
		ts := strconv.FormatInt(now.Unix(), 10)
		sum := sha256.Sum256([]byte(m.MessageID + ts))
		token := hex.EncodeToString(sum[:])[:50]
		mac := hmac.New(sha256.New, []byte(corpus.Secret(preset)))
		mac.Write([]byte(ts + token))
		hdrs, _ := json.Marshal([][]string{{"Message-Id", m.MessageID}, {"From", from}, {"To", m.To}, {"X-Mailgun-Incoming", "Yes"}})
		form := url.Values{
			"Message-Id": {m.MessageID}, "sender": {m.From}, "from": {from}, "recipient": {m.To}, "To": {m.To},
			"subject": {m.Subject}, "body-plain": {m.Text}, "body-html": {m.HTML}, "stripped-text": {""},
			"message-headers": {string(hdrs)}, "X-Mailgun-Spf": {mailgunVerdict(m.SPF)}, "X-Mailgun-Dkim-Check-Result": {mailgunVerdict(m.DKIM)},
			"timestamp": {ts}, "token": {token}, "signature": {hex.EncodeToString(mac.Sum(nil))},
		}
		body = []byte(form.Encode())
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	case "sendgrid":
		dkim := "{}"
		if m.DKIM != "" {
			dkim = "{@" + m.dkimDomain() + " : " + m.DKIM + "}"
		}
		headers := "Received: by mx0047p1mdw1.sendgrid.net with SMTP id corpus\nMessage-ID: " + m.MessageID + "\nFrom: " + from + "\nTo: " + m.To + "\nSubject: " + m.Subject + "\n"
		ps := []string{"headers", headers, "dkim", dkim, "to", m.To, "from", from, "subject", m.Subject, "text", m.Text, "html", m.HTML,
			"sender_ip", "209.85.220.41", "envelope", `{"to":["` + m.To + `"],"from":"` + m.From + `"}`, "SPF", m.SPF, "attachments", "0",
			"charsets", `{"to":"UTF-8","html":"UTF-8","subject":"UTF-8","from":"UTF-8","text":"UTF-8"}`}
		var b strings.Builder
		for i := 0; i < len(ps); i += 2 {
			fmt.Fprintf(&b, "--xYzZY\r\nContent-Disposition: form-data; name=%q\r\n\r\n%s\r\n", ps[i], ps[i+1])
		}
		b.WriteString("--xYzZY--\r\n")
		body = []byte(b.String())
		h.Set("Content-Type", "multipart/form-data; boundary=xYzZY")
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(corpus.Secret(preset))))
	default:
		t.Fatalf("no inbound preset %q", preset)
	}
	return &Request{Header: h, Body: body, Now: now}
}

func mailgunVerdict(v string) string {
	if v == "" {
		return ""
	}
	return strings.ToUpper(v[:1]) + v[1:]
}

// gmailReply is words as Gmail sends a reply to the card: the words, then
// "On … wrote:" and the quoted card.
func gmailReply(words, addr string) string {
	return words + "\r\n\r\nOn Wed, Dec 2, 2026 at 6:00 AM Handoff <" + addr + "> wrote:\r\n\r\n> Ada wrote (Acme · web):\r\n> « hello » \r\n> Draft reply: Hello Ada\r\n"
}

func auditsOf(t *testing.T, st *store.Store, action string) []store.AuditEntry {
	t.Helper()
	all, err := st.AuditLog(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, e := range all {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// TestReplyAddress: a reply address names its draft however a mail system
// changes its case; an address of another draft, domain or key, or with
// its MAC changed, names none.
func TestReplyAddress(t *testing.T) {
	f, s := emailFixture(t, "postmark")
	const id = "d01JDZ8X4R7KQ2M9V3B6N0C5T8W-v2"
	addr, ok := ReplyAddress(f.cfg, id)
	if !ok || !strings.HasPrefix(addr, "approvals+"+id+".") || !strings.HasSuffix(addr, "@reply.example.com") {
		t.Fatalf("ReplyAddress = %q, %v", addr, ok)
	}
	local, _, _ := strings.Cut(addr, "@")
	if mac := local[strings.LastIndexByte(local, '.')+1:]; len(mac) != 16 { // 80 bits of base32
		t.Errorf("the MAC %q is %d characters, want 16", mac, len(mac))
	}
	for _, a := range []string{addr, strings.ToLower(addr), strings.ToUpper(addr)} {
		if got, ok := s.draftOf(a); !ok || got != id {
			t.Errorf("draftOf(%q) = %q, %v; want %s", a, got, ok, id)
		}
	}
	other, _ := ReplyAddress(f.cfg, "d01JDZ8X4R7KQ2M9V3B6N0C5T8W")
	otherLocal, _, _ := strings.Cut(other, "@")
	otherMAC := otherLocal[strings.LastIndexByte(otherLocal, '.'):]
	for _, a := range []string{
		strings.Replace(addr, "@reply.example.com", "@evil.example.com", 1),
		strings.Replace(addr, "-v2.", "-v3.", 1),
		"approvals+" + id + otherMAC + "@reply.example.com",
		"approvals+" + id + "@reply.example.com",
		"support+" + local[len("approvals+"):] + "@reply.example.com",
		"",
	} {
		if got, ok := s.draftOf(a); ok {
			t.Errorf("draftOf(%q) = %q, want no draft", a, got)
		}
	}
	f.cfg.Auth.SecretKey = "another key"
	if again, _ := ReplyAddress(f.cfg, id); again == addr {
		t.Error("another secret key gives the same address")
	}
	f.cfg.Auth.SecretKey = ""
	if _, ok := ReplyAddress(f.cfg, id); ok {
		t.Error("an app without a secret key has reply addresses")
	}
	if _, err := New(f.st, f.cfg, Options{}); err == nil || !strings.Contains(err.Error(), "HANDOFF_SECRET_KEY") {
		t.Errorf("New without a secret key: %v, want the sentence naming HANDOFF_SECRET_KEY", err)
	}
}

// TestEmailRepliesDecide, for each inbound preset's real shape: "ok" under
// Gmail's quote approves as dana via email; "No." rejects; other words are
// dana's own reply, sent as written (a corpus text); a sender whose SPF or
// DKIM fails, whose DKIM is another domain's, a stranger, a person of
// another client and a mail to no draft's address decide nothing and are
// audited with their sentence; a wrong signature is a 401.
func TestEmailRepliesDecide(t *testing.T) {
	for _, preset := range config.EmailInbounds {
		t.Run(preset, func(t *testing.T) {
			ctx := context.Background()
			f, s := emailFixture(t, preset)
			n := 0
			draft := func() (store.Draft, string) {
				n++
				d := f.pending(t, "web", fmt.Sprintf("m%d", n), "Hello Ada, the blue one is in stock.")
				addr, _ := ReplyAddress(f.cfg, d.ID)
				return d, addr
			}
			receive := func(m replyMail) string {
				t.Helper()
				ans := s.Receive(ctx, inboundPost(t, preset, m, f.clock.Now()))
				f.clock.Advance(time.Second)
				if ans.Status != http.StatusOK {
					t.Fatalf("Receive = %d %s, want 200", ans.Status, ans.Body)
				}
				return strings.TrimSpace(string(ans.Body))
			}
			pass := func(from, to, text string) replyMail {
				return replyMail{From: from, To: to, Text: text, SPF: "pass", DKIM: "pass", FromDisplay: "Dana Reyes"}
			}

			d1, a1 := draft()
			if got := receive(pass("Dana@ACME.test", a1, gmailReply("ok", a1))); !strings.HasPrefix(got, "Approved by dana") {
				t.Errorf("ok: %q, want approved by dana", got)
			}
			got1, _ := f.st.Draft(d1.ID)
			if got1.Status != store.DraftApproved || got1.Decision.By != "dana" || got1.Decision.Via != ViaEmail || got1.Decision.From != "email dana@acme.test" {
				t.Errorf("after ok: %s %+v", got1.Status, got1.Decision)
			}

			d2, a2 := draft()
			if got := receive(pass("dana@acme.test", a2, "No.\n\n-- \nDana")); !strings.HasPrefix(got, "Rejected by dana") {
				t.Errorf("No.: %q", got)
			}
			if got2, _ := f.st.Draft(d2.ID); got2.Status != store.DraftRejected || got2.Decision.Via != ViaEmail {
				t.Errorf("after No.: %s %+v", got2.Status, got2.Decision)
			}

			// "No, too pushy" rejects, saying why; nothing goes to the customer.
			why := "too pushy — and " + corpus.TextNamed("fish").Body
			d2r, a2r := draft()
			if got := receive(pass("dana@acme.test", a2r, gmailReply("No, "+why, a2r))); !strings.HasPrefix(got, "Rejected by dana") {
				t.Errorf("No, too pushy: %q", got)
			}
			if got, _ := f.st.Draft(d2r.ID); got.Status != store.DraftRejected || got.Decision == nil || got.Decision.Reason != why || got.OutboxID != "" {
				t.Errorf("after No, too pushy: %s %+v outbox %q; want rejected with the reason %q", got.Status, got.Decision, got.OutboxID, why)
			}

			own := corpus.TextNamed("fish").Body
			d3, a3 := draft()
			m3 := pass("dana@acme.test", a3, "")
			m3.HTML = `<div dir="ltr">` + htmlEscapeForTest(own) + `</div><div class="gmail_quote">On Wed wrote:<blockquote>Draft</blockquote></div>`
			if got := receive(m3); !strings.Contains(got, "by dana") {
				t.Errorf("own reply: %q", got)
			}
			var o store.Outbox
			if err := f.st.View(func(tx *store.Tx) error {
				cur, err := tx.DraftByEvent(d3.EventKey)
				if err != nil {
					return err
				}
				if cur.ID == d3.ID || cur.Author != "dana" || cur.Decision == nil || cur.Decision.Via != ViaEmail {
					return fmt.Errorf("the turn's draft is %s by %q (%+v), want dana's own version", cur.ID, cur.Author, cur.Decision)
				}
				o, err = tx.Outbox(cur.OutboxID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if o.Text != own {
				t.Errorf("the reply sent = %q, want dana's words %q", o.Text, own)
			}

			// Refused: nothing decided, audited in one sentence.
			d4, a4 := draft()
			for _, c := range []struct {
				m    replyMail
				want string
			}{
				{replyMail{From: "dana@acme.test", To: a4, Text: "ok", SPF: "fail", DKIM: "pass"}, "could not be verified: SPF did not pass (fail)"},
				{replyMail{From: "dana@acme.test", To: a4, Text: "ok", SPF: "pass", DKIM: "fail"}, "DKIM did not pass"},
				{replyMail{From: "dana@acme.test", To: a4, Text: "ok", SPF: "pass"}, "DKIM did not pass"},
				{replyMail{From: "stranger@else.test", To: a4, Text: "ok", SPF: "pass", DKIM: "pass"}, "is not the email of an active handoff user"},
				{replyMail{From: "gone@acme.test", To: a4, Text: "ok", SPF: "pass", DKIM: "pass"}, "is not the email of an active handoff user"},
				{replyMail{From: "bea@beta.test", To: a4, Text: "ok", SPF: "pass", DKIM: "pass"}, "You (bea) are not an approver of this client's drafts; nothing was decided."},
				{replyMail{From: "dana@acme.test", To: "approvals@reply.example.com", Text: "ok", SPF: "pass", DKIM: "pass"}, "not to the reply address of a draft"},
				{replyMail{From: "dana@acme.test", To: a4, Text: "> ok\n", SPF: "pass", DKIM: "pass"}, "no words above the quoted mail"},
			} {
				before := len(auditsOf(t, f.st, "refuse email reply"))
				if got := receive(c.m); !strings.Contains(got, c.want) {
					t.Errorf("%+v: %q, want %q", c.m, got, c.want)
				}
				if after := auditsOf(t, f.st, "refuse email reply"); len(after) != before+1 || !strings.Contains(after[0].Detail, c.want) {
					t.Errorf("%+v: audit %+v, want one more naming %q", c.m, after, c.want)
				}
			}
			if preset != "mailgun" { // Mailgun names no DKIM domain
				m := pass("dana@acme.test", a4, "ok")
				m.DKIMDomain = "evil.example"
				if got := receive(m); !strings.Contains(got, "DKIM passed only for evil.example, not for acme.test") {
					t.Errorf("DKIM of another domain: %q", got)
				}
			}
			if got4, _ := f.st.Draft(d4.ID); got4.Status != store.DraftPending {
				t.Errorf("after the refusals the draft is %s, want pending", got4.Status)
			}
			// A second ok on a decided draft says whose decision stands.
			if got := receive(pass("dana@acme.test", a1, "yes")); !strings.Contains(got, "already approved") {
				t.Errorf("a second ok: %q", got)
			}

			req := inboundPost(t, preset, pass("dana@acme.test", a4, "ok"), f.clock.Now())
			if preset == "mailgun" {
				req.Body = []byte(strings.Replace(string(req.Body), "signature=", "signature=00", 1))
			} else {
				req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("postmark:wrong")))
			}
			if ans := s.Receive(ctx, req); ans.Status != http.StatusUnauthorized {
				t.Errorf("a wrong signature: %d %s, want 401", ans.Status, ans.Body)
			}
			if preset == "mailgun" { // its token is taken once
				req := inboundPost(t, preset, pass("dana@acme.test", a4, "ok"), f.clock.Now())
				if ans := s.Receive(ctx, req); ans.Status != http.StatusOK {
					t.Fatalf("first: %d %s", ans.Status, ans.Body)
				}
				ans := s.Receive(ctx, req)
				if !strings.Contains(string(ans.Body), "already received") {
					t.Errorf("the same signed post again: %d %s", ans.Status, ans.Body)
				}
			}
		})
	}
}

// TestEmailAndDashboardAtOnce: an email reply and the dashboard's approval
// of the same draft at once give one outbox row: "ok" against Approve, and
// a person's own words (a new version) against Approve.
func TestEmailAndDashboardAtOnce(t *testing.T) {
	ctx := context.Background()
	f, s := emailFixture(t, "postmark")
	rv := review.New(f.st, f.cfg)
	for i := range 16 {
		d := f.pending(t, "web", fmt.Sprintf("race%d", i), "Hello Ada")
		addr, _ := ReplyAddress(f.cfg, d.ID)
		words := "ok"
		if i%2 == 1 {
			words = corpus.TextNamed("emoji").Body
		}
		req := inboundPost(t, "postmark", replyMail{From: "dana@acme.test", To: addr, Text: gmailReply(words, addr), SPF: "pass", DKIM: "pass"}, f.clock.Now())
		var wg sync.WaitGroup
		var mailAns Answer
		var dashErr error
		wg.Add(2)
		go func() { defer wg.Done(); mailAns = s.Receive(ctx, req) }()
		go func() {
			defer wg.Done()
			_, dashErr = rv.Approve(ctx, d.ID, store.Decision{By: "root", At: f.clock.Now()})
		}()
		wg.Wait()
		if mailAns.Status != http.StatusOK {
			t.Fatalf("mail: %d %s", mailAns.Status, mailAns.Body)
		}
		rows := 0
		if err := f.st.View(func(tx *store.Tx) error {
			for _, id := range []string{d.ID, d.ID + "-v2"} {
				if _, err := tx.Outbox(store.OutboxID(d.ConversationID, id)); err == nil {
					rows++
				} else if !errors.Is(err, store.ErrNotFound) {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if rows != 1 {
			t.Fatalf("race %d (%q): %d outbox rows (mail said %q, dashboard %v), want 1", i, words, rows, mailAns.Body, dashErr)
		}
	}
}
