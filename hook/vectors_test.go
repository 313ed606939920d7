package hook

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Vector is one request signed by the provider's own SDK (or by node:crypto
// as the provider documents it, where it ships no signer):
// testdata/vectors/gen.js made them, and the Go tests need neither node nor npm.
type Vector struct {
	Name     string            `json:"name"`
	Preset   string            `json:"preset"`
	Scheme   string            `json:"scheme"`
	Header   string            `json:"header"`
	Encoding string            `json:"encoding"`
	Prefix   string            `json:"prefix"`
	Kind     string            `json:"kind"` // message, batch, notification, handshake
	Channel  string            `json:"channel"`
	Path     string            `json:"path"`
	Secret   string            `json:"secret"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Now      int64             `json:"now"`
}

// Vectors is testdata/vectors.json.
type Vectors struct {
	BaseURL string   `json:"base_url"`
	Vectors []Vector `json:"vectors"`
}

func loadVectors(t *testing.T) Vectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs Vectors
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs.Vectors) == 0 {
		t.Fatal("testdata/vectors.json holds no vectors")
	}
	return vs
}

// signing is the vector's signature as a channel with its preset would
// configure it, with secrets in place of its one secret.
func (v Vector) signing(secrets ...string) Signing {
	s := Signing{Scheme: v.Scheme, Secrets: secrets, Header: v.Header, Encoding: v.Encoding, Prefix: v.Prefix}
	if p, ok := LookupPreset(v.Preset); ok && p.Scheme == v.Scheme && s.Header == "" {
		s.Header, s.Encoding, s.Prefix = p.Header, p.Encoding, p.Prefix
	}
	return s
}

func (v Vector) request(base string) *Request {
	h := http.Header{}
	for k, val := range v.Headers {
		h.Set(k, val)
	}
	return &Request{URL: base + v.Path, Header: h, Body: []byte(v.Body), Now: time.Unix(v.Now, 0)}
}

// bodySigned reports whether scheme covers the whole body: token and basic
// authenticate the sender only, mailgun signs its timestamp and token.
func bodySigned(scheme string) bool {
	switch scheme {
	case SchemeToken, SchemeBasic, SchemeMailgun:
		return false
	}
	return true
}

// tamper changes one byte of the message text, wherever the body has it.
func tamper(body string) string {
	for _, word := range []string{"Hi", "Hello", "First", "Is this", "Does", "Yes", "I would", "From a", "Found", "Please", "JSON", "Ol", "Привет", "test", "edited", "Our own", "thumbsup", "delivered", "3eZbrw"} {
		if i := strings.Index(body, word); i >= 0 {
			return body[:i] + "X" + body[i+1:]
		}
	}
	return body + " "
}

func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	const wrong = "not-the-secret:0123456789abcdef"
	for _, v := range vs.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			verify := func(r *Request, secrets ...string) error {
				t.Helper()
				sg := v.signing(secrets...)
				if v.Scheme == SchemeStandardWebhooks {
					for i, s := range sg.Secrets {
						if s == wrong {
							sg.Secrets[i] = "whsec_bm90LXRoZS1zZWNyZXQ="
						}
					}
				}
				ver, err := NewVerifier(sg)
				if err != nil {
					t.Fatalf("NewVerifier: %v", err)
				}
				return ver.Verify(r)
			}
			if err := verify(v.request(vs.BaseURL), v.Secret); err != nil {
				t.Fatalf("valid: Verify = %v, want nil", err)
			}
			if err := verify(v.request(vs.BaseURL), wrong, v.Secret); err != nil {
				t.Errorf("rotated (the old secret listed second): Verify = %v, want nil", err)
			}
			wantRefused(t, "wrong secret", verify(v.request(vs.BaseURL), wrong))

			r := v.request(vs.BaseURL)
			r.Body = []byte(tamper(v.Body))
			if string(r.Body) == v.Body {
				t.Fatal("tamper left the body alone")
			}
			if err := verify(r, v.Secret); bodySigned(v.Scheme) {
				wantRefused(t, "tampered body", err)
			} else if err != nil {
				t.Errorf("tampered body on %s, which does not sign it: Verify = %v", v.Scheme, err)
			}

			if v.Scheme == SchemeMailgun {
				// Mailgun signs the token it puts in the body: changing it
				// must be refused.
				p, err := Parse(v.Headers["Content-Type"], []byte(v.Body), nil)
				if err != nil {
					t.Fatal(err)
				}
				prefix := ""
				if p.IsJSON() {
					prefix = "/signature"
				}
				tok, ok, _ := p.Field(prefix + "/token")
				if !ok || !strings.Contains(v.Body, tok) {
					t.Fatalf("no Mailgun token in the body")
				}
				r := v.request(vs.BaseURL)
				r.Body = []byte(strings.Replace(v.Body, tok, "X"+tok[1:], 1))
				wantRefused(t, "tampered Mailgun token", verify(r, v.Secret))
			}
			if NeedsTolerance(v.Scheme) {
				for _, d := range []time.Duration{6 * time.Minute, -6 * time.Minute} {
					r := v.request(vs.BaseURL)
					r.Now = r.Now.Add(d)
					wantRefused(t, "stale by "+d.String(), verify(r, v.Secret))
				}
				r := v.request(vs.BaseURL)
				r.Now = r.Now.Add(4 * time.Minute)
				if err := verify(r, v.Secret); err != nil {
					t.Errorf("4 minutes late, inside the tolerance: Verify = %v", err)
				}
			}
			if v.Scheme == SchemeTwilio {
				r := v.request("https://other.example.com")
				wantRefused(t, "another URL", verify(r, v.Secret))
				r = v.request(vs.BaseURL + ":443")
				if err := verify(r, v.Secret); err != nil {
					t.Errorf("the URL with its default port: Verify = %v, want nil", err)
				}
			}
			for name := range v.Headers {
				if strings.EqualFold(name, "Content-Type") || strings.EqualFold(name, "X-GitHub-Delivery") {
					continue
				}
				r := v.request(vs.BaseURL)
				r.Header.Del(name)
				wantRefused(t, "without "+name, verify(r, v.Secret))
			}
		})
	}
}

func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: Verify = nil, want a 401", what)
		return
	}
	he, ok := err.(*Error)
	if !ok || he.Status != http.StatusUnauthorized || he.Msg == "" || strings.Contains(he.Msg, "\n") {
		t.Errorf("%s: Verify = %#v, want a 401 *Error with one sentence", what, err)
	}
}
