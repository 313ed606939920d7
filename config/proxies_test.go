package config_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
)

func TestTrustedProxiesAndMetricsAddr(t *testing.T) {
	c := mustParse(t, "trusted_proxies: [10.0.0.0/8, 192.168.1.7, \"2001:db8::/32\"]\nproxy_header: Forwarded\nmetrics_addr: 127.0.0.1:9100\n", nil)
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("2001:db8::/32")}
	if !slices.Equal(c.TrustedProxies, want) || c.ProxyHeader != config.HeaderForwarded || c.MetricsAddr != "127.0.0.1:9100" {
		t.Errorf("got %v %q %q", c.TrustedProxies, c.ProxyHeader, c.MetricsAddr)
	}
	if d := mustParse(t, "workers: 2\n", nil); d.ProxyHeader != config.HeaderXForwardedFor || d.TrustedProxies != nil {
		t.Errorf("defaults: %q %v", d.ProxyHeader, d.TrustedProxies)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"trusted_proxies: [0.0.0.0/0]\n", "trusted_proxies[0]: \"0.0.0.0/0\" trusts every address"},
		{"trusted_proxies: [10.0.0.0/33]\n", "trusted_proxies[0]: \"10.0.0.0/33\" is not a CIDR range"},
		{"trusted_proxies: [proxy.example]\n", "trusted_proxies[0]: must be an IP address or a CIDR range"},
		{"trusted_proxies: 10.0.0.1\n", "trusted_proxies: must be a list"},
		{"proxy_header: X-Real-IP\n", "proxy_header: must be x-forwarded-for or forwarded"},
		{"metrics_addr: nowhere\n", "metrics_addr: \"nowhere\" is not a host:port address"},
	} {
		_, err := config.Parse([]byte(tt.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error containing %q", tt.yaml, err, tt.want)
		}
	}
}

// TestAPITokenLength: HANDOFF_API_TOKEN is refused under 32 characters in
// a sentence that does not repeat it.
func TestAPITokenLength(t *testing.T) {
	for _, tok := range []string{"abc", strings.Repeat("x", config.MinAPITokenLen-1)} {
		err := config.CheckAPIToken(tok)
		if err == nil || strings.Contains(err.Error(), tok) || !strings.Contains(err.Error(), "at least 32") {
			t.Errorf("token of %d characters: %v, want a refusal that does not repeat it", len(tok), err)
		}
	}
	for _, tok := range []string{"", strings.Repeat("x", config.MinAPITokenLen)} {
		if err := config.CheckAPIToken(tok); err != nil {
			t.Errorf("token of %d characters: %v", len(tok), err)
		}
	}
}

// TestSecretInEnvKeyNotEchoed: a secret pasted into a *_env key, in place
// of a variable's name, is never repeated by the error or the warnings.
func TestSecretInEnvKeyNotEchoed(t *testing.T) {
	ch := "channels:\n  - name: web\n    fields: {message_id: /id}\n"
	for _, tt := range []struct{ name, secret, yaml string }{
		{"not a name", "sk-proj-Abc123_secret", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret_env: \"sk-proj-Abc123_secret\"}\n"},
		{"a valid name in lower case", "a3f9c2e18b7d4e6f", ch + "    signature: {scheme: hmac-sha256, header: X-Sig, secret_env: a3f9c2e18b7d4e6f}\n"},
		{"long capitals", "JBSWY3DPEHPK3PXPJBSW", "providers: [{name: crm, kind: http, url: \"https://crm.example.com/m\", signing_secret_env: JBSWY3DPEHPK3PXPJBSW}]\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml), nil)
			if err == nil || strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error %v: want a refusal that does not hold the value", err)
			}
		})
	}
	c := mustParse(t, "drafter: {kind: openai, base_url: \"http://127.0.0.1:11434/v1\", model: m, api_key_env: a3f9c2e18b7d4e6f00112233}\n", nil)
	warned := false
	for _, w := range c.Warnings() {
		warned = warned || strings.HasPrefix(w, "drafter.api_key_env:")
		if strings.Contains(w, "a3f9c2e18b7d4e6f00112233") {
			t.Errorf("a warning repeats the pasted key: %s", w)
		}
	}
	if !warned {
		t.Errorf("no warning about the unset api_key_env: %v", c.Warnings())
	}
}

// TestRedactedURLsInSettings: the copy the settings page shows holds no
// query value or path token of any URL.
func TestRedactedURLsInSettings(t *testing.T) {
	c := mustParse(t, "base_url: \"https://handoff.example.com/?k=base-secret-1\"\nproviders: [{name: slack, kind: http, url: \"https://hooks.slack.com/services/T0A1B2C3D/B0123ABCD/abcdEFGH1234ijklMNOP5678\", lookup_url: \"https://crm.example.com/m?client_ref={ref}&api_key=lookup-secret-2\"}]\n", nil)
	r := c.Redacted()
	out := r.BaseURL + " " + r.Providers[0].URL + " " + r.Providers[0].LookupURL
	for _, s := range []string{"base-secret-1", "abcdEFGH1234ijklMNOP5678", "lookup-secret-2"} {
		if strings.Contains(out, s) {
			t.Errorf("redacted URLs %q still hold %q", out, s)
		}
	}
	if !strings.Contains(r.Providers[0].LookupURL, "client_ref={ref}") {
		t.Errorf("the {ref} placeholder went too: %q", r.Providers[0].LookupURL)
	}
}
