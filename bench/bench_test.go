package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p0 is the min", hundred, 0, 1 * time.Millisecond},
		{"p50 of four rounds up to the second", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p51 of four is the third", ms(1, 2, 3, 4), 51, 3 * time.Millisecond},
		{"p99 of ten is the tail, not interpolated", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 50), 99, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestBodyTemplate(t *testing.T) {
	for _, size := range []int{minBodySize, 200, 512, 4096} {
		tpl, err := newBodyTemplate(size)
		if err != nil {
			t.Fatalf("newBodyTemplate(%d): %v", size, err)
		}
		id := eventID('m', 7, 123)
		b := tpl.body(id)
		if len(b) != size {
			t.Errorf("size %d: body is %d bytes", size, len(b))
		}
		var v struct{ ID, From, Name, Text string }
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("size %d: body is not JSON: %v\n%s", size, err, b)
		}
		if v.ID != id || v.From != "lead-"+id+"@example.com" || v.Name != "Ada" {
			t.Errorf("size %d: got %+v", size, v)
		}
	}
	if _, err := newBodyTemplate(minBodySize - 1); err == nil {
		t.Error("a body smaller than the fixed fields was accepted")
	}
	if got, want := len(eventID('m', maxRound, maxSeq)), idLen; got != want {
		t.Errorf("largest id is %d bytes, want fixed width %d", got, want)
	}
}

func TestFSType(t *testing.T) {
	mounts := "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n/dev/vdb /tmp/disk\\040two xfs rw 0 0\ntmpfs /tmpx tmpfs rw 0 0\n"
	tests := []struct{ path, want string }{
		{"/home/u", "ext4"},
		{"/tmp", "tmpfs"},
		{"/tmp/bench-1", "tmpfs"},
		{"/tmp/disk two/b", "xfs"},
		{"/tmpfoo", "ext4"},
	}
	for _, tt := range tests {
		if got := fsType(mounts, tt.path); got != tt.want {
			t.Errorf("fsType(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 21345: "21,345", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseFlagsTargets(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.targets, ","); got != "handoff,floor,bare" {
		t.Errorf("default targets %q, want handoff,floor,bare", got)
	}
	cfg, err = parseFlags([]string{"-targets", "floor, bare,floor"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.targets, ","); got != "floor,bare" {
		t.Errorf("targets %q, want floor,bare (trimmed, each once)", got)
	}
	_, err = parseFlags([]string{"-targets", "handoff,sqlite"})
	if err == nil || !strings.Contains(err.Error(), `unknown target "sqlite"`) || !strings.Contains(err.Error(), "floor") {
		t.Errorf("unknown target: err = %v, want it named along with the valid ones", err)
	}
}

func TestServeBaselineFloorNeedsData(t *testing.T) {
	err := serveBaseline(context.Background(), []string{"-" + floorServeFlag, filepath.Join(t.TempDir(), "addr")})
	if err == nil || !strings.Contains(err.Error(), floorDataFlag) {
		t.Errorf("floor without a data folder: err = %v, want one naming -%s", err, floorDataFlag)
	}
}
