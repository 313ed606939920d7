package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// BenchmarkOverviewPage fills a file as a busy week leaves it — events of
// two clients spread over the last seven days, every one drafted, half of
// the drafts approved (some edited), a tenth rejected, the rest waiting —
// and serves GET / through the real router to an admin, to an approver
// limited to one client, and to an admin with every client on a daily
// budget, printing p50 and p99 of the requests.
//
// HANDOFF_BENCH_EVENTS sets the fill (default 20,000; the figure
// is 200,000); HANDOFF_BENCH_DIR keeps the filled file there and reuses it
// on the next run (a file filled by an older binary is migrated on open),
// so a before/after comparison reads the same records:
//
//	HANDOFF_BENCH_EVENTS=200000 HANDOFF_BENCH_DIR=/var/tmp/overview-200k \
//	  go test -run '^$' -bench OverviewPage -benchtime 200x ./web/
func BenchmarkOverviewPage(b *testing.B) {
	n := 20000
	if v := os.Getenv("HANDOFF_BENCH_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := os.Getenv("HANDOFF_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	now := time.Now()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if _, err := os.Stat(filepath.Join(dir, "filled")); err != nil {
		fillOverview(b, st, n, now)
		if err := os.WriteFile(filepath.Join(dir, "filled"), []byte(strconv.Itoa(n)), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for _, run := range []struct {
		name    string
		role    store.Role
		clients []string
		budget  float64
	}{
		{"admin", store.RoleAdmin, nil, 0},
		{"limited", store.RoleApprover, []string{"acme"}, 0},
		// Every client with a daily budget: the notices of a spent one are computed too.
		{"admin-budgets", store.RoleAdmin, nil, 1000},
	} {
		cfg := twoClients()
		cfg.DataDir = dir
		cfg.Drafter.DailyBudget = run.budget
		srv, err := New(Deps{Config: cfg, Store: st, Jobs: nopWaker{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		if err != nil {
			b.Fatal(err)
		}
		cookie := benchSession(b, srv, st, run.name, run.role, run.clients)
		b.Run(run.name, func(b *testing.B) {
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
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

type nopWaker struct{}

func (nopWaker) Wake() {}

// benchSession makes a person and a session for them, and returns its cookie.
func benchSession(b *testing.B, srv *Server, st *store.Store, name string, role store.Role, clients []string) *http.Cookie {
	ctx := context.Background()
	if _, err := st.User(name); err != nil {
		u := store.User{Name: name, Role: role, Clients: clients, PasswordHash: []byte("$2a$10$not-a-real-hash-for-the-bench-only..........."), CreatedAt: time.Now()}
		if err := st.CreateUser(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
	secret := users.NewSecret()
	now := time.Now()
	if err := st.CreateSession(ctx, users.HashSecret(secret), store.Session{User: name, Role: role, CSRF: users.NewSecret(), CreatedAt: now, LastSeen: now}); err != nil {
		b.Fatal(err)
	}
	return srv.sessionCookieFor(secret, 3600)
}

// fillOverview records n events on the two clients' channels, received over
// the last seven days, each with its draft: half approved (a fifth of
// those edited), a tenth rejected, the rest waiting. A thousand to a
// transaction, through the store's own writes.
func fillOverview(b *testing.B, st *store.Store, n int, now time.Time) {
	fillDrafts(b, st, n, now, true)
}

// fillDrafts is fillOverview; with decided false every draft is left
// waiting (a queue of n pending drafts).
func fillDrafts(b *testing.B, st *store.Store, n int, now time.Time, decided bool) {
	ctx := context.Background()
	const batch = 1000
	week := 7 * 24 * time.Hour
	for from := 0; from < n; from += batch {
		type rec struct {
			enc *store.Encoded
			ev  store.Event
		}
		var recs []rec
		for i := from; i < min(n, from+batch); i++ {
			at := now.Add(-week + time.Duration(i)*week/time.Duration(n))
			ch := []string{"web-a", "web-b"}[i%2]
			id := ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String()
			ev := store.Event{
				ID: id, Key: fmt.Sprintf("%s:m%d", ch, i), Channel: ch, MessageID: fmt.Sprintf("m%d", i),
				CorrelationID: ulid.Make().String(), ConversationID: fmt.Sprintf("c%d", i),
				Contact: fmt.Sprintf("p%d@example.com", i), Name: fmt.Sprintf("Person%d Surname%d", i, i%97),
				Text: fmt.Sprintf("message %d about order %d", i, i%500), ReceivedAt: at,
			}
			enc, err := store.EncodeEvent(ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3, RunAt: at})
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, rec{enc, ev})
		}
		var jobs []store.Job
		err := st.Update(ctx, func(tx *store.Tx) error {
			jobs = jobs[:0]
			for _, r := range recs {
				out, err := leads.RecordTx(tx, r.enc)
				if err != nil {
					return err
				}
				jobs = append(jobs, out.Job)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		claimed, err := st.Claim(ctx, now.Add(time.Hour), store.AnyJobs(len(jobs)), time.Hour)
		if err != nil || len(claimed) != len(jobs) {
			b.Fatalf("claim: %d of %d, %v", len(claimed), len(jobs), err)
		}
		err = st.Update(ctx, func(tx *store.Tx) error {
			for i, j := range claimed {
				ev, err := tx.EventByKey(j.Key)
				if err != nil {
					return err
				}
				d := store.Draft{
					ID: store.DraftID(ev.ID), EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
					ConversationID: ev.ConversationID, Status: store.DraftPending, Text: "Thanks, we are on it.",
					Drafter: "openai", Model: "gpt", PromptVersion: fmt.Sprintf("v%d", 1+(from+i)%3), ExecutionID: j.ExecutionID,
					CreatedAt: ev.ReceivedAt.Add(time.Second), Version: 1, Cost: 0.00042, Currency: "USD",
				}
				if err := tx.InsertDraft(&d, ev); err != nil {
					return err
				}
				if err := tx.CompleteJob(j.ID, j.ExecutionID, ev.ReceivedAt); err != nil {
					return err
				}
				old := d
				switch k := (from + i) % 10; {
				case !decided:
					continue
				case k < 5:
					d.Status = store.DraftApproved
					d.Decision = &store.Decision{By: "ann", At: d.CreatedAt.Add(time.Minute), Text: d.Text, Edited: k == 0}
				case k == 5:
					d.Status = store.DraftRejected
					d.Decision = &store.Decision{By: "ann", At: d.CreatedAt.Add(time.Minute), Reason: "wrong"}
				default:
					continue
				}
				if err := tx.PutDraft(&old, &d); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
