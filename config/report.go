package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/provider/kinds"
)

// Warnings lists non-fatal concerns to log at start (unsigned channels, openai drafter without API key...).
func (c *Config) Warnings() []string {
	var ws []string
	if c.BaseURL == "" && !loopback(c.Addr) {
		ws = append(ws, fmt.Sprintf("base_url is not set while listening on %s: session cookies are not marked Secure and links use relative paths", c.Addr))
	}
	if strings.HasPrefix(c.BaseURL, "http://") && !loopbackURL(c.BaseURL) {
		ws = append(ws, "base_url is plain http: session cookies are not marked Secure and passwords cross the network in clear text")
	}
	if strings.HasPrefix(c.BaseURL, "https://") && len(c.TrustedProxies) == 0 {
		// TLS usually ends at a proxy in front: every client would then be
		// the proxy's one address, and 20 failed logins would lock them all.
		ws = append(ws, "base_url is https but trusted_proxies is empty: if a reverse proxy ends TLS in front of handoff, every client has the proxy's address, and 20 failed logins from anyone refuse every login; list the proxy's address in trusted_proxies")
	}
	for i, ch := range c.Channels {
		if ch.Handshake == hook.HandshakeMeta && ch.VerifyToken == "" {
			ws = append(ws, fmt.Sprintf("channel %q answers Meta's handshake but has no verify_token: every GET /hooks/%s is refused, so the URL cannot be registered", ch.Name, ch.Name))
		}
		if sig := ch.Signature; sig != nil {
			switch {
			case sig.Header != "" && sig.Scheme != hook.SchemeHMACSHA256 && sig.Scheme != hook.SchemeToken:
				ws = append(ws, fmt.Sprintf("channels[%d].signature.header is ignored: %s reads its own headers", i, sig.Scheme))
			case sig.Tolerance != 0 && !hook.NeedsTolerance(sig.Scheme):
				ws = append(ws, fmt.Sprintf("channels[%d].signature.tolerance is ignored: %s signatures carry no timestamp", i, sig.Scheme))
			}
			if sig.Scheme == hook.SchemeTwilio && c.BaseURL == "" {
				ws = append(ws, fmt.Sprintf("channel %q uses the twilio signature without base_url: the signed URL is rebuilt from the Host header and plain http unless TLS ends here; set base_url to the public URL Twilio calls", ch.Name))
			}
			if sig.Scheme == hook.SchemeMailgun {
				ws = append(ws, fmt.Sprintf("channel %q: a mailgun signature covers only its timestamp and token, not the body; keep the URL private", ch.Name))
			}
			continue
		}
		ws = append(ws, fmt.Sprintf("channel %q has no signature: anyone who can reach POST /hooks/%s can submit events", ch.Name, ch.Name))
		if ch.AutoApprove {
			ws = append(ws, fmt.Sprintf("channel %q auto-approves drafts without a signature: anyone who can reach it can make handoff send replies", ch.Name))
		}
	}
	if d := c.Drafter; d.Kind == "openai" && d.APIKey == "" {
		if d.APIKeyEnv == "" {
			ws = append(ws, "drafter: the openai drafter has no api_key_env, so its requests carry no API key")
		} else {
			ws = append(ws, fmt.Sprintf("drafter.api_key_env: %s is not set or is empty, so the openai drafter's requests carry no API key", envLabel(d.APIKeyEnv)))
		}
	}
	if c.Drafter.Delay > 0 {
		ws = append(ws, fmt.Sprintf("drafter.delay is %s: every template draft waits that long (meant for drills and crash tests)", fmtDuration(c.Drafter.Delay)))
	}
	for i, p := range c.Providers {
		if k, ok := kinds.Lookup(p.Kind); ok && k.Warn != nil {
			ws = append(ws, k.Warn(fmt.Sprintf("providers[%d]", i), &p)...)
		}
	}
	return ws
}

// loopback reports whether the listen address addr only accepts local connections.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && loopbackHost(u.Hostname())
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Redacted returns a copy with every secret replaced by "[redacted]" (for the settings page and logs).
// Secrets that are not set stay empty, so the copy still shows which are
// missing; passwords inside URLs are redacted too. The copy shares no memory
// with c.
func (c *Config) Redacted() Config {
	r := *c
	r.BaseURL = redactURL(c.BaseURL)
	r.Channels = slices.Clone(c.Channels)
	for i, ch := range r.Channels {
		r.Channels[i].Fields.MessageID = slices.Clone(ch.Fields.MessageID)
		r.Channels[i].VerifyToken = redact(ch.VerifyToken)
		r.Channels[i].Messages.When = slices.Clone(ch.Messages.When)
		r.Channels[i].Messages.Unless = slices.Clone(ch.Messages.Unless)
		if ch.Signature != nil {
			sig := *ch.Signature
			sig.Secret = redact(sig.Secret)
			sig.Secrets = make([]string, len(ch.Signature.Secrets))
			for j, x := range ch.Signature.Secrets {
				sig.Secrets[j] = redact(x)
			}
			sig.SecretsEnv = slices.Clone(ch.Signature.SecretsEnv)
			r.Channels[i].Signature = &sig
		}
	}
	r.Drafter.BaseURL = redactURL(c.Drafter.BaseURL)
	r.Drafter.APIKey = redact(c.Drafter.APIKey)
	r.Auth.SecretKey = redact(c.Auth.SecretKey)
	if c.Backups.Target != nil {
		t := *c.Backups.Target
		t.AccessKey, t.SecretKey = redact(t.AccessKey), redact(t.SecretKey)
		r.Backups.Target = &t
	}
	r.Routing.Rules = slices.Clone(c.Routing.Rules)
	r.Providers = slices.Clone(c.Providers)
	for i := range r.Providers {
		p := &r.Providers[i]
		p.SigningSecret = redact(p.SigningSecret)
		p.URL = redactURL(p.URL)
		p.LookupURL = redactURL(p.LookupURL)
		p.AuthToken, p.Token, p.Password, p.Auth = redact(p.AuthToken), redact(p.Token), redact(p.Password), redact(p.Auth)
		p.Username = redact(p.Username)
		p.StatusCallback = redactURL(p.StatusCallback)
		p.Fields = maps.Clone(p.Fields)
		if p.URLEnv != "" {
			p.URL = redact(p.URL) // the whole URL is the secret (a hook with a token in it)
		}
	}
	return r
}

func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return redactedValue
}
