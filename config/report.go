package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
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
	for i, ch := range c.Channels {
		if sig := ch.Signature; sig != nil {
			switch {
			case sig.Scheme == "standard-webhooks" && sig.Header != "":
				ws = append(ws, fmt.Sprintf("channels[%d].signature.header is ignored: standard-webhooks reads the webhook-signature header", i))
			case sig.Scheme == "hmac-sha256" && sig.Tolerance != 0:
				ws = append(ws, fmt.Sprintf("channels[%d].signature.tolerance is ignored: hmac-sha256 signatures carry no timestamp", i))
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
			ws = append(ws, fmt.Sprintf("drafter.api_key_env: environment variable %s is not set or is empty, so the openai drafter's requests carry no API key", d.APIKeyEnv))
		}
	}
	if c.Drafter.Delay > 0 {
		ws = append(ws, fmt.Sprintf("drafter.delay is %s: every template draft waits that long (meant for drills and crash tests)", fmtDuration(c.Drafter.Delay)))
	}
	for i, p := range c.Providers {
		if p.Kind == "sandbox" && (p.URL != "" || p.LookupURL != "") {
			ws = append(ws, fmt.Sprintf("providers[%d]: url and lookup_url are ignored by kind sandbox", i))
		}
		if p.Kind != "http" {
			continue
		}
		if p.SigningSecretEnv == "" {
			ws = append(ws, fmt.Sprintf("provider %q has no signing_secret_env: its requests are not signed", p.Name))
		}
		if !p.SupportsIdempotencyKey && p.LookupURL == "" {
			ws = append(ws, fmt.Sprintf("provider %q has neither supports_idempotency_key nor lookup_url: every ambiguous send (timeout, 5xx) waits for a person to reconcile it", p.Name))
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
		if ch.Signature != nil {
			sig := *ch.Signature
			sig.Secret = redact(sig.Secret)
			r.Channels[i].Signature = &sig
		}
	}
	r.Drafter.BaseURL = redactURL(c.Drafter.BaseURL)
	r.Drafter.APIKey = redact(c.Drafter.APIKey)
	r.Routing.Rules = slices.Clone(c.Routing.Rules)
	r.Providers = slices.Clone(c.Providers)
	for i := range r.Providers {
		p := &r.Providers[i]
		p.SigningSecret = redact(p.SigningSecret)
		p.URL = redactURL(p.URL)
		p.LookupURL = redactURL(p.LookupURL)
	}
	return r
}

func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return redactedValue
}
