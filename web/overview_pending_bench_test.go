package web

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// BenchmarkOverviewPending serves GET / to an admin and to an approver
// limited to one client over a queue of 300 and of 5,000 waiting drafts
// (every lead stuck past its threshold, as a neglected queue is), and
// prints p50 and p95 of both side by side: the overview reads counts kept
// in meta, so the two columns stay close.
//
//	go test -run '^$' -bench OverviewPending -benchtime 200x ./web/
func BenchmarkOverviewPending(b *testing.B) {
	type row struct {
		who           string
		pending       int
		p50, p95, p99 time.Duration
	}
	var rows []row
	sizes := []int{300, 5000}
	for _, n := range sizes {
		dir := b.TempDir()
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		fillDrafts(b, st, n, time.Now(), false)
		for _, who := range []struct {
			name    string
			role    store.Role
			clients []string
		}{{"admin", store.RoleAdmin, nil}, {"limited", store.RoleApprover, []string{"acme"}}} {
			cfg := twoClients()
			cfg.DataDir = dir
			srv, err := New(Deps{Config: cfg, Store: st, Jobs: nopWaker{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
			if err != nil {
				b.Fatal(err)
			}
			cookie := benchSession(b, srv, st, who.name, who.role, who.clients)
			b.Run(fmt.Sprintf("%s/pending=%d", who.name, n), func(b *testing.B) {
				var took []time.Duration
				for b.Loop() {
					req := httptest.NewRequest(http.MethodGet, "/", nil)
					req.AddCookie(cookie)
					rec := httptest.NewRecorder()
					start := time.Now()
					srv.ServeHTTP(rec, req)
					took = append(took, time.Since(start))
					if rec.Code != http.StatusOK {
						b.Fatalf("GET /: %d %s", rec.Code, rec.Body.String())
					}
				}
				slices.Sort(took)
				r := row{who: who.name, pending: n, p50: took[len(took)/2], p95: took[len(took)*95/100], p99: took[len(took)*99/100]}
				b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(r.p95.Microseconds())/1000, "p95-ms")
				rows = slices.DeleteFunc(rows, func(o row) bool { return o.who == r.who && o.pending == r.pending })
				rows = append(rows, r)
			})
		}
	}
	fmt.Printf("GET / by pending drafts (p50, p95):\n")
	fmt.Printf("%-8s %12s %12s %12s %12s\n", "who", "p50@300", "p50@5000", "p95@300", "p95@5000")
	for _, who := range []string{"admin", "limited"} {
		var at [2]row
		for _, r := range rows {
			if r.who == who {
				at[slices.Index(sizes, r.pending)] = r
			}
		}
		fmt.Printf("%-8s %12s %12s %12s %12s\n", who, at[0].p50.Round(10*time.Microsecond), at[1].p50.Round(10*time.Microsecond), at[0].p95.Round(10*time.Microsecond), at[1].p95.Round(10*time.Microsecond))
	}
}
