package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// failedLogins is the audit log's "login failed" entries, newest first.
func failedLogins(t *testing.T, st *store.Store) []store.AuditEntry {
	t.Helper()
	log, err := st.AuditLog(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, en := range log {
		if en.Action == "login failed" {
			out = append(out, en)
		}
	}
	return out
}

// TestFailedLoginsAreCoalesced: the failures of one name from one address
// write one audit entry per login window; the next entry after the window
// says how many were counted meanwhile. Another address gets its own.
func TestFailedLoginsAreCoalesced(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, proxiedConfig(), envOptions{now: clk.Now})
	addUser(t, e.st, "boss", store.RoleAdmin, "", "right-password-1")
	b := newBrowser(t, e.url)
	for i := 1; i <= users.LoginPerPair; i++ {
		if p := loginFrom(b, "198.51.100.7", "boss", "wrong-password"); p.code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i, p.code)
		}
	}
	if p := loginFrom(b, "198.51.100.7", "boss", "wrong-password"); p.code != http.StatusTooManyRequests {
		t.Fatalf("the try past the limit: %d, want 429", p.code)
	}
	if got := failedLogins(t, e.st); len(got) != 1 {
		t.Fatalf("%d failed-login entries after %d failures from one address, want 1: %+v", len(got), users.LoginPerPair, got)
	}
	// Another address is its own pair. (The name is in back-off now, so
	// its first guess is compared and the next waits.)
	if p := loginFrom(b, "198.51.100.8", "boss", "wrong-password"); p.code != http.StatusUnauthorized {
		t.Fatalf("first guess from a second address: %d, want 401", p.code)
	}
	// Both entries bear the same (frozen) time, so the log's order between
	// them is not defined: the second must be from the other address.
	if got := failedLogins(t, e.st); len(got) != 2 || got[0].From == got[1].From {
		t.Fatalf("entries after a second address failed: %+v; want one more, from it", got)
	}
	// After the window the pair's next failure is written, with the count.
	clk.Add(users.LoginWindow + time.Second)
	if p := loginFrom(b, "198.51.100.7", "boss", "wrong-password"); p.code != http.StatusUnauthorized {
		t.Fatalf("wrong password after the window: %d, want 401", p.code)
	}
	got := failedLogins(t, e.st)
	if len(got) != 3 || got[0].From != "198.51.100.7" {
		t.Fatalf("entries after the window: %+v; want a third, from 198.51.100.7", got)
	}
	if want := fmt.Sprintf("%d more failed since the last entry", users.LoginPerPair-1); !strings.Contains(got[0].Detail, want) {
		t.Errorf("the entry after the window says %q; want it to hold %q", got[0].Detail, want)
	}
}
