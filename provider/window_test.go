package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/testkit/standin"
)

// windowNow is the provider's clock in the window tests.
var windowNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// openKindAt builds cfg with its clock stopped at now.
func openKindAt(t *testing.T, cfg config.Provider, now time.Time) provider.Provider {
	t.Helper()
	ps, err := provider.Open([]config.Provider{cfg}, provider.Deps{Sandbox: nopSandbox{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return ps[cfg.Name]
}

func waConfig(base string) config.Provider {
	p := config.Provider{Name: "wa", Kind: "whatsapp"}
	p.APIBase, p.Token, p.PhoneNumberID = base, "EAAG-test-token", "1234567890"
	return p
}

func fbConfig(base string, humanAgent bool) config.Provider {
	p := config.Provider{Name: "fb", Kind: "meta"}
	p.APIBase, p.Token, p.HumanAgent = base, "EAAG-page-token", humanAgent
	return p
}

// capture is a server that records the one request it gets, as
// TestRequestsMatchTheSDKs does, and counts them.
func capture(t *testing.T) (*httptest.Server, *sdkCapture, *atomic.Int32) {
	t.Helper()
	var got sdkCapture
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, _ := io.ReadAll(r.Body)
		got.Request.Method, got.Request.Path, got.Request.Body = r.Method, r.URL.Path, string(b)
		got.Request.Headers = map[string]string{"authorization": r.Header.Get("Authorization"), "content-type": r.Header.Get("Content-Type")}
		w.WriteHeader(http.StatusServiceUnavailable) // the answer is not what is tested here
	}))
	t.Cleanup(srv.Close)
	return srv, &got, &n
}

// TestWindowRequestsMatchTheSpec: a WhatsApp template message and a
// Messenger reply past 24 hours (HUMAN_AGENT) go on the wire as the Cloud
// API's and the Send API's references write them (testdata/sdk), and a
// reply inside 24 hours stays the RESPONSE the reference writes.
func TestWindowRequestsMatchTheSpec(t *testing.T) {
	text := "Thanks, we will call you today."
	for _, tc := range []struct {
		name, file string
		cfg        func(base string) config.Provider
		msg        provider.Message
	}{
		{"whatsapp template", "whatsapp-template", waConfig, provider.Message{
			Ref: "c1:01HZ", To: "15550002222", Text: "template follow_up", LastInbound: windowNow.Add(-72 * time.Hour),
			Template: &provider.Template{Name: "follow_up", Language: "en_US", Params: []string{"Bob"}},
		}},
		{"whatsapp text inside 24h", "whatsapp", waConfig, provider.Message{Ref: "c1:01HZ", To: "15550002222", Text: text, LastInbound: windowNow.Add(-23 * time.Hour)}},
		{"meta human agent after 24h", "meta-human-agent", func(b string) config.Provider { return fbConfig(b, true) },
			provider.Message{Ref: "c1:01HZ", To: "6543210987654321", Text: text, LastInbound: windowNow.Add(-3 * 24 * time.Hour)}},
		{"meta human agent inside 24h", "meta", func(b string) config.Provider { return fbConfig(b, true) },
			provider.Message{Ref: "c1:01HZ", To: "6543210987654321", Text: text, LastInbound: windowNow.Add(-time.Hour)}},
		{"meta inside 24h", "meta", func(b string) config.Provider { return fbConfig(b, false) },
			provider.Message{Ref: "c1:01HZ", To: "6543210987654321", Text: text, LastInbound: windowNow.Add(-23 * time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "sdk", tc.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var want sdkCapture
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			srv, got, _ := capture(t)
			_, _ = openKindAt(t, tc.cfg(srv.URL), windowNow).Send(context.Background(), tc.msg)
			if got.Request.Method != want.Request.Method || got.Request.Path != want.Request.Path {
				t.Errorf("%s %s, want %s %s (%s)", got.Request.Method, got.Request.Path, want.Request.Method, want.Request.Path, want.SDK)
			}
			if g, w := got.Request.Headers["authorization"], want.Request.Headers["authorization"]; g != w {
				t.Errorf("authorization %q, want %q", g, w)
			}
			if g, w := decodeBody(t, got.Request), decodeBody(t, want.Request); !reflect.DeepEqual(g, w) {
				t.Errorf("body fields\n got %v\nwant %v (%s)", g, w, want.SDK)
			}
		})
	}
}

// TestWindowRefusesUnsent: a free-form reply past its kind's window is
// refused for good without a request (the provider's rule would refuse
// it), and so is one whose customer's last message could not be read (the
// window cannot be judged, so it counts as closed); a template, a reply
// inside the window and one that was given no last message are sent.
func TestWindowRefusesUnsent(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name     string
		cfg      func(base string) config.Provider
		ago      time.Duration // since the customer's last message; 0: not given
		template bool
		sent     bool
		unknown  bool // the last message could not be read (Message.WindowUnknown)
	}{
		{"whatsapp text after 24h", waConfig, day + time.Minute, false, false, false},
		{"whatsapp template after 24h", waConfig, 30 * day, true, true, false},
		{"whatsapp text just inside", waConfig, day - time.Second, false, true, false},
		{"whatsapp text, no last message given", waConfig, 0, false, true, false},
		{"whatsapp text, last message unreadable", waConfig, 0, false, false, true},
		{"whatsapp template, last message unreadable", waConfig, 0, true, true, true},
		{"meta text, last message unreadable", func(b string) config.Provider { return fbConfig(b, true) }, 0, false, false, true},
		{"meta after 24h", func(b string) config.Provider { return fbConfig(b, false) }, day, false, false, false},
		{"meta human agent after 6 days", func(b string) config.Provider { return fbConfig(b, true) }, 6 * day, false, true, false},
		{"meta human agent after 7 days", func(b string) config.Provider { return fbConfig(b, true) }, 7 * day, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, n := capture(t)
			to := "15550002222"
			if tc.cfg(srv.URL).Kind == "meta" {
				to = "6543210987654321"
			}
			m := provider.Message{Ref: "c1:01HZ", To: to, Text: "Hello again."}
			if tc.ago > 0 {
				m.LastInbound = windowNow.Add(-tc.ago)
			}
			m.WindowUnknown = tc.unknown
			if tc.template {
				m.Template = &provider.Template{Name: "follow_up", Language: "en_US"}
			}
			_, err := openKindAt(t, tc.cfg(srv.URL), windowNow).Send(context.Background(), m)
			var perm *provider.Permanent
			switch {
			case tc.sent && n.Load() != 1:
				t.Fatalf("Send = %v with %d requests, want it sent", err, n.Load())
			case !tc.sent && (n.Load() != 0 || !errors.As(err, &perm)):
				t.Fatalf("Send = %v (%T) with %d requests, want a Permanent refusal and no request", err, err, n.Load())
			case tc.unknown && !tc.sent && !strings.Contains(err.Error(), "cannot be judged"):
				t.Errorf("the refusal says %q; want it to say the window cannot be judged", err)
			}
		})
	}
}

// TestWhatsAppWindowCodeExplained: Meta's own refusal of a reply past the
// window (131047, when the customer's last message was not known) is
// permanent and says the way out.
func TestWhatsAppWindowCodeExplained(t *testing.T) {
	s := standin.New(t, "whatsapp", standin.Answer(400, `{"error":{"code":131047,"message":"Re-engagement message","type":"OAuthException"}}`))
	_, err := openKind(t, kindConfig(s, time.Second)).Send(context.Background(), provider.Message{Ref: "r", To: "1555", Text: "hi"})
	var perm *provider.Permanent
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "code 131047: more than 24 hours have passed since the customer last wrote") || !strings.Contains(err.Error(), "send one of the approved templates") {
		t.Fatalf("131047: %v, want a permanent refusal naming the way out", err)
	}
}
