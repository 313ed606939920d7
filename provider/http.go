package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/webhook"
)

func init() { register(kinds.HTTP, newHTTP) }

const (
	// defaultHTTPTimeout matches config's default, for providers built
	// without going through config.Load (tests, Open with a bare struct).
	defaultHTTPTimeout = 10 * time.Second
	// maxAnswer bounds what we read of a provider's answer: an id fits in
	// far less, and a misbehaving server must not exhaust our memory.
	maxAnswer = 1 << 20
	// maxExcerpt bounds how much of a refusal's body goes into the error,
	// which ends up in logs and on the reconciliation page.
	maxExcerpt = 300
	// drainLimit is how much of an unread body we discard so the
	// connection can be reused; past it, closing is cheaper.
	drainLimit = 64 << 10
	userAgent  = "handoff"
)

// HTTP is the outbound HTTP call of the spec: one POST per message, keyed
// by our reference so a receiver can deduplicate resends. By default the
// body is the JSON of Message; body: form, fields, auth_env, answer_id and
// success fit it to a receiver with its own shape.
type HTTP struct {
	name      string
	url       string
	lookupURL string
	secret    string // never formatted into an error or a log
	auth      string // the Authorization header; never formatted either
	form      bool
	fields    map[string]string
	answerID  string
	successP  string
	successV  string
	idemKey   bool
	timeout   time.Duration
	settle    time.Duration // lookup_settle
	rate      float64
	burst     int
	now       func() time.Time
	w         *wire
	client    *http.Client
}

func newHTTP(cfg kinds.Provider, d Deps) (Provider, error) {
	if err := checkURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("http: url: %w", err)
	}
	if cfg.LookupURL != "" {
		if err := checkURL(strings.ReplaceAll(cfg.LookupURL, "{ref}", "x")); err != nil {
			return nil, fmt.Errorf("http: lookup_url: %w", err)
		}
	}
	if cfg.SigningSecret != "" {
		// Signing once now turns a malformed secret into a startup error
		// instead of a failure on every send. webhook's errors never
		// quote the secret.
		if _, err := webhook.Sign(cfg.SigningSecret, "probe", time.Unix(0, 0), nil); err != nil {
			return nil, fmt.Errorf("http: signing secret: %w", err)
		}
	}
	if !headerSafe(cfg.Auth) {
		return nil, errors.New("http: the value of auth_env has control characters and cannot be a header")
	}
	w := newWire(cfg.Name, cfg.Timeout, d.Now, cfg.Rate, cfg.Burst)
	answerID := cfg.AnswerID
	if answerID == "" {
		answerID = "/id"
	}
	return &HTTP{
		name:      cfg.Name,
		url:       cfg.URL,
		lookupURL: cfg.LookupURL,
		secret:    cfg.SigningSecret,
		auth:      cfg.Auth,
		form:      cfg.Body == "form",
		fields:    cfg.Fields,
		answerID:  answerID,
		successP:  cfg.SuccessPointer,
		successV:  cfg.SuccessValue,
		idemKey:   cfg.SupportsIdempotencyKey,
		timeout:   w.timeout,
		now:       w.now,
		settle:    cfg.LookupSettle,
		rate:      cfg.Rate,
		burst:     cfg.Burst,
		w:         w,
		client:    w.client,
	}, nil
}

// checkRedirect never follows a redirect. A POST would replay the message
// to a URL nobody configured (or, for 301-303, turn into a GET and lose
// it), so the 3xx itself is returned and judged permanent. A lookup's GET
// carries the provider's credentials and decides whether a message was
// sent: a 3xx answers neither found nor not found, so it is "cannot tell"
// and the lookup is asked again later, never of a host nobody configured.
func checkRedirect(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an absolute http(s) URL")
	}
	return nil
}

// Send posts m once. The same m.Ref goes out as Idempotency-Key and
// webhook-id on every resend, so a receiver that deduplicates on either
// delivers at most once however often an ambiguous send is retried.
func (h *HTTP) Send(ctx context.Context, m Message) (string, error) {
	// Nothing has been sent yet, so these are permanent rather than
	// ambiguous: no resend can fix a message that cannot be keyed.
	if m.Ref == "" {
		return "", &Permanent{Err: fmt.Errorf("%s: the message has no reference to key it by", h.name)}
	}
	if !headerSafe(m.Ref) || !headerSafe(m.CorrelationID) {
		return "", &Permanent{Err: fmt.Errorf("%s: the reference or correlation id has control characters", h.name)}
	}
	body, contentType, err := h.encode(m)
	if err != nil {
		return "", &Permanent{Err: fmt.Errorf("%s: encode message: %w", h.name, err)}
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", contentType)
	hdr.Set("Accept", "application/json")
	hdr.Set("Idempotency-Key", m.Ref)
	if m.CorrelationID != "" {
		hdr.Set("X-Correlation-ID", m.CorrelationID)
	}
	if h.auth != "" {
		hdr.Set("Authorization", h.auth)
	}
	if h.secret != "" {
		ts := h.now()
		sig, err := webhook.Sign(h.secret, m.Ref, ts, body)
		if err != nil {
			return "", &Permanent{Err: fmt.Errorf("%s: sign: %w", h.name, err)}
		}
		hdr.Set("webhook-id", m.Ref)
		hdr.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		hdr.Set("webhook-signature", sig)
	}
	a, err := h.w.post(ctx, h.url, hdr, body)
	if err != nil {
		return "", err
	}
	switch c := a.Status; {
	case c >= 200 && c < 300:
		if a.ReadErr != nil {
			// The provider accepted, but its id was lost on the way; a
			// resend with the same key or a lookup recovers it.
			return "", h.w.lostID(a, "body")
		}
		if h.successP != "" {
			// An API that answers 200 with an error: the rule decides.
			if v, _ := pointer(a.Body, h.successP); v != h.successV {
				return "", &Permanent{Status: c, Err: fmt.Errorf("%s: POST answered %d but %s is %q, not %q: %s", h.name, c, h.successP, v, h.successV, short(a.Body))}
			}
		}
		// A 2xx is a delivery whatever the body says; the id is a bonus
		// for the operator, so an answer without one is still sent.
		id, _ := pointer(a.Body, h.answerID)
		return id, nil
	case c >= 300 && c < 400:
		return "", &Permanent{Status: c, Err: fmt.Errorf("%s: POST answered %d %s (redirected to %q; fix the url): %s",
			h.name, c, http.StatusText(c), a.Header.Get("Location"), short(a.Body))}
	case c == http.StatusRequestTimeout || c == http.StatusConflict || c == http.StatusTooManyRequests || c >= 500:
		return "", &Ambiguous{Status: c, RetryAfter: h.w.retryAfter(a),
			Err: fmt.Errorf("%s: POST answered %d %s: %s", h.name, c, http.StatusText(c), short(a.Body))}
	case c >= 400:
		return "", &Permanent{Status: c, Err: fmt.Errorf("%s: POST answered %d %s: %s", h.name, c, http.StatusText(c), short(a.Body))}
	default:
		// An unexpected 1xx or non-standard code says nothing about delivery.
		return "", &Ambiguous{Status: c, Err: fmt.Errorf("%s: POST answered %d", h.name, c)}
	}
}

// encode builds the body: Message's JSON, or a form, with each field
// under the name the receiver wants.
func (h *HTTP) encode(m Message) ([]byte, string, error) {
	vals := [][2]string{{"client_ref", m.Ref}, {"conversation_id", m.ConversationID}, {"to", m.To}, {"text", m.Text}, {"correlation_id", m.CorrelationID}}
	for i, kv := range vals {
		if n := h.fields[kv[0]]; n != "" {
			vals[i][0] = n
		}
	}
	if h.form {
		f := url.Values{}
		for _, kv := range vals {
			f.Set(kv[0], kv[1])
		}
		return []byte(f.Encode()), "application/x-www-form-urlencoded", nil
	}
	if len(h.fields) == 0 {
		b, err := json.Marshal(m)
		return b, "application/json", err
	}
	obj := map[string]string{}
	for _, kv := range vals {
		obj[kv[0]] = kv[1]
	}
	b, err := json.Marshal(obj)
	return b, "application/json", err
}

// Lookup asks lookup_url whether a send with our reference arrived. Only a
// 200 with an id or a 404 is an answer; anything else is an error so that
// the caller asks again later rather than guessing.
func (h *HTTP) Lookup(ctx context.Context, ref, correlationID string) (string, bool, error) {
	if h.lookupURL == "" {
		return "", false, ErrNoLookup
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	u := strings.ReplaceAll(h.lookupURL, "{ref}", url.QueryEscape(ref))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", false, fmt.Errorf("%s: lookup %s: %w", h.name, ref, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if h.auth != "" {
		req.Header.Set("Authorization", h.auth)
	}
	if correlationID != "" {
		req.Header.Set("X-Correlation-ID", correlationID)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("%s: lookup %s: %w", h.name, ref, transportErr(err))
	}
	defer closeBody(resp.Body)

	switch resp.StatusCode {
	case http.StatusOK:
		answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			return "", false, fmt.Errorf("%s: lookup %s: read answer: %w", h.name, ref, transportErr(err))
		}
		id, ok := pointer(answer, h.answerID)
		if !ok || id == "" {
			// Some APIs answer 200 with an empty list for "none": that is
			// not the 404 the spec promises, so it decides nothing.
			return "", false, fmt.Errorf("%s: lookup %s: a 200 without an id: %s", h.name, ref, excerpt(bytes.NewReader(answer)))
		}
		return id, true, nil
	case http.StatusNotFound:
		return "", false, nil
	default:
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
			return "", false, fmt.Errorf("%s: lookup %s: answered %s, redirected to %q, which a lookup never follows; fix lookup_url", h.name, ref, resp.Status, loc)
		}
		return "", false, fmt.Errorf("%s: lookup %s: answered %s: %s", h.name, ref, resp.Status, excerpt(resp.Body))
	}
}

// Hold holds a send to the provider's rate.
func (h *HTTP) Hold(ref string, now time.Time) time.Duration { return h.w.Hold(ref, now) }

// Capabilities follow the configuration: only the operator knows whether
// the receiver honours Idempotency-Key.
func (h *HTTP) Capabilities() Capabilities {
	return Capabilities{IdempotencyKey: h.idemKey, Lookup: h.lookupURL != "", Timeout: h.timeout, LookupSettle: h.settle, Rate: h.rate, Burst: h.burst}
}

// retryAfter reads Retry-After as delay-seconds or an HTTP-date; a missing,
// malformed or past value is 0 (no advice).
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	// 32 bits of seconds (136 years) is more than any real advice and
	// cannot overflow a Duration.
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// excerpt returns the start of a refusal's body, cleaned so it can sit on
// one log line; receivers usually explain a 4xx there.
func excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, maxExcerpt))
	// ToValidUTF8 and Map never lengthen it: a rune cut in half by the
	// limit becomes one "?", a control character one space.
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "?"))
	s = strings.TrimSpace(s)
	if s == "" {
		return "(empty body)"
	}
	return s
}

// transportErr drops the *url.Error wrapper, whose message repeats the
// whole URL (query tokens included) in every log line; the error chain
// underneath, timeouts included, is kept for errors.Is.
func transportErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// closeBody discards a little of what is left so the connection can be
// reused for the next send.
func closeBody(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, drainLimit))
	_ = b.Close()
}

// headerSafe reports whether s can travel as a header value unchanged;
// the transport would otherwise refuse the request after we had already
// decided to send it.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
