package approvals

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

var t0 = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

// testConfig has two clients, acme (channel web) and beta (channel shop),
// sending through the sandbox, with a 10 s undo window.
func testConfig() *config.Config {
	return &config.Config{
		Clients: []config.Client{{ID: "acme", Name: "Acme"}, {ID: "beta", Name: "Beta"}},
		Channels: []config.Channel{
			{Name: "web", Provider: "sandbox", Client: "acme"},
			{Name: "shop", Provider: "sandbox", Client: "beta"},
		},
		Retry:      config.Retry{MaxAttempts: 3},
		UndoWindow: 10 * time.Second,
	}
}

// fakeSurface records what it posts and updates; it announces acme's
// drafts in chat "C-acme" and beta's in "C-beta".
type fakeSurface struct {
	name    string
	mu      sync.Mutex
	posts   []View
	updates []View
	n       int
}

func (f *fakeSurface) Name() string { return f.name }
func (f *fakeSurface) Chat(client string) (string, bool) {
	return "C-" + client, client == "acme" || client == "beta"
}
func (f *fakeSurface) Post(_ context.Context, chat string, v View) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.posts = append(f.posts, v)
	return fmt.Sprintf("%s.%d", chat, f.n), nil
}
func (f *fakeSurface) Update(_ context.Context, c store.Card, v View) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, v)
	return nil
}
func (f *fakeSurface) seen() (posts, updates []View) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]View(nil), f.posts...), append([]View(nil), f.updates...)
}

type fixture struct {
	st    *store.Store
	cfg   *config.Config
	a     *Approvals
	clock *testkit.Clock
}

func newFixture(t *testing.T, surfaces ...Surface) *fixture {
	t.Helper()
	st := testkit.OpenStore(t, "")
	cfg := testConfig()
	clock := testkit.NewClock(t0)
	a, err := New(st, cfg, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	a.surfaces = append(a.surfaces, surfaces...)
	for _, u := range []store.User{
		{Name: "dana", Role: store.RoleApprover, Email: "dana@acme.test", Clients: []string{"acme"}},
		{Name: "bea", Role: store.RoleApprover, Email: "bea@beta.test", Clients: []string{"beta"}},
		{Name: "root", Role: store.RoleAdmin},
		{Name: "gone", Role: store.RoleApprover, Email: "gone@acme.test", Disabled: true},
	} {
		u.ID, u.CreatedAt, u.PasswordHash = ulid.Make().String(), t0, []byte("x")
		if err := st.CreateUser(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{st: st, cfg: cfg, a: a, clock: clock}
}

// pending records a customer message on channel and saves its draft.
func (f *fixture) pending(t *testing.T, channel, key, text string) store.Draft {
	t.Helper()
	ev := store.Event{
		ID: ulid.Make().String(), Key: channel + ":" + key, Channel: channel, MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "ada@example.com", Name: "Ada", Text: "hello from " + key, ReceivedAt: t0,
	}
	rec, err := leads.RecordEvent(context.Background(), f.st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = %v, %v", key, rec.Created, err)
	}
	d, created, err := review.New(f.st, f.cfg).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: channel, ConversationID: ev.ConversationID,
		Text: text, Drafter: "template", CreatedAt: t0,
	}, 1)
	if err != nil || !created {
		t.Fatalf("Save(%s) = %v, %v", key, created, err)
	}
	return d
}

// runJobs runs every due surface job once, as the runner would, and
// returns how many ran.
func (f *fixture) runJobs(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	ran := 0
	for {
		got, err := f.st.Claim(ctx, f.clock.Now(), store.ClaimLimits{Kinds: map[string]int{KindAnnounce: 10, KindFollow: 10}}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return ran
		}
		for _, j := range got {
			if err := f.a.Run(ctx, j); err != nil {
				t.Fatalf("job %s %s: %v", j.Kind, j.Key, err)
			}
			if err := f.st.Update(ctx, func(tx *store.Tx) error { return tx.CompleteJob(j.ID, j.ExecutionID, f.clock.Now()) }); err != nil {
				t.Fatal(err)
			}
			ran++
		}
	}
}
