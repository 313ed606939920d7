package web

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// TestWebPushOptIn: with approvals.webpush the queue page offers the
// opt-in with the VAPID public key and its script; /sw.js is the service
// worker, allowed the whole dashboard as its scope; POST /push/subscribe
// stores the browser's subscription for the person logged in only with
// the session's CSRF token; a bad one is one sentence; /push/unsubscribe
// deletes it. Without webpush the page offers nothing and the routes 404.
func TestWebPushOptIn(t *testing.T) {
	cfg := config.Default()
	cfg.Approvals.WebPush = &config.WebPushSurface{Subject: "mailto:ops@handoff.test"}
	e, _ := newEnv(t, cfg, envOptions{})
	b := limitedUser(t, e, "ann", store.RoleApprover)

	p := b.getOK("/drafts")
	m := regexp.MustCompile(`id="push-optin"[^>]*data-vapid-key="([A-Za-z0-9_-]+)"`).FindStringSubmatch(p.body)
	if m == nil || !strings.Contains(p.body, `/static/push.`) {
		t.Fatalf("the queue page offers no web push opt-in: %.2000s", p.body)
	}
	if k, err := base64.RawURLEncoding.DecodeString(m[1]); err != nil || len(k) != 65 || k[0] != 4 {
		t.Fatalf("data-vapid-key %q is not an uncompressed P-256 key", m[1])
	}
	if strings.Contains(p.body, "private") {
		t.Errorf("the page mentions a private key")
	}

	sw := b.get("/sw.js")
	if sw.code != http.StatusOK || sw.header.Get("Service-Worker-Allowed") != "/" || !strings.HasPrefix(sw.header.Get("Content-Type"), "text/javascript") ||
		!strings.Contains(sw.body, "showNotification") || !strings.Contains(sw.body, "notificationclick") {
		t.Fatalf("GET /sw.js = %d %v %.200s", sw.code, sw.header, sw.body)
	}

	key, _ := ecdh.P256().GenerateKey(rand.Reader)
	auth := make([]byte, 16)
	rand.Read(auth)
	sub, _ := json.Marshal(map[string]any{"endpoint": "https://push.example/wpush/ann-1", "expirationTime": nil,
		"keys": map[string]string{"p256dh": base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), "auth": base64.RawURLEncoding.EncodeToString(auth)}})
	jsonH := func(csrf string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		if csrf != "" {
			h.Set("X-Csrf-Token", csrf)
		}
		return h
	}
	if got := b.doBody(http.MethodPost, "/push/subscribe", string(sub), jsonH("")); got.code != http.StatusForbidden {
		t.Fatalf("subscribe without the CSRF token: %d %.200s, want 403", got.code, got.body)
	}
	if got := newBrowser(t, e.url).doBody(http.MethodPost, "/push/subscribe", string(sub), jsonH("x")); got.code == http.StatusOK {
		t.Fatal("subscribe without a session was taken")
	}
	if subs, _ := e.st.WebPushSubscriptions(""); len(subs) != 0 {
		t.Fatalf("stored without a session or token: %+v", subs)
	}
	bad := strings.Replace(string(sub), "https://", "http://", 1)
	if got := b.doBody(http.MethodPost, "/push/subscribe", bad, jsonH(b.csrf)); got.code != http.StatusBadRequest || !strings.Contains(got.body, "is not an https: address") {
		t.Fatalf("an http endpoint: %d %.200s", got.code, got.body)
	}
	if got := b.doBody(http.MethodPost, "/push/subscribe", string(sub), jsonH(b.csrf)); got.code != http.StatusOK {
		t.Fatalf("subscribe: %d %.200s", got.code, got.body)
	}
	subs, _ := e.st.WebPushSubscriptions("ann")
	if len(subs) != 1 || subs[0].Endpoint != "https://push.example/wpush/ann-1" {
		t.Fatalf("ann's subscriptions = %+v", subs)
	}
	if got := b.doBody(http.MethodPost, "/push/unsubscribe", `{"endpoint":"https://push.example/wpush/ann-1"}`, jsonH(b.csrf)); got.code != http.StatusOK {
		t.Fatalf("unsubscribe: %d %.200s", got.code, got.body)
	}
	if subs, _ := e.st.WebPushSubscriptions("ann"); len(subs) != 0 {
		t.Fatalf("after unsubscribe: %+v", subs)
	}

	plain, _ := newEnv(t, config.Default(), envOptions{})
	pb := limitedUser(t, plain, "bob", store.RoleApprover)
	if p := pb.getOK("/drafts"); strings.Contains(p.body, "push-optin") {
		t.Error("without approvals.webpush the queue offers web push")
	}
	if got := pb.doBody(http.MethodPost, "/push/subscribe", string(sub), jsonH(pb.csrf)); got.code != http.StatusNotFound {
		t.Errorf("subscribe without webpush: %d, want 404", got.code)
	}
}
