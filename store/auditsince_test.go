package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestEachAuditSince: the walk gives the entries at or after since, newest
// first, stops at the first older one, and reads at most its limit.
func TestEachAuditSince(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	for i := range 6 {
		if err := st.Audit(ctx, AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Who: "ann", Action: "approve draft", Target: fmt.Sprint("d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(since time.Time, limit int) string {
		t.Helper()
		var got []string
		err := st.View(func(tx *Tx) error {
			return tx.EachAuditSince(since, limit, func(e AuditEntry) error { got = append(got, e.Target); return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, ",")
	}
	tests := []struct {
		since time.Time
		limit int
		want  string
	}{
		{t0.Add(3 * time.Second), 100, "d5,d4,d3"},
		{t0.Add(3500 * time.Millisecond), 100, "d5,d4"},
		{t0, 2, "d5,d4"},
		{t0.Add(time.Minute), 100, ""},
		{t0.Add(-time.Hour), 100, "d5,d4,d3,d2,d1,d0"},
	}
	for _, tt := range tests {
		if got := walk(tt.since, tt.limit); got != tt.want {
			t.Errorf("EachAuditSince(%s, %d) = %q, want %q", tt.since.Sub(t0), tt.limit, got, tt.want)
		}
	}
}
