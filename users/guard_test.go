package users

import (
	"fmt"
	"testing"
	"time"
)

// TestLoginGuardRules: the back-off grows per failure of the name and
// never refuses the first attempt of an address that has not failed.
func TestLoginGuardRules(t *testing.T) {
	g := NewGuard()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 8 {
		addr := fmt.Sprintf("a%d", i)
		if _, ok := g.Reserve("boss", addr, now); !ok {
			t.Fatalf("the first attempt from fresh address %s was refused", addr)
		}
	}
	retry, ok := g.Reserve("boss", "a0", now)
	if ok || retry != nameDelay(8) {
		t.Errorf("a failed address in the back-off: ok %v retry %s, want refused for %s", ok, retry, nameDelay(8))
	}
	if _, ok := g.Reserve("boss", "a0", now.Add(nameDelay(8))); !ok {
		t.Errorf("the back-off did not end after %s", nameDelay(8))
	}
	if nameDelay(LoginNameFree) != LoginDelay || nameDelay(LoginNameFree+3) != 8*LoginDelay || nameDelay(1000) != LoginDelayMax {
		t.Errorf("delays %s %s %s", nameDelay(LoginNameFree), nameDelay(LoginNameFree+3), nameDelay(1000))
	}
	// A success takes its own count back, and only its own.
	at := now.Add(time.Hour)
	if _, ok := g.Reserve("ann", "b", at); !ok {
		t.Fatal("refused")
	}
	g.Release("ann", "b", at)
	if len(g.pairs[pairKey("ann", "b")]) != 0 || len(g.names["ann"]) != 0 || len(g.addrs["b"]) != 0 {
		t.Errorf("release left counts: %v %v %v", g.pairs, g.names["ann"], g.addrs["b"])
	}
	if !g.UnlockName("boss") || len(g.names["boss"]) != 0 || len(g.pairs[pairKey("boss", "a1")]) != 0 {
		t.Error("unlockName left the name's counts")
	}
	if AddrKey("2001:db8:1:2:3:4:5:6") != AddrKey("2001:db8:1:2:ffff::1") || AddrKey("192.0.2.1") == AddrKey("192.0.2.2") {
		t.Error("addresses are not keyed by IPv4 address and IPv6 /64")
	}
}

// TestLoginAuditBudget: over all pairs at most AuditPerWindow failed-login
// entries are written per window, the last saying so; a new window has a
// new budget.
func TestLoginAuditBudget(t *testing.T) {
	g := NewGuard()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	written, lasts := 0, 0
	for i := range AuditPerWindow + 50 {
		write, _, last := g.auditFailure("boss", fmt.Sprintf("198.51.%d.%d", i/250, i%250), now)
		if write {
			written++
		}
		if last {
			lasts++
		}
	}
	if written != AuditPerWindow || lasts != 1 {
		t.Errorf("%d entries written, %d said to be the last; want %d and 1", written, lasts, AuditPerWindow)
	}
	if write, _, _ := g.auditFailure("boss", "203.0.113.1", now.Add(LoginWindow)); !write {
		t.Error("the next window's first failure is not written")
	}
}

// TestLoginAuditBudgetKeepsTheCount: a pair's failure that the spent
// budget leaves unwritten is counted into the pair's next entry.
func TestLoginAuditBudgetKeepsTheCount(t *testing.T) {
	g := NewGuard()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if write, _, _ := g.auditFailure("boss", "203.0.113.9", t0); !write {
		t.Fatal("the pair's first failure is not written")
	}
	t1 := t0.Add(LoginWindow)
	for i := range AuditPerWindow { // others spend the next window's budget
		g.auditFailure("boss", fmt.Sprintf("198.51.%d.%d", i/250, i%250), t1)
	}
	if write, _, _ := g.auditFailure("boss", "203.0.113.9", t1); write {
		t.Fatal("a failure past the spent budget is written")
	}
	write, more, _ := g.auditFailure("boss", "203.0.113.9", t1.Add(LoginWindow))
	if !write || more != 1 {
		t.Errorf("the pair's entry after the spent window: write %v, more %d; want written with 1 more", write, more)
	}
}
