package web

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// TestSettingsRedactURLTokens: /settings shows no query value and no path
// token of a configured URL, and shows the proxy settings.
func TestSettingsRedactURLTokens(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cfg.BaseURL = "https://handoff.example.com"
	cfg.Providers = append(cfg.Providers, config.Provider{
		Name: "slack", Kind: "http", Timeout: time.Second,
		URL:       "https://hooks.slack.com/services/T0A1B2C3D/B0123ABCD/slackPathToken12345678",
		LookupURL: "https://crm.example.com/messages?client_ref={ref}&access_token=queryToken-0042",
	})
	e := newTestEnv(t, cfg)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.getOK("/settings")
	for _, secret := range []string{"slackPathToken12345678", "queryToken-0042", "T0A1B2C3D"} {
		if strings.Contains(p.body, secret) {
			t.Errorf("/settings shows %q", secret)
		}
	}
	for _, w := range []string{"hooks.slack.com/services/", "client_ref={ref}", "access_token=[redacted]", "10.0.0.0/8", "x-forwarded-for"} {
		if !strings.Contains(p.body, w) {
			t.Errorf("/settings lacks %q", w)
		}
	}
}
