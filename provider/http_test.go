package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/webhook"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// received is one request as the fake provider saw it.
type received struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// recorder is a fake provider: it keeps every request and answers with
// the handler the test gives it. It is not the kit's testkit/standin on
// purpose: the raw answer (any status, header, body, redirect, lookup) is
// what these tests of the http kind's wire are about.
type recorder struct {
	mu   sync.Mutex
	reqs []received
}

func (rc *recorder) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

// server starts an httptest server that records each request before
// answering with answer.
func server(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rc := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, received{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: body,
		})
		rc.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, rc
}

// reply answers with a status, optional headers (name, value pairs) and a body.
func reply(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func mustHTTP(t *testing.T, cfg config.Provider, d Deps) *HTTP {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "crm"
	}
	cfg.Kind = "http"
	p, err := newHTTP(cfg, d)
	if err != nil {
		t.Fatalf("newHTTP: %v", err)
	}
	return p.(*HTTP)
}

// fixedClock is a clock that stays put, so signatures and Retry-After
// dates are checked against a known instant.
func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

var testMsg = Message{
	Ref:            "01J9ZQ4K6W3X8Y2B5C7D9E1F0G",
	ConversationID: "conv-7",
	To:             "+15550100",
	Text:           "Hi Ada, thanks \"for\" <your> message.",
	CorrelationID:  "corr-42",
}

func TestHTTPSendRequest(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	tests := []struct {
		name   string
		secret string
	}{
		{name: "signed", secret: testSecret},
		{name: "unsigned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, rc := server(t, reply(200, `{"id":"p-1"}`))
			p := mustHTTP(t, config.Provider{URL: srv.URL + "/messages", SigningSecret: tt.secret}, Deps{Now: fixedClock(now)})

			if _, err := p.Send(context.Background(), testMsg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			reqs := rc.all()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodPost || r.Path != "/messages" {
				t.Errorf("got %s %s, want POST /messages", r.Method, r.Path)
			}
			wantBody := `{"client_ref":"01J9ZQ4K6W3X8Y2B5C7D9E1F0G","conversation_id":"conv-7","to":"+15550100",` +
				`"text":"Hi Ada, thanks \"for\" \u003cyour\u003e message.","correlation_id":"corr-42"}`
			if string(r.Body) != wantBody {
				t.Errorf("body\n got %s\nwant %s", r.Body, wantBody)
			}
			var back Message
			if err := json.Unmarshal(r.Body, &back); err != nil || back != testMsg {
				t.Errorf("body decodes to %+v (%v), want %+v", back, err, testMsg)
			}
			for name, want := range map[string]string{
				"Content-Type":     "application/json",
				"Idempotency-Key":  testMsg.Ref,
				"X-Correlation-ID": testMsg.CorrelationID,
				"User-Agent":       "handoff",
			} {
				if got := r.Header.Get(name); got != want {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}

			if tt.secret == "" {
				for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
					if v, ok := r.Header[http.CanonicalHeaderKey(name)]; ok {
						t.Errorf("unsigned send has %s: %q", name, v)
					}
				}
				return
			}
			if got := r.Header.Get("webhook-id"); got != testMsg.Ref {
				t.Errorf("webhook-id = %q, want %q", got, testMsg.Ref)
			}
			if got, want := r.Header.Get("webhook-timestamp"), "1750000000"; got != want {
				t.Errorf("webhook-timestamp = %q, want %q", got, want)
			}
			v, err := webhook.NewVerifier(testSecret, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(r.Header, r.Body, now); err != nil {
				t.Errorf("signature does not verify: %v", err)
			}
			// The signature must cover the body: a tampered one fails.
			if err := v.Verify(r.Header, append(r.Body, ' '), now); err == nil {
				t.Error("signature verifies a different body")
			}
		})
	}
}

func TestHTTPSendClassification(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		answer    http.HandlerFunc
		wantID    string
		wantKind  string // "", "permanent", "ambiguous"
		wantCode  int
		wantRetry time.Duration
		wantInErr string
	}{
		{name: "200 string id", answer: reply(200, `{"id":"p-1"}`), wantID: "p-1"},
		{name: "201 number id", answer: reply(201, `{"id":42}`), wantID: "42"},
		{name: "202 big number id", answer: reply(202, `{"id":12345678901234567890}`), wantID: "12345678901234567890"},
		{name: "200 no body", answer: reply(200, ""), wantID: ""},
		{name: "204 no content", answer: reply(204, ""), wantID: ""},
		{name: "200 not json", answer: reply(200, "OK"), wantID: ""},
		{name: "200 null id", answer: reply(200, `{"id":null}`), wantID: ""},
		{name: "400", answer: reply(400, `{"error":"bad to"}`), wantKind: "permanent", wantCode: 400, wantInErr: `{"error":"bad to"}`},
		{name: "401", answer: reply(401, "no"), wantKind: "permanent", wantCode: 401},
		{name: "404", answer: reply(404, ""), wantKind: "permanent", wantCode: 404, wantInErr: "(empty body)"},
		{name: "422", answer: reply(422, "invalid\nnumber"), wantKind: "permanent", wantCode: 422, wantInErr: "invalid number"},
		{name: "301", answer: reply(301, "", "Location", "https://elsewhere.example/x"), wantKind: "permanent", wantCode: 301, wantInErr: "elsewhere.example"},
		{name: "308", answer: reply(308, "", "Location", "/moved"), wantKind: "permanent", wantCode: 308},
		{name: "408", answer: reply(408, ""), wantKind: "ambiguous", wantCode: 408},
		{name: "409", answer: reply(409, ""), wantKind: "ambiguous", wantCode: 409},
		{name: "429", answer: reply(429, "slow down"), wantKind: "ambiguous", wantCode: 429, wantInErr: "slow down"},
		{name: "500", answer: reply(500, ""), wantKind: "ambiguous", wantCode: 500},
		{name: "502", answer: reply(502, ""), wantKind: "ambiguous", wantCode: 502},
		{name: "503", answer: reply(503, ""), wantKind: "ambiguous", wantCode: 503},
		{name: "429 retry-after seconds", answer: reply(429, "", "Retry-After", "7"), wantKind: "ambiguous", wantCode: 429, wantRetry: 7 * time.Second},
		{name: "503 retry-after date", answer: reply(503, "", "Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)),
			wantKind: "ambiguous", wantCode: 503, wantRetry: 90 * time.Second},
		{name: "200 body cut short", answer: func(w http.ResponseWriter, r *http.Request) {
			// Promise 100 bytes, send 5, hang up: the provider accepted
			// but its answer was lost.
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"id\"")
			_ = buf.Flush()
			_ = conn.Close()
		}, wantKind: "ambiguous", wantCode: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, rc := server(t, tt.answer)
			p := mustHTTP(t, config.Provider{URL: srv.URL, SigningSecret: testSecret}, Deps{Now: fixedClock(now)})
			id, err := p.Send(context.Background(), testMsg)
			checkOutcome(t, id, err, tt.wantID, tt.wantKind, tt.wantCode, tt.wantRetry)
			if err != nil {
				if tt.wantInErr != "" && !strings.Contains(err.Error(), tt.wantInErr) {
					t.Errorf("error %q does not mention %q", err, tt.wantInErr)
				}
				if strings.Contains(err.Error(), strings.TrimPrefix(testSecret, "whsec_")) {
					t.Errorf("error %q quotes the signing secret", err)
				}
			}
			// Only one request: in particular a 3xx is not followed.
			if n := len(rc.all()); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func checkOutcome(t *testing.T, id string, err error, wantID, wantKind string, wantCode int, wantRetry time.Duration) {
	t.Helper()
	var perm *Permanent
	var amb *Ambiguous
	switch wantKind {
	case "":
		if err != nil {
			t.Fatalf("Send: %v, want success", err)
		}
		if id != wantID {
			t.Errorf("id = %q, want %q", id, wantID)
		}
	case "permanent":
		if !errors.As(err, &perm) {
			t.Fatalf("err = %v (%T), want *Permanent", err, err)
		}
		if perm.Status != wantCode {
			t.Errorf("status = %d, want %d", perm.Status, wantCode)
		}
	case "not_sent":
		var ns *NotSent
		if !errors.As(err, &ns) {
			t.Fatalf("err = %v (%T), want *NotSent", err, err)
		}
	case "ambiguous":
		if !errors.As(err, &amb) {
			t.Fatalf("err = %v (%T), want *Ambiguous", err, err)
		}
		if amb.Status != wantCode {
			t.Errorf("status = %d, want %d", amb.Status, wantCode)
		}
		if amb.RetryAfter != wantRetry {
			t.Errorf("RetryAfter = %v, want %v", amb.RetryAfter, wantRetry)
		}
	}
	if err != nil && id != "" {
		t.Errorf("id = %q alongside an error", id)
	}
}

func TestHTTPSendRedirectNotFollowed(t *testing.T) {
	target, hits := server(t, reply(200, `{"id":"wrong"}`))
	srv, _ := server(t, reply(307, "", "Location", target.URL))
	p := mustHTTP(t, config.Provider{URL: srv.URL}, Deps{})
	_, err := p.Send(context.Background(), testMsg)
	var perm *Permanent
	if !errors.As(err, &perm) || perm.Status != 307 {
		t.Fatalf("err = %v, want *Permanent with 307", err)
	}
	if n := len(hits.all()); n != 0 {
		t.Errorf("the redirect target got %d requests, want 0", n)
	}
}

func TestHTTPSendNoAnswer(t *testing.T) {
	stalled := func(t *testing.T) string {
		// The handler waits until the client gives up (its connection
		// closes) or the test ends, never on a clock of its own.
		stop := make(chan struct{})
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		})
		t.Cleanup(func() { close(stop) }) // runs before srv.Close
		return srv.URL
	}
	refused := func(t *testing.T) string {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		return srv.URL
	}
	tests := []struct {
		name string
		url  func(t *testing.T) string
		ctx  func(t *testing.T) context.Context
		want string
	}{
		{name: "client timeout", url: stalled, want: "ambiguous"},
		{name: "caller deadline", url: stalled, want: "ambiguous", ctx: func(t *testing.T) context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}},
		// No connection, so not one byte of the request left: safe to send again.
		{name: "connection refused", url: refused, want: "not_sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			p := mustHTTP(t, config.Provider{URL: tt.url(t), Timeout: 100 * time.Millisecond, SigningSecret: testSecret}, Deps{})
			id, err := p.Send(ctx, testMsg)
			checkOutcome(t, id, err, "", tt.want, 0, 0)
			if strings.Contains(err.Error(), strings.TrimPrefix(testSecret, "whsec_")) {
				t.Errorf("error %q quotes the signing secret", err)
			}
		})
	}
}

func TestHTTPResendSameKey(t *testing.T) {
	srv, rc := server(t, reply(503, ""))
	var mu sync.Mutex
	clock := time.Unix(1_750_000_000, 0)
	// Each send is a second later, so the timestamps differ and only the
	// id can be what the receiver deduplicates on.
	tick := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	p := mustHTTP(t, config.Provider{URL: srv.URL, SigningSecret: testSecret, SupportsIdempotencyKey: true}, Deps{Now: tick})
	for range 2 {
		if _, err := p.Send(context.Background(), testMsg); err == nil {
			t.Fatal("Send succeeded against a 503")
		}
	}
	reqs := rc.all()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("Idempotency-Key"); got != testMsg.Ref {
			t.Errorf("send %d: Idempotency-Key = %q, want %q", i, got, testMsg.Ref)
		}
		if got := r.Header.Get("webhook-id"); got != testMsg.Ref {
			t.Errorf("send %d: webhook-id = %q, want %q", i, got, testMsg.Ref)
		}
	}
	if a, b := reqs[0].Header.Get("webhook-timestamp"), reqs[1].Header.Get("webhook-timestamp"); a == b {
		t.Errorf("both sends have timestamp %s; the clock was not consulted per send", a)
	}
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("bodies differ:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
}

func TestHTTPSendRefusesUnkeyedMessage(t *testing.T) {
	srv, rc := server(t, reply(200, ""))
	p := mustHTTP(t, config.Provider{URL: srv.URL}, Deps{})
	for _, m := range []Message{{Text: "no ref"}, {Ref: "a\r\nX-Evil: 1"}} {
		_, err := p.Send(context.Background(), m)
		var perm *Permanent
		if !errors.As(err, &perm) {
			t.Errorf("Send(%q): err = %v, want *Permanent", m.Ref, err)
		}
	}
	if n := len(rc.all()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestHTTPLookup(t *testing.T) {
	tests := []struct {
		name      string
		answer    http.HandlerFunc
		wantID    string
		wantFound bool
		wantErr   bool
	}{
		{name: "found", answer: reply(200, `{"id":"p-9"}`), wantID: "p-9", wantFound: true},
		{name: "found number", answer: reply(200, `{"id":9}`), wantID: "9", wantFound: true},
		{name: "not found", answer: reply(404, "")},
		{name: "server error", answer: reply(500, ""), wantErr: true},
		{name: "200 without id", answer: reply(200, `[]`), wantErr: true},
		{name: "429", answer: reply(429, ""), wantErr: true},
	}
	const ref = "+1555:d01AB"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, rc := server(t, tt.answer)
			p := mustHTTP(t, config.Provider{URL: srv.URL, LookupURL: srv.URL + "/messages?client_ref={ref}"}, Deps{})
			id, found, err := p.Lookup(context.Background(), ref, "corr-1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Lookup err = %v, want error: %v", err, tt.wantErr)
			}
			if id != tt.wantID || found != tt.wantFound {
				t.Errorf("Lookup = (%q, %v), want (%q, %v)", id, found, tt.wantID, tt.wantFound)
			}
			reqs := rc.all()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodGet || r.Path != "/messages" {
				t.Errorf("got %s %s, want GET /messages", r.Method, r.Path)
			}
			if got := r.Header.Get("User-Agent"); got != "handoff" {
				t.Errorf("User-Agent = %q, want handoff", got)
			}
			if got := r.Header.Get("X-Correlation-ID"); got != "corr-1" {
				t.Errorf("X-Correlation-ID = %q, want corr-1: every outbound call carries it", got)
			}
			// Unescaped, "+" would arrive as a space.
			if got := queryValue(t, r.Query, "client_ref"); got != ref {
				t.Errorf("client_ref arrived as %q, want %q (raw query %q)", got, ref, r.Query)
			}
		})
	}
}

func queryValue(t *testing.T, raw, key string) string {
	t.Helper()
	q, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatalf("query %q: %v", raw, err)
	}
	return q.Get(key)
}

// TestHTTPLookupRedirectNotFollowed: a lookup's GET carries the
// provider's credentials and decides whether a message was sent, so a 3xx
// (to another host or the same) is followed by no request: it is "cannot
// tell", neither found nor not found, and the error names the target.
func TestHTTPLookupRedirectNotFollowed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		code   int
		answer http.HandlerFunc // of the redirect's target
	}{
		{"302 to a host that says found", 302, reply(200, `{"id":"forged"}`)},
		{"301 to a host that says not found", 301, reply(404, "")},
		{"307 to a host that says found", 307, reply(200, `{"id":"forged"}`)},
		{"308 to a host that says not found", 308, reply(404, "")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target, hits := server(t, tt.answer)
			srv, _ := server(t, reply(tt.code, "", "Location", target.URL+"/elsewhere"))
			p := mustHTTP(t, config.Provider{URL: srv.URL, LookupURL: srv.URL + "/m/{ref}"}, Deps{})
			id, found, err := p.Lookup(context.Background(), "r1", "corr-1")
			if err == nil || found || id != "" {
				t.Fatalf("Lookup = (%q, %v, %v), want an error (cannot tell)", id, found, err)
			}
			if !strings.Contains(err.Error(), "never follows") || !strings.Contains(err.Error(), target.URL) {
				t.Errorf("err = %v, want it to name the redirect and that it is not followed", err)
			}
			if n := len(hits.all()); n != 0 {
				t.Errorf("the redirect target got %d requests, want 0", n)
			}
		})
	}
}

func TestHTTPLookupUnsupported(t *testing.T) {
	p := mustHTTP(t, config.Provider{URL: "http://127.0.0.1:1/"}, Deps{})
	_, found, err := p.Lookup(context.Background(), "r1", "corr-1")
	if !errors.Is(err, ErrNoLookup) || found {
		t.Errorf("Lookup = (found %v, %v), want ErrNoLookup", found, err)
	}
}

func TestHTTPLookupRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	p := mustHTTP(t, config.Provider{URL: srv.URL, LookupURL: srv.URL + "/m/{ref}"}, Deps{})
	if _, found, err := p.Lookup(context.Background(), "r1", "corr-1"); err == nil || found {
		t.Errorf("Lookup against a closed server = (found %v, %v), want an error", found, err)
	}
}

func TestHTTPCapabilities(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Provider
		want Capabilities
	}{
		{name: "bare", cfg: config.Provider{URL: "https://crm.example/m"}, want: Capabilities{Timeout: defaultHTTPTimeout}},
		{name: "idempotent", cfg: config.Provider{URL: "https://crm.example/m", SupportsIdempotencyKey: true}, want: Capabilities{IdempotencyKey: true, Timeout: defaultHTTPTimeout}},
		{name: "lookup", cfg: config.Provider{URL: "https://crm.example/m", LookupURL: "https://crm.example/m?ref={ref}", Timeout: 2 * time.Second, LookupSettle: time.Minute},
			want: Capabilities{Lookup: true, Timeout: 2 * time.Second, LookupSettle: time.Minute}},
		{name: "both", cfg: config.Provider{URL: "https://crm.example/m", SupportsIdempotencyKey: true, LookupURL: "https://crm.example/m/{ref}"},
			want: Capabilities{IdempotencyKey: true, Lookup: true, Timeout: defaultHTTPTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustHTTP(t, tt.cfg, Deps{}).Capabilities(); got != tt.want {
				t.Errorf("Capabilities = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewHTTPRejectsBadConfig(t *testing.T) {
	const badSecret = "whsec_not!base64!at!all"
	tests := []struct {
		name string
		cfg  config.Provider
	}{
		{name: "no url", cfg: config.Provider{}},
		{name: "relative url", cfg: config.Provider{URL: "/messages"}},
		{name: "ftp url", cfg: config.Provider{URL: "ftp://crm.example/m"}},
		{name: "bad lookup url", cfg: config.Provider{URL: "https://crm.example/m", LookupURL: "crm.example/{ref}"}},
		{name: "bad secret", cfg: config.Provider{URL: "https://crm.example/m", SigningSecret: badSecret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Name, tt.cfg.Kind = "crm", "http"
			_, err := newHTTP(tt.cfg, Deps{})
			if err == nil {
				t.Fatal("newHTTP accepted a bad config")
			}
			if strings.Contains(err.Error(), "not!base64") {
				t.Errorf("error %q quotes the signing secret", err)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"7", 7 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999999999999", 0},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestExcerptBounded(t *testing.T) {
	long := "a" + strings.Repeat("é", 400) // the 300-byte limit cuts an é in half
	got := excerpt(strings.NewReader(long))
	if len(got) > maxExcerpt {
		t.Errorf("excerpt is %d bytes, want at most %d", len(got), maxExcerpt)
	}
	if !strings.HasPrefix(got, "aé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("excerpt = %q, want whole runes", got)
	}
}

// unusedSandboxStore satisfies SandboxStore whatever its methods are, so
// Open can build the sandbox; this test never sends through it (a call
// would panic on the nil interface).
type unusedSandboxStore struct{ SandboxStore }

func TestOpenHTTP(t *testing.T) {
	if _, ok := factories["sandbox"]; !ok {
		t.Skip("the sandbox kind is not registered in this build")
	}
	srv, _ := server(t, reply(200, `{"id":"p-1"}`))
	ps, err := Open([]config.Provider{{Name: "crm", Kind: "http", URL: srv.URL}}, Deps{Sandbox: unusedSandboxStore{}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, ok := ps["crm"].(*HTTP); !ok {
		t.Errorf(`Open()["crm"] = %T, want *HTTP`, ps["crm"])
	}
	if _, ok := ps["sandbox"]; !ok {
		t.Error(`Open() has no "sandbox"`)
	}
	if id, err := ps["crm"].Send(context.Background(), testMsg); err != nil || id != "p-1" {
		t.Errorf("Send through Open = (%q, %v), want (p-1, nil)", id, err)
	}
}

func TestHTTPRegistered(t *testing.T) {
	if _, ok := factories["http"]; !ok {
		t.Fatalf("kinds = %v, want http registered", Kinds())
	}
}
