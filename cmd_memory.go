package main

import (
	"runtime/debug"

	"github.com/handoff/handoff/config"
)

// applyMemoryLimit gives the process a soft memory limit by default, so
// that a bare binary or `go run` is bounded as the image and the unit are:
// GOMEMLIMIT, when set, wins (the runtime has read it already); otherwise
// limits.memory (default 512MiB; 0 for none) is set with
// debug.SetMemoryLimit. It returns the limit in force ("off" for none) and
// where it came from (env or config), for the start log.
func applyMemoryLimit(l config.Limits, getenv func(string) string) (limit, source string) {
	if getenv("GOMEMLIMIT") != "" {
		return formatLimit(debug.SetMemoryLimit(-1)), "env"
	}
	if l.Memory == 0 {
		return "off", "config"
	}
	debug.SetMemoryLimit(l.Memory)
	return formatLimit(l.Memory), "config"
}

// formatLimit writes a memory limit as GOMEMLIMIT does; the runtime's
// "no limit" (math.MaxInt64) is off.
func formatLimit(n int64) string {
	if n >= 1<<62 {
		return "off"
	}
	return config.FormatSize(n)
}
