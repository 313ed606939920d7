package provider

import (
	"testing"
	"time"
)

// TestGateHoldsToTheRate: burst sends go at once, then one per interval;
// a held reference keeps its slot; a provider's Retry-After pushes every
// later slot back.
func TestGateHoldsToTheRate(t *testing.T) {
	g := newGate(2, 2) // 2/s, burst 2: one every 500ms after the first two
	t0 := time.Unix(1_700_000_000, 0)
	if w := g.hold("a", t0); w != 0 {
		t.Fatalf("a waits %s, want 0 (burst)", w)
	}
	if w := g.hold("b", t0); w != 0 {
		t.Fatalf("b waits %s, want 0 (burst)", w)
	}
	if w := g.hold("c", t0); w != 500*time.Millisecond {
		t.Fatalf("c waits %s, want 500ms", w)
	}
	if w := g.hold("d", t0); w != time.Second {
		t.Fatalf("d waits %s, want 1s", w)
	}
	// c asks again early: still its own slot, not a new one.
	if w := g.hold("c", t0.Add(200*time.Millisecond)); w != 300*time.Millisecond {
		t.Fatalf("c asked early waits %s, want the 300ms left of its slot", w)
	}
	if w := g.hold("c", t0.Add(500*time.Millisecond)); w != 0 {
		t.Fatalf("c at its slot waits %s, want 0", w)
	}
	g.pause(t0.Add(10 * time.Second))
	if w := g.hold("e", t0.Add(time.Second)); w < 9*time.Second {
		t.Fatalf("e after a 10s Retry-After waits %s, want at least 9s", w)
	}
	if newGate(0, 0).hold("x", t0) != 0 {
		t.Fatal("no rate must never hold")
	}
}
