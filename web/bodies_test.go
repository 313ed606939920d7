package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// fakeWaits replaces b's timer: each wait that starts sends its expiry
// channel on the returned channel, and the test expires it by sending on
// that. No test waits on the clock; a wait's start is also the proof that
// a request is waiting.
func fakeWaits(b *bodyBudget) <-chan chan time.Time {
	starts := make(chan chan time.Time, 16)
	b.mu.Lock()
	b.timer = func(time.Duration) (<-chan time.Time, func() bool) {
		c := make(chan time.Time, 1)
		starts <- c
		return c, func() bool { return true }
	}
	b.mu.Unlock()
	return starts
}

// waitInLine returns once someone waits in b's line: the start of a wait
// (fakeWaits) comes just before the request joins the semaphore's line,
// and a reservation of nothing succeeds only while nobody waits.
func waitInLine(t *testing.T, b *bodyBudget) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.sem.TryAcquire(0) {
		if time.Now().After(deadline) {
			t.Fatal("nobody joined the line within 10s")
		}
		runtime.Gosched()
	}
}

type reservation struct {
	release func()
	err     error
}

// reserveAsync reserves n bytes in a goroutine and returns its outcome.
func reserveAsync(b *bodyBudget, n int64) <-chan reservation {
	out := make(chan reservation, 1)
	go func() {
		release, err := b.reserve(context.Background(), n, time.Minute)
		out <- reservation{release, err}
	}()
	return out
}

// TestBodyBudget: a reservation that fits is taken at once; one that does
// not waits, first come first served, and gets its room when a body is
// done; a wait that runs out fails with errNoRoom and takes nothing; a
// large first waiter holds back a small one until it gives up; a body
// larger than the whole budget is read alone.
func TestBodyBudget(t *testing.T) {
	b := newBodyBudget(100)
	starts := fakeWaits(b)
	ctx := context.Background()

	a, err := b.reserve(ctx, 60, time.Minute)
	if err != nil {
		t.Fatalf("reserve 60 of 100: %v", err)
	}
	if used, waiting := b.state(); used != 60 || waiting != 0 {
		t.Fatalf("state = %d used, %d waiting; want 60, 0", used, waiting)
	}
	if _, err := b.reserve(ctx, 50, 0); !errors.Is(err, errNoRoom) {
		t.Fatalf("reserve 50 with 40 free and no wait = %v; want errNoRoom at once", err)
	}

	// Waits, then gets its room when a is done.
	second := reserveAsync(b, 50)
	<-starts
	if used, waiting := b.state(); used != 60 || waiting != 1 {
		t.Fatalf("with one waiting: state = %d used, %d waiting; want 60, 1", used, waiting)
	}
	a()
	a() // a second call gives nothing back twice
	r := <-second
	if r.err != nil {
		t.Fatalf("the waiter once room was made: %v", r.err)
	}
	if used, waiting := b.state(); used != 50 || waiting != 0 {
		t.Fatalf("after the handover: state = %d used, %d waiting; want 50, 0", used, waiting)
	}

	// A large waiter first in line holds back a small one that would fit;
	// when the large one's wait runs out, the small one gets in.
	large := reserveAsync(b, 80)
	expireLarge := <-starts
	waitInLine(t, b)
	small := reserveAsync(b, 10)
	<-starts
	select {
	case r := <-small:
		t.Fatalf("the small reservation passed the large one in line: %v", r.err)
	default:
	}
	expireLarge <- time.Time{}
	if r := <-large; !errors.Is(r.err, errNoRoom) {
		t.Fatalf("the large waiter whose wait ran out = %v; want errNoRoom", r.err)
	}
	rs := <-small
	if rs.err != nil {
		t.Fatalf("the small waiter once the large one gave up: %v", rs.err)
	}
	if used, waiting := b.state(); used != 60 || waiting != 0 {
		t.Fatalf("after the large one gave up: state = %d used, %d waiting; want 60 (50 + 10), 0", used, waiting)
	}

	// More than the whole budget takes the whole budget, alone.
	r.release()
	rs.release()
	whole, err := b.reserve(ctx, 1000, 0)
	if err != nil {
		t.Fatalf("a body larger than the budget on an idle budget: %v", err)
	}
	if used, _ := b.state(); used != 100 {
		t.Errorf("a body larger than the budget holds %d; want the whole 100", used)
	}
	whole()
	if used, waiting := b.state(); used != 0 || waiting != 0 {
		t.Errorf("at the end: state = %d used, %d waiting; want 0, 0", used, waiting)
	}

	if release, err := (*bodyBudget)(nil).reserve(ctx, 1<<30, 0); err != nil || release == nil {
		t.Errorf("no budget (limits.bodies_in_flight unset) = %v; want no bound", err)
	}
}

// TestBodyBudgetRace: many reservations at once, behind one barrier, never
// hold more than the budget, and every one ends with its bytes given back.
func TestBodyBudgetRace(t *testing.T) {
	b := newBodyBudget(1000)
	var (
		mu      sync.Mutex
		held    int64
		maxHeld int64
		wg      sync.WaitGroup
	)
	barrier := make(chan struct{})
	for i := range 64 {
		wg.Go(func() {
			<-barrier
			n := int64(100 + 37*(i%9))
			release, err := b.reserve(context.Background(), n, time.Minute)
			if err != nil {
				t.Errorf("reserve %d: %v", n, err)
				return
			}
			mu.Lock()
			held += n
			maxHeld = max(maxHeld, held)
			mu.Unlock()
			runtime.Gosched() // the others run while this one holds its bytes
			mu.Lock()
			held -= n
			mu.Unlock()
			release()
		})
	}
	close(barrier)
	wg.Wait()
	if maxHeld > 1000 {
		t.Errorf("at most %d bytes were held at once; want at most the budget, 1000", maxHeld)
	}
	if used, waiting := b.state(); used != 0 || waiting != 0 {
		t.Errorf("at the end: state = %d used, %d waiting; want 0, 0", used, waiting)
	}
}

// TestWebhookWaitsForRoom: through the real router and store, a webhook
// that finds the body budget full waits; when its wait runs out it gets
// 503 with Retry-After and a sentence, and nothing is recorded; sent again,
// it waits, gets its room once the body ahead is done, and is accepted:
// nothing it was told is lost.
func TestWebhookWaitsForRoom(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.BodiesInFlight = 64 << 10
	cfg.Limits.BodyWait = 7 * time.Second
	e, srv := newEnv(t, cfg, envOptions{})
	starts := fakeWaits(srv.bodies)
	body := corpus.Message(3, "wait-1", "conv-wait-1", "")
	key := "demo:" + body.Want.MessageID

	// Another body holds the whole budget.
	ahead, err := srv.bodies.reserve(context.Background(), 64<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code  int
		retry string
		body  string
		err   error
	}
	post := func() <-chan answer {
		out := make(chan answer, 1)
		go func() {
			resp, err := http.Post(e.url+"/hooks/demo", body.ContentType, bytes.NewReader(body.Raw))
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			out <- answer{code: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: string(raw)}
		}()
		return out
	}

	first := post()
	expire := <-starts // it waits
	expire <- time.Time{}
	a := <-first
	if a.err != nil {
		t.Fatal(a.err)
	}
	want := `{"error":"handoff is already reading as many webhook bodies as limits.bodies_in_flight allows (64KiB) and none finished within limits.body_wait (7s); nothing was recorded, retry in 7s"}`
	if a.code != http.StatusServiceUnavailable || a.retry != "7" || strings.TrimSpace(a.body) != want {
		t.Errorf("a webhook whose wait ran out = %d, Retry-After %q, %s; want 503, 7 and %s", a.code, a.retry, a.body, want)
	}
	if _, err := e.st.EventByKey(key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the 503, EventByKey(%s) = %v; want not found: nothing recorded", key, err)
	}

	second := post()
	<-starts // it waits again
	ahead()  // the body ahead is done
	a = <-second
	if a.err != nil || a.code != http.StatusAccepted || !strings.Contains(a.body, `"status":"accepted"`) {
		t.Fatalf("the webhook sent again once there is room = %d %s, %v; want 202 accepted", a.code, a.body, a.err)
	}
	if ev, err := e.st.EventByKey(key); err != nil || ev.Key != key {
		t.Fatalf("after the 202, EventByKey(%s) = %+v, %v", key, ev, err)
	}
	if used, waiting := srv.bodies.state(); used != 0 || waiting != 0 {
		t.Errorf("once answered: %d bytes held, %d waiting; want 0, 0", used, waiting)
	}
	fams := scrape(t, e)
	wantSeries(t, fams, "handoff_webhooks_total", map[string]float64{
		"channel=demo,client=default,outcome=accepted":      1,
		"channel=demo,client=default,outcome=rejected_busy": 1,
	})
	for _, name := range []string{"handoff_webhook_body_bytes", "handoff_webhooks_waiting"} {
		if v, ok := gauge(t, fams, name); !ok || v != 0 {
			t.Errorf("%s = %v (present %v); want 0 once every webhook is answered", name, v, ok)
		}
	}
}

// TestOversizedBodyRefusedUnread: a Content-Length over the channel's
// limit is a 413 before any room is reserved.
func TestOversizedBodyRefusedUnread(t *testing.T) {
	cfg := config.Default()
	cfg.Channels[0].MaxBody = 1024
	e, srv := newEnv(t, cfg, envOptions{})
	starts := fakeWaits(srv.bodies)
	ahead, err := srv.bodies.reserve(context.Background(), cfg.Limits.BodiesInFlight, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ahead()
	code, got := e.do(t, http.MethodPost, "/hooks/demo", "application/json", bytes.Repeat([]byte("x"), 2048), nil)
	if code != http.StatusRequestEntityTooLarge || got["error"] != "the body is larger than the 1024-byte limit of channel demo" {
		t.Errorf("an oversized body with the budget full = %d %v; want 413 at once", code, got)
	}
	select {
	case <-starts:
		t.Error("the oversized body waited for room")
	default:
	}
}
