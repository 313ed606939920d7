package config

import (
	"strings"
	"testing"
	"time"
)

// TestLimits: limits takes sizes with GOMEMLIMIT's units or in bytes and a
// wait; unset, the defaults; a value out of range is one sentence naming
// the key.
func TestLimits(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       Limits
		err        string
	}{
		{"defaults", "workers: 3\n", Limits{Memory: 512 << 20, BodiesInFlight: 32 << 20, BodyWait: 10 * time.Second}, ""},
		{"units", "limits: {memory: 1GiB, bodies_in_flight: 8MiB, body_wait: 2s}\n", Limits{Memory: 1 << 30, BodiesInFlight: 8 << 20, BodyWait: 2 * time.Second}, ""},
		{"bytes and no wait", "limits: {memory: 0, bodies_in_flight: 1048576, body_wait: 0s}\n", Limits{Memory: 0, BodiesInFlight: 1 << 20}, ""},
		{"quoted with a space", "limits: {bodies_in_flight: \"64 KiB\"}\n", Limits{Memory: 512 << 20, BodiesInFlight: 64 << 10, BodyWait: 10 * time.Second}, ""},
		{"memory too small", "limits: {memory: 1MiB}\n", Limits{}, "config: limits.memory: 1MiB is below the 64MiB handoff needs to run; use 0 for no limit"},
		{"bodies too small", "limits: {bodies_in_flight: 1000}\n", Limits{}, "config: limits.bodies_in_flight: 1000 is below 64KiB"},
		{"not a size", "limits: {memory: lots}\n", Limits{}, `config: limits.memory: "lots" is not a size (use a number of bytes, or e.g. 512MiB or 2GiB)`},
		{"decimal units", "limits: {memory: 512MB}\n", Limits{}, `"512MB" is not a size`},
		{"negative", "limits: {bodies_in_flight: -5}\n", Limits{}, `"-5" is not a size`},
		{"wait too long", "limits: {body_wait: 2m}\n", Limits{}, "config: limits.body_wait: 2m is longer than 1m"},
		{"unknown key", "limits: {bodies: 1MiB}\n", Limits{}, `config: limits: unknown key "bodies"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), func(string) string { return "" })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.Limits != tt.want {
				t.Errorf("Limits = %+v, want %+v", c.Limits, tt.want)
			}
		})
	}
	if got := Default().Limits; got != defaultLimits() {
		t.Errorf("Default().Limits = %+v, want %+v", got, defaultLimits())
	}
}

// TestFormatSize: the largest unit that divides, so messages read as the
// file is written.
func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{512 << 20: "512MiB", 1 << 30: "1GiB", 64 << 10: "64KiB", 1000: "1000B", 1536 << 10: "1536KiB", 0: "0B"} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
		if back, err := ParseSize(FormatSize(in)); err != nil || back != in {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", in, back, err)
		}
	}
}
