package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/provider/kinds"
)

// smtpBusy is how long a 4xx refusal waits: SMTP has no Retry-After.
const smtpBusy = time.Minute

func init() { register(kinds.SMTP, newSMTP) }

// SMTP sends an email reply with the standard library's net/smtp client,
// which never retries by itself: one dial, one MAIL/RCPT/DATA. The
// Message-ID is derived from our reference, so the message can be found
// (lookup_url) and receipts joined to the row. Where the send broke decides
// what is known:
//   - before the end of DATA (dial, greeting, TLS, AUTH, MAIL, RCPT, the
//     body): no server delivers an unfinished message: not sent, or a
//     refusal (5xx permanent, 4xx later);
//   - the answer to DATA's final dot: 250 sent, 5xx permanent, 4xx later;
//     no answer (cut, timeout): unknown.
type SMTP struct {
	name      string
	host      string
	port      int
	mode      string // starttls, tls, none
	username  string // never formatted
	password  string // never formatted
	from      *mail.Address
	domain    string // of From: the right side of every Message-ID
	timeout   time.Duration
	lookupURL string
	settle    time.Duration
	rate      float64
	burst     int
	w         *wire // for the lookup
	now       func() time.Time
	tlsConfig *tls.Config
}

func newSMTP(cfg kinds.Provider, d Deps) (Provider, error) {
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("smtp: from %q is not a mail address", cfg.From)
	}
	_, domain, _ := strings.Cut(from.Address, "@")
	if cfg.Host == "" || domain == "" {
		return nil, errors.New("smtp: host and a from address with a domain are required")
	}
	mode, port := cfg.TLS, cfg.Port
	if mode == "" {
		mode = "starttls"
	}
	if port == 0 {
		port = map[string]int{"starttls": 587, "tls": 465, "none": 25}[mode]
	}
	w := newWire(cfg.Name, cfg.Timeout, d.Now, cfg.Rate, cfg.Burst)
	return &SMTP{
		name: cfg.Name, host: cfg.Host, port: port, mode: mode, username: cfg.Username, password: cfg.Password,
		from: from, domain: domain, timeout: w.timeout, lookupURL: cfg.LookupURL, settle: cfg.LookupSettle,
		rate: cfg.Rate, burst: cfg.Burst, w: w, now: w.now, tlsConfig: &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12},
	}, nil
}

// Capabilities: lookup when lookup_url is set; receipts through a mail
// service's events.
func (s *SMTP) Capabilities() Capabilities {
	return Capabilities{Lookup: s.lookupURL != "", Timeout: s.timeout, LookupSettle: s.settle, Receipts: true, Threads: true, Rate: s.rate, Burst: s.burst}
}

// Hold holds a send to the provider's rate.
func (s *SMTP) Hold(ref string, now time.Time) time.Duration { return s.w.Hold(ref, now) }

// MessageID is the Message-ID (without angle brackets) of the email for
// reference ref: "handoff." and ref with every byte outside [A-Za-z0-9.-_]
// written =XX, "@" the From domain. The same ref always gives the same id.
func MessageID(ref, domain string) string {
	var b strings.Builder
	b.WriteString("handoff.")
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	b.WriteString("@")
	b.WriteString(domain)
	return b.String()
}

// compose builds the email for m.
func (s *SMTP) compose(m Message, to *mail.Address, msgID string) []byte {
	subject := m.Subject
	switch {
	case m.ReplyAddress != "" && subject != "":
	case subject == "":
		subject = "Re: your message"
	case !strings.HasPrefix(strings.ToLower(subject), "re:"):
		subject = "Re: " + subject
	}
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", s.from.String())
	h("To", to.String())
	h("Subject", mime.QEncoding.Encode("utf-8", subject))
	h("Date", s.now().UTC().Format(time.RFC1123Z))
	h("Message-ID", "<"+msgID+">")
	if a, err := mail.ParseAddress(m.ReplyAddress); err == nil && headerSafe(a.Address) {
		h("Reply-To", "<"+a.Address+">")
	}
	if m.InReplyTo != "" && headerSafe(m.InReplyTo) && !strings.ContainsAny(m.InReplyTo, "\r\n") {
		h("In-Reply-To", "<"+strings.Trim(m.InReplyTo, "<>")+">")
		h("References", "<"+strings.Trim(m.InReplyTo, "<>")+">")
	}
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n", "\r\n")))
	_ = qp.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// Send delivers m in one SMTP session.
func (s *SMTP) Send(ctx context.Context, m Message) (string, error) {
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return "", &Permanent{Err: fmt.Errorf("%s: %q is not an email address", s.name, m.To)}
	}
	msgID := MessageID(m.Ref, s.domain)
	msg := s.compose(m, to, msgID)

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	addr := net.JoinHostPort(s.host, strconv.Itoa(s.port))
	var conn net.Conn
	dialer := &net.Dialer{}
	if s.mode == "tls" {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: s.tlsConfig}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", &NotSent{Err: fmt.Errorf("%s: connect to %s: %w", s.name, addr, err)}
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		_ = conn.Close()
		return "", s.before("greeting", err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return "", s.before("EHLO", err)
	}
	if s.mode == "starttls" {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return "", &Permanent{Err: fmt.Errorf("%s: %s does not offer STARTTLS (set tls: none to send in clear text)", s.name, addr)}
		}
		if err := c.StartTLS(s.tlsConfig); err != nil {
			return "", s.before("STARTTLS", err)
		}
	}
	if s.username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.username, s.password, s.host)); err != nil {
			var tp *textproto.Error
			if !errors.As(err, &tp) {
				// net/smtp refuses to send a password in clear text to a
				// remote host: no resend can change that.
				return "", &Permanent{Err: fmt.Errorf("%s: AUTH: %w (use tls: starttls or tls)", s.name, err)}
			}
			return "", s.refusal("AUTH", tp)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return "", s.before("MAIL FROM", err)
	}
	if err := c.Rcpt(to.Address); err != nil {
		return "", s.before("RCPT TO", err)
	}
	wc, err := c.Data()
	if err != nil {
		return "", s.before("DATA", err)
	}
	if _, err := wc.Write(msg); err != nil {
		// The final dot was never written: no server delivers this.
		return "", s.before("the message body", err)
	}
	// Close writes the final dot and reads the answer: from here on the
	// server may have accepted the message.
	if err := wc.Close(); err != nil {
		var tp *textproto.Error
		if errors.As(err, &tp) {
			return "", s.refusal("the end of DATA", tp)
		}
		return "", &Ambiguous{Err: fmt.Errorf("%s: no answer to the end of DATA: %w", s.name, err)}
	}
	_ = c.Quit() // accepted; a failed goodbye changes nothing
	return msgID, nil
}

// before judges an error before the message was complete: a refusal by
// its code, anything else not sent.
func (s *SMTP) before(step string, err error) error {
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return s.refusal(step, tp)
	}
	return &NotSent{Err: fmt.Errorf("%s: %s: %w", s.name, step, err)}
}

// refusal: 5xx permanent, 4xx not accepted for now.
func (s *SMTP) refusal(step string, tp *textproto.Error) error {
	err := fmt.Errorf("%s: the server refused %s: %d %s", s.name, step, tp.Code, tp.Msg)
	if tp.Code >= 500 {
		return &Permanent{Status: tp.Code, Err: err}
	}
	// 421/450/451/452: the server is busy or limiting us; back off.
	return &NotSent{Err: err, RetryAfter: smtpBusy}
}

// Lookup searches lookup_url for the message's Message-ID. {ref} becomes
// the quoted Message-ID, so a Mailpit-style search
// (/api/v1/search?query=message-id:{ref}) finds it; the answer counts when
// it is 200 with messages_count, or 404.
func (s *SMTP) Lookup(ctx context.Context, ref, correlationID string) (string, bool, error) {
	if s.lookupURL == "" {
		return "", false, ErrNoLookup
	}
	msgID := MessageID(ref, s.domain)
	u := strings.ReplaceAll(s.lookupURL, "{ref}", url.QueryEscape(`"`+msgID+`"`))
	hdr := http.Header{"Accept": {"application/json"}}
	if correlationID != "" && headerSafe(correlationID) {
		hdr.Set("X-Correlation-ID", correlationID)
	}
	a, err := s.w.get(ctx, u, hdr)
	if err != nil {
		return "", false, err
	}
	switch a.Status {
	case http.StatusOK:
		var ans struct {
			Count    *int `json:"messages_count"`
			Messages []struct {
				MessageID string `json:"MessageID"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(a.Body, &ans); err != nil || ans.Count == nil {
			return "", false, fmt.Errorf("%s: lookup %s: a 200 without messages_count: %s", s.name, ref, short(a.Body))
		}
		for _, m := range ans.Messages {
			if m.MessageID == msgID {
				return msgID, true, nil
			}
		}
		return "", false, nil
	case http.StatusNotFound:
		return "", false, nil
	}
	return "", false, fmt.Errorf("%s: lookup %s: answered %d: %s", s.name, ref, a.Status, short(a.Body))
}
