package config

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/hook"
)

func TestValidSource(t *testing.T) {
	tests := []struct {
		source string
		want   string // "" for valid, else a substring of the error
	}{
		{"", ""},
		{"/", ""},
		{"/id", ""},
		{"/a/b/0", ""},
		{"/a~0b/c~1d", ""},
		{"/with space/ünïcode", ""},
		{"header:X-Message-Id", ""},
		{"header:x_custom.v2", ""},
		{"id", `"id" is not a JSON pointer (it must start with "/") or header:Name`},
		{"a/b", "is not a JSON pointer"},
		{"#/id", "is not a JSON pointer"},
		{"/a~", `"~" must be followed by 0 or 1`},
		{"/a~2", `"~" must be followed by 0 or 1`},
		{"/~~0", `"~" must be followed by 0 or 1`},
		{"header:", "does not name a request header"},
		{"header:X Message", "does not name a request header"},
		{"header:X:Y", "does not name a request header"},
		{"Header:X-Id", "is not a JSON pointer"},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			err := hook.ValidateSource(tt.source)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateSource(%q) = %v; want nil", tt.source, err)
			case tt.want != "" && err == nil:
				t.Errorf("ValidateSource(%q) = nil; want an error containing %q", tt.source, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("ValidateSource(%q) = %v; want it to contain %q", tt.source, err, tt.want)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"https://example.com/a?b=c", "https://example.com/a?b=[redacted]"},
		{"https://user@example.com/", "https://user@example.com/"},
		{"https://user:pw@example.com/a", "https://user:[redacted]@example.com/a"},
		{"https://user:p@ss@example.com", "https://user:[redacted]@example.com"},
		{"http://u:pw@host:8080?x=a@b", "http://u:[redacted]@host:8080?x=[redacted]"},
		{"https://u:pw@exa mple.com/{ref}", "https://u:[redacted]@exa mple.com/{ref}"},
		{"https://example.com/p?mail=a:b@c", "https://example.com/p?mail=[redacted]"},
		// Query values and fragments go; names, {ref} and empty values stay.
		{"https://crm.example/m?client_ref={ref}&token=s3cr3t&debug=&flag", "https://crm.example/m?client_ref={ref}&token=[redacted]&debug=&flag"},
		{"https://crm.example/m#access_token=abc", "https://crm.example/m#[redacted]"},
		{"https://crm.example/m?abcdef0123456789abcdef", "https://crm.example/m?[redacted]"},
		// Tokens in paths: Slack, Discord, Telegram; words stay.
		{"https://hooks.slack.com/services/T0A1B2C3D/B0123ABCD/abcdEFGH1234ijklMNOP5678", "https://hooks.slack.com/services/[redacted]/[redacted]/[redacted]"},
		{"https://discord.com/api/webhooks/123456789012345678/aBcD-eFgH_iJkL", "https://discord.com/api/webhooks/[redacted]/[redacted]"},
		{"https://api.telegram.org/bot123456:ABC-DEF1234ghIkl/sendMessage", "https://api.telegram.org/[redacted]/sendMessage"},
		{"https://crm.example.com/v1/messages/{ref}", "https://crm.example.com/v1/messages/{ref}"},
		{"not a url", "not a url"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := redactURL(tt.in); got != tt.want {
				t.Errorf("redactURL(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFmtDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{10 * time.Minute, "10m"},
		{2 * time.Second, "2s"},
		{time.Hour + time.Second, "1h0m1s"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		if got := fmtDuration(tt.in); got != tt.want {
			t.Errorf("fmtDuration(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestEditDistanceSuggest(t *testing.T) {
	hs := handlers{"channels": nil, "workers": nil, "addr": nil, "name": nil, "kind": nil}
	tests := []struct{ key, want string }{
		{"chanels", ` (did you mean "channels"?)`},
		{"worker", ` (did you mean "workers"?)`},
		{"zzz", ""},
		{"ad", ""}, // two edits from "addr": too many for so short a key
		{"nmae", ` (did you mean "name"?)`},
		{"id", ""}, // not "kind"
	}
	for _, tt := range tests {
		if got := suggest(tt.key, hs); got != tt.want {
			t.Errorf("suggest(%q) = %q; want %q", tt.key, got, tt.want)
		}
	}
}
