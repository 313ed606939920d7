package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// Email: a draft is decided by a reply to its reply address,
//
//	<local>+<draft id>.<MAC>@<domain>     approvals+d01JD….k3v7q2m9x4c8b6na@reply.example.com
//
// whose MAC is 80 bits of HMAC-SHA256 under a key derived from the app's
// secret key (auth.secret_key_env), base32 in lower case, so an address
// names one draft and no one can make one for another. The digests carry
// each draft's address; the clients of approvals.email.to also get a mail
// per draft (Post) whose Reply-To it is. The inbound provider posts the
// reply to POST /surfaces/email in its preset's shape (Postmark's JSON,
// Mailgun's form, SendGrid's Inbound Parse), verified as a channel of that
// preset is (basic auth, or Mailgun's signature with its token spent
// once). A reply is taken only when the provider's SPF and DKIM verdicts
// both pass (DKIM for the From address's domain, where the provider names
// it) and From is an active handoff user allowed on the draft's client;
// its words above the quoted history (ReplyText) say ok/yes/approve,
// no/reject, or are the person's own reply, sent as it is (Write). Every
// decision goes through Decide with Via "email". A refusal is audited, and
// answered by mail (Provider) once the sender is verified; never before,
// so a forged From gets no mail.
//
// Never a GET link that acts: a mail's links only open the dashboard.

func init() { register(ViaEmail, openEmail) }

type emailSurface struct {
	a      *Approvals
	cfg    *config.EmailSurface
	key    []byte
	verify hook.Verifier
	send   provider.Provider // nil: no per-draft mail, refusals audited only
}

// maxMailBody bounds an inbound reply's request: a mail with a quoted
// card and a phone's signature image fits many times over.
const maxMailBody = 10 << 20

// MaxBody is the email surface's request limit (web's bodyLimiter).
func (s *emailSurface) MaxBody() int64 { return maxMailBody }

func openEmail(a *Approvals) (Surface, bool, error) {
	c := a.cfg.Approvals.Mail.Email
	if c == nil {
		return nil, false, nil
	}
	key, err := replyKey(a.cfg)
	if err != nil {
		return nil, false, err
	}
	preset, ok := hook.LookupPreset(c.Inbound)
	if !ok || c.Secret == "" {
		return nil, false, fmt.Errorf("approvals.email needs its inbound provider (postmark, mailgun or sendgrid) and its secret")
	}
	v, err := hook.NewVerifier(hook.Signing{Scheme: preset.Scheme, Secrets: []string{c.Secret}})
	if err != nil {
		return nil, false, err
	}
	s := &emailSurface{a: a, cfg: c, key: key, verify: v}
	if c.Provider != "" {
		if s.send, ok = a.provs[c.Provider]; !ok {
			return nil, false, fmt.Errorf("approvals.email.provider %q is not among the providers opened", c.Provider)
		}
	}
	return s, true, nil
}

// replyKey is the reply addresses' MAC key: derived from the app's secret
// key, so that it is none of the secret's other uses.
func replyKey(cfg *config.Config) ([]byte, error) {
	if cfg.Auth.SecretKey == "" {
		return nil, errors.New("approvals.email signs its reply addresses with the app's secret key: set HANDOFF_SECRET_KEY (or the variable auth.secret_key_env names)")
	}
	m := hmac.New(sha256.New, []byte(cfg.Auth.SecretKey))
	m.Write([]byte("handoff approvals.email reply addresses"))
	return m.Sum(nil), nil
}

// replyMACBytes is a reply address's MAC: 80 bits.
const replyMACBytes = 10

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// canonDraft is a draft id as stored, from an address whose case a mail
// system may have changed: "d", the event's ULID in upper case, then
// "-v<n>" for a later version.
func canonDraft(id string) string {
	l := strings.ToLower(id)
	if !strings.HasPrefix(l, "d") {
		return id
	}
	body, ver, found := strings.Cut(l[1:], "-v")
	out := "d" + strings.ToUpper(body)
	if found {
		out += "-v" + ver
	}
	return out
}

func replyMAC(key []byte, draft string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(canonDraft(draft)))
	return lowerBase32.EncodeToString(m.Sum(nil)[:replyMACBytes])
}

// ReplyAddress is the reply address of draft under cfg's approvals.email;
// false when the email surface is not configured (or the app has no
// secret key to sign it with).
func ReplyAddress(cfg *config.Config, draft string) (string, bool) {
	c := cfg.Approvals.Mail.Email
	if c == nil {
		return "", false
	}
	key, err := replyKey(cfg)
	if err != nil {
		return "", false
	}
	return replyAddress(c, key, draft), true
}

func replyAddress(c *config.EmailSurface, key []byte, draft string) string {
	return c.Local + "+" + draft + "." + replyMAC(key, draft) + "@" + c.Domain
}

// draftOf is the draft an address is the reply address of; false for any
// other address (another domain, no MAC, a MAC that does not match).
func (s *emailSurface) draftOf(addr string) (string, bool) {
	local, domain, ok := strings.Cut(strings.TrimSpace(addr), "@")
	if !ok || !strings.EqualFold(domain, s.cfg.Domain) {
		return "", false
	}
	prefix := s.cfg.Local + "+"
	if len(local) <= len(prefix) || !strings.EqualFold(local[:len(prefix)], prefix) {
		return "", false
	}
	tag := local[len(prefix):]
	i := strings.LastIndexByte(tag, '.')
	if i <= 0 {
		return "", false
	}
	draft, mac := canonDraft(tag[:i]), strings.ToLower(tag[i+1:])
	if !hmac.Equal([]byte(mac), []byte(replyMAC(s.key, draft))) {
		return "", false
	}
	return draft, true
}

func (s *emailSurface) Name() string { return ViaEmail }

// Chat is the address a client's drafts are mailed to (approvals.email.to);
// none without a provider to send them.
func (s *emailSurface) Chat(client string) (string, bool) {
	if s.send == nil {
		return "", false
	}
	to, ok := s.cfg.To[client]
	return to, ok
}

// Post mails the card v to chat, its Reply-To the draft's reply address,
// through the smtp provider; the ref is the mail's Message-ID.
func (s *emailSurface) Post(ctx context.Context, chat string, v View) (string, error) {
	if s.send == nil {
		return "", errors.New("approvals.email has no provider to send its mails")
	}
	id, err := s.send.Send(ctx, provider.Message{
		Ref: "approval:" + v.Draft.ID, To: chat, CorrelationID: v.Draft.CorrelationID,
		Subject:      clip(fmt.Sprintf("Approve a reply to %s (%s · %s)", oneLine(v.Customer), v.ClientName, v.Channel), 180),
		Text:         s.cardText(v),
		ReplyAddress: replyAddress(s.cfg, s.key, v.Draft.ID),
	})
	if err != nil {
		return "", fmt.Errorf("email card of draft %s: %w", v.Draft.ID, err)
	}
	return id, nil
}

// cardText is the per-draft mail: the customer's messages, the draft, and
// what a reply does.
func (s *emailSurface) cardText(v View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s wrote (%s · %s):\n", v.Customer, v.ClientName, v.Channel)
	for _, m := range v.Messages {
		b.WriteString("\n  « " + strings.ReplaceAll(clip(m, 2000), "\n", "\n    ") + " »\n")
	}
	b.WriteString("\nDraft reply:\n\n" + v.Text + "\n\n")
	b.WriteString("Answer this mail (only your words above the quoted mail are read):\n")
	b.WriteString("  ok, yes or approve — the draft is sent as written\n")
	b.WriteString("  no or reject — it is rejected; \"No, too pushy\" rejects it saying why\n")
	b.WriteString("  anything else — your text is sent to " + oneLine(v.Customer) + " instead, approved by you\n")
	if base := s.a.cfg.BaseURL; base != "" {
		fmt.Fprintf(&b, "\nOr open it in the dashboard: %s/drafts?%s\n", base, url.Values{"id": {v.Draft.ID}}.Encode())
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// inboundMail is what an inbound provider's post says of one mail.
type inboundMail struct {
	From       string   // the From header's address
	To         []string // every recipient named (envelope and headers)
	Text, HTML string
	Subject    string
	MessageID  string
	// SPF and DKIM are the provider's verdicts; DKIMDomains the domains
	// it names a passing DKIM signature for (nil: it names none).
	SPF, DKIM   string
	DKIMDomains []string
}

var (
	authResultsDKIM = regexp.MustCompile(`(?i)\bdkim=(\w+)(?:[^;]*?\bheader\.(?:d|i)=@?([A-Za-z0-9.-]+))?`)
	authResultsSPF  = regexp.MustCompile(`(?i)\bspf=(\w+)`)
	sendgridDKIM    = regexp.MustCompile(`@([A-Za-z0-9.-]+)\s*:\s*(\w+)`)
)

// readInbound reads a mail from the inbound provider's post p.
func (s *emailSurface) readInbound(p *hook.Payload) inboundMail {
	f := func(source string) string { v, _, _ := p.Field(source); return v }
	var m inboundMail
	var recipients []string
	switch s.cfg.Inbound {
	case "postmark":
		m.From = f("/FromFull/Email | /From")
		recipients = []string{f("/OriginalRecipient"), f("/To"), f("/Cc"), f("/Bcc")}
		m.Text, m.HTML, m.Subject = f("/TextBody"), f("/HtmlBody"), f("/Subject")
		m.MessageID = f("/Headers/[Name=Message-ID]/Value | /Headers/[Name=Message-Id]/Value")
		spf := f("/Headers/[Name=Received-SPF]/Value")
		auth := f("/Headers/[Name=Authentication-Results]/Value")
		tests := "," + strings.ToUpper(strings.ReplaceAll(f("/Headers/[Name=X-Spam-Tests]/Value"), " ", "")) + ","
		m.SPF, _, _ = strings.Cut(strings.TrimSpace(spf), " ")
		if r := authResultsSPF.FindStringSubmatch(auth); r != nil && m.SPF == "" {
			m.SPF = r[1]
		}
		if m.SPF == "" && strings.Contains(tests, ",SPF_PASS,") {
			m.SPF = "pass"
		}
		for _, r := range authResultsDKIM.FindAllStringSubmatch(auth, -1) {
			if strings.EqualFold(r[1], "pass") {
				m.DKIM = "pass"
				if r[2] != "" {
					m.DKIMDomains = append(m.DKIMDomains, r[2])
				}
			} else if m.DKIM == "" {
				m.DKIM = r[1]
			}
		}
		if m.DKIM != "pass" && strings.Contains(tests, ",DKIM_VALID_AU,") {
			// SpamAssassin's: a valid signature of the author's (From's) domain.
			m.DKIM, m.DKIMDomains = "pass", nil
		}
	case "mailgun":
		m.From = f("/from")
		recipients = []string{f("/recipient"), f("/To | mailheader:To@/message-headers"), f("/Cc | mailheader:Cc@/message-headers")}
		m.Text, m.HTML, m.Subject = f("/body-plain"), f("/body-html"), f("/subject")
		m.MessageID = f("/Message-Id | mailheader:Message-Id@/message-headers")
		m.SPF = f("/X-Mailgun-Spf | mailheader:X-Mailgun-Spf@/message-headers")
		m.DKIM = f("/X-Mailgun-Dkim-Check-Result | mailheader:X-Mailgun-Dkim-Check-Result@/message-headers")
	case "sendgrid":
		m.From = f("/from")
		recipients = []string{f("/to"), f("/cc")}
		var env struct {
			To []string `json:"to"`
		}
		if json.Unmarshal([]byte(f("/envelope")), &env) == nil {
			recipients = append(recipients, env.To...)
		}
		m.Text, m.HTML, m.Subject = f("/text"), f("/html"), f("/subject")
		m.MessageID = f("mailheader:Message-ID@/headers")
		m.SPF = f("/SPF")
		for _, r := range sendgridDKIM.FindAllStringSubmatch(f("/dkim"), -1) {
			if strings.EqualFold(r[2], "pass") {
				m.DKIM = "pass"
				m.DKIMDomains = append(m.DKIMDomains, r[1])
			} else if m.DKIM == "" {
				m.DKIM = r[2]
			}
		}
		if m.DKIMDomains == nil && m.DKIM == "pass" {
			m.DKIM = "" // a pass names its domain; one that names none is not read as one
		}
	}
	if a, err := mail.ParseAddress(m.From); err == nil {
		m.From = a.Address
	} else {
		m.From = ""
	}
	for _, r := range recipients {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if as, err := mail.ParseAddressList(r); err == nil {
			for _, a := range as {
				m.To = append(m.To, a.Address)
			}
		} else {
			m.To = append(m.To, strings.Trim(r, "<> "))
		}
	}
	return m
}

// aligned reports whether domain is from's domain or one it is under.
func aligned(domain, from string) bool {
	domain, from = strings.ToLower(strings.TrimSuffix(domain, ".")), strings.ToLower(from)
	return domain != "" && (from == domain || strings.HasSuffix(from, "."+domain))
}

// authenticated says why m's sender is not verified; "" when SPF and DKIM
// both pass (DKIM for From's domain, where the provider names the domain).
func authenticated(m inboundMail) string {
	_, fromDomain, _ := strings.Cut(m.From, "@")
	var why []string
	if !strings.EqualFold(strings.TrimSpace(m.SPF), "pass") {
		why = append(why, fmt.Sprintf("SPF did not pass (%s)", firstOf(strings.ToLower(m.SPF), "no verdict")))
	}
	dkim := strings.EqualFold(strings.TrimSpace(m.DKIM), "pass")
	if dkim && m.DKIMDomains != nil {
		dkim = false
		for _, d := range m.DKIMDomains {
			dkim = dkim || aligned(d, fromDomain)
		}
		if !dkim {
			why = append(why, fmt.Sprintf("DKIM passed only for %s, not for %s", strings.Join(m.DKIMDomains, ", "), fromDomain))
		}
	} else if !dkim {
		why = append(why, fmt.Sprintf("DKIM did not pass (%s)", firstOf(strings.ToLower(m.DKIM), "no verdict")))
	}
	return strings.Join(why, " and ")
}

// Receive takes one inbound mail from the provider: always 200 once it is
// verified and read (a provider resends anything else), whatever is
// decided or refused.
func (s *emailSurface) Receive(ctx context.Context, r *Request) Answer {
	hr := &hook.Request{Header: r.Header, Body: r.Body, Now: r.Now}
	if ov, ok := s.verify.(hook.OnceVerifier); ok {
		o, err := ov.VerifyOnce(hr)
		if err != nil {
			return textAnswer(http.StatusUnauthorized, hookSentence(err))
		}
		fp := sha256.Sum256(r.Body)
		first, err := s.a.st.SpendNonce(ctx, store.Nonce{Scope: "surface:email", Value: o.Value, SignedAt: o.SignedAt, Keep: o.Keep, Request: fp[:]}, r.Now)
		if err != nil {
			s.a.log.Error("approvals: email: remember the signature's token", slog.Any("err", err))
			return textAnswer(http.StatusServiceUnavailable, "the request could not be checked against replays; send it again")
		}
		if first != nil {
			return textAnswer(http.StatusOK, "this signed request was already received; it is taken once")
		}
	} else if err := s.verify.Verify(hr); err != nil {
		return textAnswer(http.StatusUnauthorized, hookSentence(err))
	}
	p, err := hook.Parse(r.Header.Get("Content-Type"), r.Body, r.Header)
	if err != nil {
		return textAnswer(http.StatusBadRequest, "the body is not a "+s.cfg.Inbound+" inbound post")
	}
	m := s.readInbound(p)
	return textAnswer(http.StatusOK, s.take(ctx, m, r.Now))
}

// take decides what the verified mail m asks, and returns the sentence
// said of it (audited when a refusal; mailed back once the sender is).
func (s *emailSurface) take(ctx context.Context, m inboundMail, now time.Time) string {
	draft := ""
	for _, to := range m.To {
		if d, ok := s.draftOf(to); ok {
			draft = d
			break
		}
	}
	from := "email " + strings.ToLower(firstOf(m.From, "(no From address)"))
	if draft == "" {
		return s.refused(ctx, m, "", "", false, "The mail is not to the reply address of a draft (or its address was changed); nothing was decided.", now)
	}
	if m.From == "" {
		return s.refused(ctx, m, draft, "", false, "The mail has no From address that can be read; nothing was decided.", now)
	}
	if why := authenticated(m); why != "" {
		return s.refused(ctx, m, draft, "", false, "The reply's sender "+m.From+" could not be verified: "+why+"; nothing was decided.", now)
	}
	person, err := s.a.Person(ViaEmail, nil, m.From, m.From)
	if err != nil {
		return s.refused(ctx, m, draft, "", true, "The address "+m.From+" is not the email of an active handoff user; nothing was decided.", now)
	}
	words := ReplyText(m.Text, m.HTML)
	v, ok := ReplyVerdict(words)
	if !ok {
		return s.refused(ctx, m, draft, person.Name, true, "Your reply has no words above the quoted mail: answer ok to approve, no to reject, or write the reply to send.", now)
	}
	out, err := s.a.Decide(ctx, Ask{Via: ViaEmail, Draft: draft, Action: v.Action, Text: v.Text, Reason: v.Reason, Person: person, From: from})
	if err != nil {
		var refusal *Refusal
		if !errors.As(err, &refusal) {
			s.a.log.Error("approvals: email decision", slog.Any("err", err))
		}
		return s.refused(ctx, m, draft, person.Name, true, Sentence(err), now)
	}
	if !out.Decided {
		return s.refused(ctx, m, draft, person.Name, true, out.Sentence, now)
	}
	return out.Sentence
}

// refused audits a reply that decided nothing and, when the sender is
// verified (answer) and a provider is set, answers it by mail with the
// sentence, after the request's own answer.
func (s *emailSurface) refused(ctx context.Context, m inboundMail, draft, who string, answer bool, sentence string, now time.Time) string {
	if err := s.a.st.Audit(ctx, store.AuditEntry{
		At: now, Who: firstOf(who, "email "+firstOf(m.From, "(unknown sender)")), From: "email " + firstOf(m.From, "(unknown sender)"),
		Action: "refuse email reply", Target: draft, Detail: sentence,
	}); err != nil {
		s.a.log.Error("approvals: email: audit a refused reply", slog.Any("err", err))
	}
	if !answer || s.send == nil {
		return sentence
	}
	sum := sha256.Sum256([]byte(m.MessageID + "\x00" + m.From + "\x00" + draft + "\x00" + sentence))
	subject := firstOf(m.Subject, "your reply")
	if !strings.HasPrefix(strings.ToLower(subject), "re:") {
		subject = "Re: " + subject
	}
	msg := provider.Message{
		Ref: "approval-answer:" + hex.EncodeToString(sum[:8]), To: m.From, Subject: clip(oneLine(subject), 180),
		InReplyTo: m.MessageID, Text: sentence + "\n", ReplyAddress: "handoff-noreply@" + s.cfg.Domain,
	}
	if draft != "" {
		msg.ReplyAddress = replyAddress(s.cfg, s.key, draft) // answering again goes to the draft
	}
	s.a.Later(30*time.Second, func(ctx context.Context) error {
		_, err := s.send.Send(ctx, msg)
		return err
	})
	return sentence
}
