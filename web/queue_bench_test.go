package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// BenchmarkQueueWindows serves GET /drafts (the queue's first card and
// page) and GET /api/v1/drafts with 5,000 drafts waiting, half of them on a
// WhatsApp channel whose customers wrote over the last two days (so some
// windows are open, some closed), the other half on a channel without a
// window, printing p50 and p99. It reads only what every version since the
// reply windows has (no store internals), so the same file runs on the
// commit before the window index for a side-by-side figure:
//
//	go test -run '^$' -bench QueueWindows -benchtime 200x ./web/
func BenchmarkQueueWindows(b *testing.B) {
	const n = 5000
	now := time.Now()
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	cfg := twoClients()
	p := config.Provider{Name: "wa", Kind: "whatsapp", Timeout: 10 * time.Second}
	p.APIBase, p.PhoneNumberID, p.Token = "http://127.0.0.1:9", "1", "t"
	cfg.Providers = append(cfg.Providers, p)
	cfg.Channels[0].Provider = "wa"
	fillQueue(b, st, n, now)
	srv, err := New(Deps{Config: cfg, Store: st, Jobs: nopWaker{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	cookie := benchSession(b, srv, st, "ann", store.RoleAdmin, nil)
	for _, path := range []string{"/drafts", "/api/v1/drafts?limit=50"} {
		b.Run(path, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				start := time.Now()
				srv.ServeHTTP(rec, req)
				took = append(took, time.Since(start))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body.String())
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// fillQueue records n events, alternating web-a and web-b, received over
// the last two days, each with a waiting draft, through the store's own
// writes, 1,000 to a transaction.
func fillQueue(b *testing.B, st *store.Store, n int, now time.Time) {
	ctx := context.Background()
	texts := corpus.Texts()
	const batch = 1000
	span := 48 * time.Hour
	for from := 0; from < n; from += batch {
		var encs []*store.Encoded
		for i := from; i < min(n, from+batch); i++ {
			at := now.Add(-span + time.Duration(i)*span/time.Duration(n))
			ch := []string{"web-a", "web-b"}[i%2]
			ev := store.Event{
				ID: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String(), Key: fmt.Sprintf("%s:m%d", ch, i), Channel: ch,
				MessageID: fmt.Sprintf("m%d", i), CorrelationID: ulid.Make().String(), ConversationID: fmt.Sprintf("c%d", i),
				Contact: fmt.Sprintf("+1555%07d", i), Name: texts[i%len(texts)].From, Text: texts[i%len(texts)].Body, ReceivedAt: at,
			}
			enc, err := store.EncodeEvent(ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3, RunAt: at})
			if err != nil {
				b.Fatal(err)
			}
			encs = append(encs, enc)
		}
		if err := st.Update(ctx, func(tx *store.Tx) error {
			for _, e := range encs {
				if _, err := leads.RecordTx(tx, e); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		claimed, err := st.Claim(ctx, now.Add(time.Hour), store.AnyJobs(len(encs)), time.Hour)
		if err != nil || len(claimed) != len(encs) {
			b.Fatalf("claim: %d of %d, %v", len(claimed), len(encs), err)
		}
		if err := st.Update(ctx, func(tx *store.Tx) error {
			for _, j := range claimed {
				ev, err := tx.EventByKey(j.Key)
				if err != nil {
					return err
				}
				d := store.Draft{
					ID: store.DraftID(ev.ID), EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
					ConversationID: ev.ConversationID, Status: store.DraftPending, Text: ev.Text, Drafter: "openai",
					ExecutionID: j.ExecutionID, CreatedAt: ev.ReceivedAt.Add(time.Second), Version: 1,
				}
				if err := tx.InsertDraft(&d, ev); err != nil {
					return err
				}
				if err := leads.DraftedTx(tx, d, ev.Contact, false, d.CreatedAt); err != nil {
					return err
				}
				if err := tx.CompleteJob(j.ID, j.ExecutionID, ev.ReceivedAt); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
