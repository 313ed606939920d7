package provider_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/standin"
)

// kindConfig is the provider config pointing kind at stand-in s.
func kindConfig(s *standin.Server, timeout time.Duration) config.Provider {
	p := config.Provider{Name: s.Kind, Kind: s.Kind, Timeout: timeout}
	p.APIBase = s.URL
	switch s.Kind {
	case "twilio":
		p.AccountSID, p.AuthToken, p.From = s.AccountSID, s.Token, "+15550001111"
		p.StatusCallback = "https://handoff.example/hooks/sms"
	case "whatsapp":
		p.PhoneNumberID, p.Token = s.PhoneID, s.Token
	default:
		p.Token = s.Token
	}
	return p
}

func openKind(t *testing.T, cfg config.Provider) provider.Provider {
	t.Helper()
	ps, err := provider.Open([]config.Provider{cfg}, provider.Deps{Sandbox: nopSandbox{}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return ps[cfg.Name]
}

// recipients are valid recipients per kind.
var recipients = map[string]string{"twilio": "+15550002222", "whatsapp": "15550002222", "meta": "6543210987654321", "telegram": "12345", "slack": "C123"}

// TestKindsClassifyDocumentedAnswers sends one message per mode to each
// kind's stand-in: every answer is sorted as its API documents, and the
// stand-in holds exactly the messages it accepted.
func TestKindsClassifyDocumentedAnswers(t *testing.T) {
	for _, kind := range []string{"twilio", "whatsapp", "meta", "telegram", "slack"} {
		for _, mode := range []standin.Mode{standin.OK, standin.Refuse, standin.RateLimit, standin.Stall, standin.Cut} {
			t.Run(kind+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				s := standin.New(t, kind, mode)
				// Only the stall waits for the timeout; a long one elsewhere
				// keeps a loaded machine from turning a send into a timeout.
				timeout := 10 * time.Second
				if mode == standin.Stall {
					timeout = time.Second
				}
				p := openKind(t, kindConfig(s, timeout))
				m := provider.Message{Ref: "c1:01HZ", To: recipients[kind], Text: "Thanks, we will call you today."}
				id, err := p.Send(context.Background(), m)
				if bad := s.Malformed(); len(bad) > 0 {
					t.Fatalf("the stand-in refused the request's shape: %v", bad)
				}
				if s.Posts() != 1 {
					t.Fatalf("the stand-in got %d sends, want exactly 1", s.Posts())
				}
				acc := s.Accepted()
				var perm *provider.Permanent
				var notSent *provider.NotSent
				var amb *provider.Ambiguous
				switch mode {
				case standin.OK:
					if err != nil || len(acc) != 1 || id != acc[0].ID || id == "" {
						t.Fatalf("Send = %q, %v; accepted %+v: want the provider's id", id, err, acc)
					}
					if acc[0].To != m.To || acc[0].Text != m.Text {
						t.Errorf("accepted %+v, want to %q text %q", acc[0], m.To, m.Text)
					}
					if kind == "whatsapp" || kind == "twilio" {
						if acc[0].Ref != m.Ref {
							t.Errorf("the request carries reference %q, want %q", acc[0].Ref, m.Ref)
						}
					}
				case standin.Refuse:
					if !errors.As(err, &perm) || len(acc) != 0 {
						t.Fatalf("Send = %q, %v, want *Permanent and nothing accepted", id, err)
					}
				case standin.RateLimit:
					if !errors.As(err, &notSent) || len(acc) != 0 {
						t.Fatalf("Send = %q, %v (%T), want *NotSent: a rate limit means not accepted", id, err, err)
					}
					// Meta advertises its wait in minutes
					// (X-Business-Use-Case-Usage), WhatsApp's stand-in none.
					want := map[string]time.Duration{"meta": time.Minute, "whatsapp": 0}
					if w, ok := want[kind]; !ok {
						want[kind] = 3 * time.Second
					} else if w == 0 {
						break
					}
					if notSent.RetryAfter != want[kind] {
						t.Errorf("RetryAfter = %s, want %s from the answer", notSent.RetryAfter, want[kind])
					}
				case standin.Stall, standin.Cut:
					if !errors.As(err, &amb) || len(acc) != 1 {
						t.Fatalf("Send = %q, %v (%T), want *Ambiguous: the stand-in accepted it", id, err, err)
					}
				}
			})
		}
	}
}

// TestSlackOkFalseIsNotSent: Slack's errors come back as 200.
func TestSlackOkFalseIsNotSent(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{"ok":false,"error":"not_in_channel"}`, "permanent"},
		{`{"ok":false,"error":"invalid_auth"}`, "permanent"},
		{`{"ok":false,"error":"ratelimited"}`, "later"},
		{`{"ok":false,"error":"internal_error"}`, "unknown"},
		{`{"ok":true,"ts":"1.2"}`, "sent"},
	} {
		s := standin.New(t, "slack", standin.Answer(http.StatusOK, tc.body))
		_, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), provider.Message{Ref: "r", To: "C1", Text: "hi"})
		if got := verdict(err); got != tc.want {
			t.Errorf("%s: %v is %s, want %s", tc.body, err, got, tc.want)
		}
		if bad := s.Malformed(); len(bad) > 0 {
			t.Errorf("%s: the stand-in refused the request's shape: %v", tc.body, bad)
		}
	}
}

// TestSlackEscapesControlCharacters: whatever the text (a digest quoting
// a customer, an alert naming a lead, a reply), Slack is sent &, < and >
// escaped, so it shows them and never reads a mention or a link.
func TestSlackEscapesControlCharacters(t *testing.T) {
	s := standin.New(t, "slack")
	text := "<!channel> call me & <https://evil.example|click>"
	if _, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), provider.Message{Ref: "r", To: "C1", Text: text}); err != nil {
		t.Fatal(err)
	}
	acc := s.Accepted()
	if len(acc) != 1 {
		t.Fatalf("slack accepted %d messages, want 1 (malformed: %v)", len(acc), s.Malformed())
	}
	if got, want := acc[0].Text, "&lt;!channel&gt; call me &amp; &lt;https://evil.example|click&gt;"; got != want {
		t.Errorf("slack was sent text %q, want %q", got, want)
	}
}

func verdict(err error) string {
	var perm *provider.Permanent
	var notSent *provider.NotSent
	switch {
	case err == nil:
		return "sent"
	case errors.As(err, &perm):
		return "permanent"
	case errors.As(err, &notSent):
		return "later"
	}
	return "unknown"
}

// TestWhatsAppErrorCodes: Meta's error codes, not only the status, decide.
func TestWhatsAppErrorCodes(t *testing.T) {
	for code, want := range map[int]string{131026: "permanent", 190: "permanent", 131047: "permanent", 130429: "later", 131056: "later", 80007: "later", 131000: "unknown", 2: "unknown"} {
		status := 400
		if code == 131000 || code == 2 {
			status = 500
		}
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": "x"}})
		s := standin.New(t, "whatsapp", standin.Answer(status, string(body)))
		_, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), provider.Message{Ref: "r", To: "1555", Text: "hi"})
		if got := verdict(err); got != want {
			t.Errorf("code %d: %v is %s, want %s", code, err, got, want)
		}
		if bad := s.Malformed(); len(bad) > 0 {
			t.Errorf("code %d: the stand-in refused the request's shape: %v", code, bad)
		}
	}
}

// TestMetaErrorCodes: the Send API's documented codes decide, and the
// ones a person acts on are said in words.
func TestMetaErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		status, code, subcode int
		header                []string
		want                  string
		retry                 time.Duration
		says                  string
	}{
		{400, 10, 2018278, nil, "permanent", 0, "outside the allowed window"},
		{401, 190, 0, nil, "permanent", 0, "refused the page access token in META_TOKEN"},
		{400, 551, 1545041, nil, "permanent", 0, "code 551/1545041"},
		{403, 200, 0, nil, "permanent", 0, "code 200"},
		{400, 613, 0, []string{"X-Business-Use-Case-Usage", `{"1":[{"type":"messenger","estimated_time_to_regain_access":5},{"type":"pages","estimated_time_to_regain_access":2}]}`}, "later", 5 * time.Minute, "code 613"},
		{400, 80006, 0, []string{"Retry-After", "9"}, "later", 9 * time.Second, "code 80006"},
		{400, 4, 0, nil, "later", 0, "code 4"},
		{500, 1200, 0, nil, "unknown", 0, "code 1200"},
		{500, 2, 0, nil, "unknown", 0, "code 2"},
		{400, 100, 2018001, nil, "permanent", 0, "code 100/2018001"},
	} {
		e := map[string]any{"code": tc.code, "message": "x", "type": "OAuthException", "fbtrace_id": "AbC"}
		if tc.subcode != 0 {
			e["error_subcode"] = tc.subcode
		}
		body, _ := json.Marshal(map[string]any{"error": e})
		s := standin.New(t, "meta", standin.Answer(tc.status, string(body), tc.header...))
		cfg := kindConfig(s, time.Second)
		cfg.TokenEnv = "META_TOKEN"
		_, err := openKind(t, cfg).Send(context.Background(), provider.Message{Ref: "r", To: recipients["meta"], Text: "hi"})
		if got := verdict(err); got != tc.want {
			t.Errorf("code %d/%d: %v is %s, want %s", tc.code, tc.subcode, err, got, tc.want)
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), s.Token) {
			t.Errorf("code %d/%d: %v, want it to say %q and never the token", tc.code, tc.subcode, err, tc.says)
		}
		var notSent *provider.NotSent
		if errors.As(err, &notSent) && notSent.RetryAfter != tc.retry {
			t.Errorf("code %d: RetryAfter = %s, want %s", tc.code, notSent.RetryAfter, tc.retry)
		}
		if bad := s.Malformed(); len(bad) > 0 {
			t.Errorf("code %d: the stand-in refused the request's shape: %v", tc.code, bad)
		}
	}
}

// TestMetaGraphVersion: the Send API's version is the configured one, the
// whatsapp kind's by default.
func TestMetaGraphVersion(t *testing.T) {
	for _, tc := range []struct{ version, path string }{{"", "/v21.0/me/messages"}, {"v23.0", "/v23.0/me/messages"}} {
		var path string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path = r.URL.Path
			_, _ = io.WriteString(w, `{"recipient_id":"1","message_id":"m_1"}`)
		}))
		cfg := config.Provider{Name: "fb", Kind: "meta"}
		cfg.APIBase, cfg.Token, cfg.GraphVersion = srv.URL, "tok", tc.version
		id, err := openKind(t, cfg).Send(context.Background(), provider.Message{Ref: "r", To: "1", Text: "hi"})
		srv.Close()
		if err != nil || id != "m_1" || path != tc.path {
			t.Errorf("graph_version %q: Send = %q, %v at %s; want m_1 at %s", tc.version, id, err, path, tc.path)
		}
	}
}

// TestTelegramTokenNeverInErrors: the bot token sits in the URL path; no
// error may carry it.
func TestTelegramTokenNeverInErrors(t *testing.T) {
	cfg := config.Provider{Name: "tg", Kind: "telegram", Timeout: 200 * time.Millisecond}
	cfg.APIBase, cfg.Token = "http://127.0.0.1:1", "123456:SECRET-token"
	_, err := openKind(t, cfg).Send(context.Background(), provider.Message{Ref: "r", To: "1", Text: "hi"})
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v, want an error without the token", err)
	}
}

// sdkCapture is one request a provider's SDK sent (testdata/sdk/*.json,
// written by testdata/sdk/capture.js).
type sdkCapture struct {
	SDK     string `json:"sdk"`
	Request struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
}

// TestRequestsMatchTheSDKs sends the message capture.js sent through each
// SDK and compares what goes on the wire: method, path, content type,
// authorization and the decoded body fields. Twilio's form, Slack's form
// and Telegram's JSON must be what twilio-node, @slack/web-api and grammY
// send; WhatsApp's is the Cloud API reference's (whatsapp.json), Meta's
// the Messenger Platform Send API reference's (meta.json).
func TestRequestsMatchTheSDKs(t *testing.T) {
	text := "Thanks, we will call you today."
	for _, tc := range []struct {
		kind string
		cfg  func(base string) config.Provider
		msg  provider.Message
	}{
		{"twilio", func(b string) config.Provider {
			p := config.Provider{Name: "sms", Kind: "twilio"}
			p.APIBase, p.AccountSID, p.AuthToken, p.From, p.StatusCallback = b, "AC"+strings.Repeat("a", 32), "auth-token-123", "+15550001111", "https://handoff.example/hooks/sms"
			return p
		}, provider.Message{Ref: "c1:01HZ", To: "+15550002222", Text: text}},
		{"slack", func(b string) config.Provider {
			p := config.Provider{Name: "team", Kind: "slack"}
			p.APIBase, p.Token = b, "xoxb-test-token"
			return p
		}, provider.Message{Ref: "c1:01HZ", To: "C123", Text: text}},
		{"telegram", func(b string) config.Provider {
			p := config.Provider{Name: "tg", Kind: "telegram"}
			p.APIBase, p.Token = b, "123456:TEST-token"
			return p
		}, provider.Message{Ref: "c1:01HZ", To: "12345", Text: text}},
		{"whatsapp", func(b string) config.Provider {
			p := config.Provider{Name: "wa", Kind: "whatsapp"}
			p.APIBase, p.Token, p.PhoneNumberID = b, "EAAG-test-token", "1234567890"
			return p
		}, provider.Message{Ref: "c1:01HZ", To: "15550002222", Text: text}},
		{"meta", func(b string) config.Provider {
			p := config.Provider{Name: "fb", Kind: "meta"}
			p.APIBase, p.Token = b, "EAAG-page-token"
			return p
		}, provider.Message{Ref: "c1:01HZ", To: "6543210987654321", Text: text}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "sdk", tc.kind+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var want sdkCapture
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			// A raw capture, not the stand-in: this is what checks the
			// stand-in's request shapes against the SDKs' own.
			var got sdkCapture
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got.Request.Method, got.Request.Path, got.Request.Body = r.Method, r.URL.Path, string(b)
				got.Request.Headers = map[string]string{"authorization": r.Header.Get("Authorization"), "content-type": r.Header.Get("Content-Type")}
				w.WriteHeader(http.StatusServiceUnavailable) // the answer is not what is tested here
			}))
			defer srv.Close()
			_, _ = openKind(t, tc.cfg(srv.URL)).Send(context.Background(), tc.msg)
			if got.Request.Method != want.Request.Method || got.Request.Path != want.Request.Path {
				t.Errorf("%s %s, want %s %s (%s)", got.Request.Method, got.Request.Path, want.Request.Method, want.Request.Path, want.SDK)
			}
			if g, w := mediaType(got.Request.Headers["content-type"]), mediaType(want.Request.Headers["content-type"]); g != w {
				t.Errorf("content type %q, want %q (%s)", g, w, want.SDK)
			}
			if g, w := got.Request.Headers["authorization"], want.Request.Headers["authorization"]; g != w {
				t.Errorf("authorization %q, want %q (%s)", g, w, want.SDK)
			}
			g, w := decodeBody(t, got.Request), decodeBody(t, want.Request)
			if tc.kind == "twilio" {
				// The SDK call set the callback by hand with the ref
				// handoff adds: both must be the same URL.
				if cb, _ := url.Parse(g["StatusCallback"]); cb == nil || cb.Query().Get("ref") != tc.msg.Ref {
					t.Errorf("StatusCallback %q does not carry ref=%s", g["StatusCallback"], tc.msg.Ref)
				}
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("body fields\n got %v\nwant %v (%s)", g, w, want.SDK)
			}
		})
	}
}

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(mt)
}

// decodeBody flattens a form or a JSON object into field → value.
func decodeBody(t *testing.T, r struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}) map[string]string {
	t.Helper()
	out := map[string]string{}
	if mediaType(r.Headers["content-type"]) == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		for k := range v {
			out[k] = v.Get(k)
		}
		return out
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(prefix+"/"+k, e)
			}
		default:
			b, _ := json.Marshal(x)
			out[prefix] = string(b)
		}
	}
	walk("", v)
	return out
}

// basicAuth is Twilio's header for sid and token.
func basicAuth(sid, token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(sid+":"+token))
}

var _ = basicAuth

// nopSandbox lets Open build its built-in sandbox; these tests never use it.
type nopSandbox struct{}

func (nopSandbox) SandboxAccept(context.Context, store.SandboxMessage) (store.SandboxMessage, bool, error) {
	return store.SandboxMessage{}, false, errors.New("not used")
}
func (nopSandbox) SandboxLookup(string) (store.SandboxMessage, error) {
	return store.SandboxMessage{}, store.ErrNotFound
}

// TestHTTPExtended: auth_env, a form body with the receiver's field
// names, an answer-id pointer, and a success rule for a 200 with an error.
func TestHTTPExtended(t *testing.T) {
	s := standin.New(t, "http", standin.Answer(http.StatusOK, `{"ok":true,"data":{"id":77}}`), standin.Answer(http.StatusOK, `{"ok":false,"error":"invalid_phone"}`))
	cfg := config.Provider{Name: "crm", Kind: "http", URL: s.SendURL(), Timeout: time.Second}
	cfg.Auth, cfg.Body, cfg.Fields, cfg.AnswerID = "Bearer crm-secret", "form", map[string]string{"to": "phone", "text": "message"}, "/data/id"
	cfg.SuccessPointer, cfg.SuccessValue = "/ok", "true"
	p := openKind(t, cfg)
	id, err := p.Send(context.Background(), provider.Message{Ref: "r1", To: "+1555", Text: "hi"})
	if err != nil || id != "77" {
		t.Fatalf("Send = %q, %v; want 77", id, err)
	}
	sends := s.Sends()
	if len(sends) != 1 {
		t.Fatalf("the receiver got %d sends, want 1 (malformed: %v)", len(sends), s.Malformed())
	}
	got, _ := url.ParseQuery(string(sends[0].Body))
	auth := sends[0].Header.Get("Authorization")
	if auth != "Bearer crm-secret" || got.Get("phone") != "+1555" || got.Get("message") != "hi" || got.Get("client_ref") != "r1" {
		t.Fatalf("received auth %q form %v", auth, got)
	}
	_, err = p.Send(context.Background(), provider.Message{Ref: "r2", To: "x", Text: "hi"})
	var perm *provider.Permanent
	if !errors.As(err, &perm) || strings.Contains(err.Error(), "crm-secret") {
		t.Fatalf("a 200 failing the success rule = %v, want *Permanent without the secret", err)
	}
}

// TestServerErrorsKeepRetryAfter: a 5xx is an unknown outcome, and the
// Retry-After on it is kept for the queue by every HTTP kind alike.
func TestServerErrorsKeepRetryAfter(t *testing.T) {
	for _, kind := range []string{"twilio", "whatsapp", "meta", "telegram", "slack"} {
		t.Run(kind, func(t *testing.T) {
			s := standin.New(t, kind, standin.Answer(http.StatusServiceUnavailable, "", "Retry-After", "7"))
			_, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), provider.Message{Ref: "r", To: recipients[kind], Text: "hi"})
			var amb *provider.Ambiguous
			if !errors.As(err, &amb) || amb.RetryAfter != 7*time.Second {
				t.Fatalf("a 503 with Retry-After: 7 = %v (%T), want *Ambiguous with RetryAfter 7s", err, err)
			}
		})
	}
}

// TestAcceptedWithoutID: a 200 whose body lacks the provider's id, or
// broke off, may be a delivery: unknown, never sent or refused.
func TestAcceptedWithoutID(t *testing.T) {
	for kind, body := range map[string]string{"whatsapp": `{"messaging_product":"whatsapp"}`, "meta": `{"recipient_id":"6543210987654321"}`, "slack": `{"ok":tr`, "telegram": `{"ok":false}`} {
		t.Run(kind, func(t *testing.T) {
			s := standin.New(t, kind, standin.Answer(http.StatusOK, body))
			_, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), provider.Message{Ref: "r", To: recipients[kind], Text: "hi"})
			if got := verdict(err); got != "unknown" {
				t.Fatalf("200 %s = %v, a %s outcome; want unknown", body, err, got)
			}
		})
	}
}

// TestMetaEntry: config reads a meta provider as its declaration says:
// the page token required, graph_version checked and the meta kind's
// alone, the Send API's rate by default.
func TestMetaEntry(t *testing.T) {
	env := func(string) string { return "v" }
	for _, tc := range []struct{ entry, wantErr string }{
		{`kind: meta, token_env: T`, ""},
		{`kind: meta, token_env: T, graph_version: v23.0, rate: 10/s`, ""},
		{`kind: meta`, "providers[0].token_env: missing; a meta provider needs the variable holding its page access token"},
		{`kind: meta, token_env: T, graph_version: "23"`, `"23" is not a Graph API version (e.g. v21.0)`},
		{`kind: whatsapp, phone_number_id: "1", token_env: T, graph_version: v23.0`, "only a meta provider takes graph_version"},
		{`kind: meta, token_env: T, human_agent: true`, ""},
		{`kind: meta, token_env: T, human_agent: "yes please"`, "providers[0].human_agent"},
		{`kind: whatsapp, phone_number_id: "1", token_env: T, human_agent: true`, "only a meta provider takes human_agent"},
	} {
		cfg, err := config.Parse([]byte("providers: [{name: p, "+tc.entry+"}]"), env)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want an error saying %q", tc.entry, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.entry, err)
		}
		p := cfg.Providers[0]
		wantRate, wantVersion := 300.0, ""
		if strings.Contains(tc.entry, "rate:") {
			wantRate, wantVersion = 10, "v23.0"
		}
		if p.HumanAgent != strings.Contains(tc.entry, "human_agent: true") {
			t.Errorf("%s: human_agent read as %v", tc.entry, p.HumanAgent)
		}
		if p.Rate != wantRate || p.Burst != 1 || p.GraphVersion != wantVersion || p.Token != "v" {
			t.Errorf("%s: rate %v burst %d version %q, want rate %v burst 1 version %q", tc.entry, p.Rate, p.Burst, p.GraphVersion, wantRate, wantVersion)
		}
		if caps := openKind(t, p).Capabilities(); caps.Rate != wantRate || caps.Receipts || caps.IdempotencyKey || caps.Lookup {
			t.Errorf("%s: capabilities %+v, want rate %v and nothing to prove an unknown outcome with", tc.entry, caps, wantRate)
		}
	}
}
