package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/handoff/handoff/config"
)

// TestApplyMemoryLimit: without GOMEMLIMIT, limits.memory becomes the
// runtime's limit (0: none); with it, the variable's stands untouched.
func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	none := func(string) string { return "" }

	limit, from := applyMemoryLimit(config.Limits{Memory: 300 << 20}, none)
	if limit != "300MiB" || from != "config" || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("limits.memory 300MiB: %s from %s, runtime %d; want 300MiB from config, set", limit, from, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if limit, from := applyMemoryLimit(config.Limits{Memory: 0}, none); limit != "off" || from != "config" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("limits.memory 0: %s from %s; want off from config, no limit set", limit, from)
	}
	debug.SetMemoryLimit(200 << 20) // as the runtime read GOMEMLIMIT=200MiB
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "200MiB"
		}
		return ""
	}
	if limit, from := applyMemoryLimit(config.Limits{Memory: 512 << 20}, env); limit != "200MiB" || from != "env" || debug.SetMemoryLimit(-1) != 200<<20 {
		t.Errorf("with GOMEMLIMIT: %s from %s, runtime %d; want the variable's 200MiB untouched", limit, from, debug.SetMemoryLimit(-1))
	}
}
