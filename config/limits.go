package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits bound what one process holds in memory (yaml limits).
type Limits struct {
	// Memory (limits.memory) is the Go runtime's soft memory limit, set
	// with debug.SetMemoryLimit at start when GOMEMLIMIT is not set (the
	// variable wins): the garbage collector works harder near it instead
	// of letting the heap grow. 0 means none. Default DefaultMemoryLimit.
	Memory int64
	// BodiesInFlight (limits.bodies_in_flight) is how many bytes of
	// webhook bodies are read and handled at once, over every channel: a
	// request reserves its Content-Length (its channel's max_body when it
	// sends none) before its body is read, and waits for room.
	BodiesInFlight int64
	// BodyWait (limits.body_wait) is how long a webhook waits for room
	// before it is answered 503 with Retry-After; 0 answers at once.
	BodyWait time.Duration
}

// The defaults of limits. A 1 MiB body costs about five times its size
// while it is parsed, recorded and committed, so 32 MiB of bodies is about
// 160 MiB of heap at most, well inside the 512 MiB memory limit.
const (
	DefaultMemoryLimit    = 512 << 20
	DefaultBodiesInFlight = 32 << 20
	DefaultBodyWait       = 10 * time.Second
)

// The bounds of limits, so that a typo cannot starve the process.
const (
	minMemoryLimit    = 64 << 20
	minBodiesInFlight = 64 << 10
	maxBodyWait       = time.Minute
)

func defaultLimits() Limits {
	return Limits{Memory: DefaultMemoryLimit, BodiesInFlight: DefaultBodiesInFlight, BodyWait: DefaultBodyWait}
}

func (d *decoder) limits(path string, n *yaml.Node, l *Limits) {
	d.mapping(path, n, handlers{
		"memory": func(p string, v *yaml.Node) {
			size, ok := d.size(p, v)
			switch {
			case !ok:
			case size != 0 && size < minMemoryLimit:
				d.fail(p, v, "%s is below the %s handoff needs to run; use 0 for no limit", v.Value, FormatSize(minMemoryLimit))
			default:
				l.Memory = size
			}
		},
		"bodies_in_flight": func(p string, v *yaml.Node) {
			size, ok := d.size(p, v)
			switch {
			case !ok:
			case size < minBodiesInFlight:
				d.fail(p, v, "%s is below %s; webhooks would wait on each other", v.Value, FormatSize(minBodiesInFlight))
			default:
				l.BodiesInFlight = size
			}
		},
		"body_wait": func(p string, v *yaml.Node) {
			if d.duration(p, v, &l.BodyWait, true) && l.BodyWait > maxBodyWait {
				d.fail(p, v, "%s is longer than %s; senders give up on a webhook long before", v.Value, fmtDuration(maxBodyWait))
			}
		},
	})
}

// sizeUnits are the suffixes size accepts, the ones GOMEMLIMIT takes.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}}

// size decodes a number of bytes: a whole number, or one with a unit
// (512MiB, 2GiB; B, KiB, MiB, GiB, TiB, as GOMEMLIMIT writes them).
func (d *decoder) size(path string, n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be a size such as 512MiB or a number of bytes, not %s", describe(n))
		return 0, false
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.fail(path, n, "%v", err)
		return 0, false
	}
	return v, true
}

// ParseSize reads a size as limits and GOMEMLIMIT write it: a whole
// number of bytes, or one followed by B, KiB, MiB, GiB or TiB.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.bytes
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (use a number of bytes, or e.g. 512MiB or 2GiB)", s)
	}
	return v * mult, nil
}

// FormatDuration writes a duration as the config's own sentences do, the
// way people write one: 1m, 1.5s, 0s, not 1m0s.
func FormatDuration(d time.Duration) string { return fmtDuration(d) }

// FormatSize writes n bytes in the largest unit that divides it (512MiB).
func FormatSize(n int64) string {
	for i := len(sizeUnits) - 2; i >= 0; i-- { // TiB down to KiB
		if u := sizeUnits[i]; n != 0 && n%u.bytes == 0 {
			return fmt.Sprintf("%d%s", n/u.bytes, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
