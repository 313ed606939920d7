package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
	"github.com/handoff/handoff/testkit"
	"github.com/oklog/ulid/v2"
)

// severalConfig is three servers' config on one PostgreSQL database: each
// message is drafted (300 ms) and auto-approved to a sandbox provider that
// takes 300 ms a send, so a kill lands on drafts and sends in flight.
const severalConfig = `workers: 4
database_url: %q
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    coalesce: 0s
    provider: slow
    auto_approve: true
providers:
  - {name: slow, kind: sandbox, delay: 300ms}
drafter: {kind: template, delay: 300ms}
retry: {max_attempts: 8, base_delay: 100ms, max_delay: 1s}
`

// TestSeveralServersUnderFaults runs three servers of the real binary on
// one PostgreSQL database, as behind a round-robin load balancer, and
// under a burst of the corpus's messages SIGKILLs one of them mid-work and
// then restarts PostgreSQL. A delivery that fails (the server killed, the
// database down) is sent again to the next server, as a load balancer's
// client retries. Then: every acknowledged event is there once, every
// message is drafted by one job and its reply sent once, and the jobs the
// killed server was running were released and run by another server
// without waiting for their leases.
func TestSeveralServersUnderFaults(t *testing.T) {
	requireBinary(t)
	ctx := context.Background()
	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() }) // after the servers' cleanups, registered later
	severalUnderFaults(t, pg.URL, "restarted PostgreSQL", func() error { return pg.Restart(ctx) })
}

// TestSeveralServersThroughACrash is TestSeveralServersUnderFaults with a
// crash of PostgreSQL for the database's fault (an immediate shutdown:
// what was not yet written to the WAL is lost, the next start replays
// it): every commit a server acknowledged was on the disk, so nothing
// acknowledged is lost, and a commit whose answer the crash cut is known
// by its mark, not by a transaction id the restarted server gives again.
func TestSeveralServersThroughACrash(t *testing.T) {
	requireBinary(t)
	ctx := context.Background()
	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() })
	severalUnderFaults(t, pg.URL, "crashed PostgreSQL", func() error { return pg.Crash(ctx) })
}

// TestSeveralServersFailover is TestSeveralServersUnderFaults with a
// failover for the database's fault: the servers' database_url names a
// primary and its streaming standby (host=a,b), and mid-burst the primary
// stops and the standby is promoted. Every server goes on, on the new
// primary, without a restart; nothing acknowledged is lost.
func TestSeveralServersFailover(t *testing.T) {
	requireBinary(t)
	ctx := context.Background()
	primary, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop() }) // a second Stop is harmless
	standby, err := primary.StartStandby(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop() })
	url := fmt.Sprintf("host=%s,%s port=5432,5432 user=handoff dbname=postgres sslmode=disable", primary.Dir, standby.Dir)
	severalUnderFaults(t, url, "failed over to the standby", func() error {
		if err := primary.Stop(); err != nil {
			return err
		}
		return standby.Promote(ctx)
	})
}

// severalUnderFaults is the burst of TestSeveralServersUnderFaults on the
// database at dbURL, with pgFault (told as done) for the database's fault.
func severalUnderFaults(t *testing.T, dbURL, done string, pgFault func() error) {
	cfg := fmt.Sprintf(severalConfig, dbURL)
	servers := []*instance{startInstance(t, cfg), startInstance(t, cfg), startInstance(t, cfg)}

	const (
		total     = 150
		senders   = 12
		killAfter = 40
		pgAfter   = 90
	)
	var (
		next, answered atomic.Int64
		refused        atomic.Int64 // deliveries answered 5xx (and sent again)
		down           atomic.Int32 // the killed server, +1; 0 while all run
		mu             sync.Mutex
		status         = map[string]int{} // id → the code that finally answered it
		corr           = map[string]string{}
		killNow        = make(chan struct{})
		pgNow          = make(chan struct{})
		wg             sync.WaitGroup
	)
	ids := make([]string, total)
	for n := range ids {
		ids[n] = fmt.Sprintf("multi-%03d", n)
	}
	for range senders {
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if n >= total {
					return
				}
				// Round robin, past a server that is down, and again on a
				// failure, for up to a minute.
				deadline := time.Now().Add(time.Minute)
				for try := n; ; try++ {
					s := try % len(servers)
					if int(down.Load()) == s+1 {
						continue
					}
					res, err := servers[s].postHook(ids[n])
					if err == nil && (res.code == http.StatusAccepted || res.code == http.StatusOK) {
						mu.Lock()
						status[ids[n]], corr[ids[n]] = res.code, res.reply.CorrelationID
						mu.Unlock()
						break
					}
					if err == nil && res.code >= 500 {
						refused.Add(1)
					}
					if err == nil && res.code < 500 {
						t.Errorf("delivery of %s to server %d: %s; want 2xx, or 5xx while the database is down", ids[n], s, res)
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("delivery of %s: no server took it within a minute; last %s, %v", ids[n], res, err)
						break
					}
					time.Sleep(20 * time.Millisecond) // a client's pause before its next try
				}
				switch answered.Add(1) {
				case killAfter:
					close(killNow)
				case pgAfter:
					close(pgNow)
				}
			}
		})
	}

	<-killNow
	// Kill a server while it is running jobs: one whose drafts or sends
	// are under way, seen in the events it acknowledged.
	victim, runningKey := -1, ""
	testkit.Eventually(t, 20*time.Second, func() bool {
		for s, srv := range servers {
			mu.Lock()
			var keys []string
			for id := range status {
				keys = append(keys, "demo:"+id)
			}
			mu.Unlock()
			views, err := srv.events(keys)
			if err != nil {
				continue
			}
			for key, v := range views {
				for _, j := range v.Jobs {
					if j.State == jobRunning && len(j.Attempts) > 0 && ownedBy(servers, s, j.Attempts[len(j.Attempts)-1].ExecutionID) {
						victim, runningKey = s, key
						return true
					}
				}
			}
		}
		return false
	}, "a server running a job")
	down.Store(int32(victim + 1))
	servers[victim].kill()
	t.Logf("killed server %d while it ran the job of %s", victim, runningKey)

	<-pgNow
	if err := pgFault(); err != nil {
		t.Fatal(err)
	}
	t.Log(done)
	wg.Wait()
	t.Logf("%d deliveries answered 5xx and were sent again", refused.Load())
	if t.Failed() {
		return
	}
	servers[victim].restart()
	down.Store(0)

	// Every message is there once, drafted by one job, and its reply sent
	// once; the killed server's job ran to completion on another.
	keys := make([]string, total)
	for n, id := range ids {
		keys[n] = "demo:" + id
	}
	final := map[string]dlvTimeline{}
	var stuck string // the first message not yet done, and where it stands
	t.Cleanup(func() {
		if t.Failed() && stuck != "" {
			t.Logf("the first message not done: %s", stuck)
		}
	})
	testkit.Eventually(t, 90*time.Second, func() bool {
		for n, key := range keys {
			if _, done := final[key]; done {
				continue
			}
			var tl dlvTimeline
			if code, err := dlvGet(servers[n%len(servers)], "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
				stuck = fmt.Sprintf("%s: GET its timeline from server %d: %d %v", key, n%len(servers), code, err)
				return false
			}
			stuck = fmt.Sprintf("%s: %s", key, tl.standing())
			if tl.Outbox == nil || tl.Outbox.Status != "sent" {
				if tl.Outbox != nil && (tl.Outbox.Status == "failed" || tl.Outbox.Status == "needs_reconciliation") {
					t.Fatalf("reply of %s ended %s (%s); want sent", key, tl.Outbox.Status, tl.Outbox.Note)
				}
				return false
			}
			for _, j := range tl.Jobs {
				if j.State != jobCompleted {
					return false
				}
			}
			final[key] = tl
		}
		stuck = ""
		return true
	}, "every message drafted and its reply sent")

	byKind := map[string]int{}
	for key, tl := range final {
		kinds := map[string]int{}
		for _, j := range tl.Jobs {
			kinds[j.Kind]++
		}
		if kinds["draft"] != 1 || kinds["deliver"] != 1 {
			t.Errorf("%s: jobs %v; want one draft and one deliver job", key, kinds)
		}
		byKind["draft"] += kinds["draft"]
	}
	var box struct {
		Messages []dlvSandboxMessage `json:"messages"`
	}
	if code, err := dlvGet(servers[0], "/api/v1/sandbox/messages?limit=1000", &box); err != nil || code != http.StatusOK {
		t.Fatalf("GET sandbox messages: %d %v", code, err)
	}
	byRef := map[string]int{}
	for _, m := range box.Messages {
		byRef[m.Ref]++
		if m.Repeats != 0 {
			t.Errorf("sandbox message %s (%s) was sent %d more times; want 0", m.ID, m.Ref, m.Repeats)
		}
	}
	for key, tl := range final {
		if byRef[tl.Outbox.ID] != 1 {
			t.Errorf("%s: %d sandbox messages for %s; want 1", key, byRef[tl.Outbox.ID], tl.Outbox.ID)
		}
	}
	if len(box.Messages) != total {
		t.Errorf("the sandbox received %d messages; want %d, one per message", len(box.Messages), total)
	}
	// The killed server's jobs: attempts of its own released before their
	// leases could end (lease_expired), each job then completed by another
	// execution (every job is completed, above). Not only the job seen
	// running before the kill: that one may have finished in the moment
	// between the look and the SIGKILL, while its server, busy with the
	// burst's backlog, had taken others.
	released := 0
	for _, tl := range final {
		for _, j := range tl.Jobs {
			for _, a := range j.Attempts {
				if a.Outcome == outcomeLeaseExpired && ownedBy(servers, victim, a.ExecutionID) {
					released++
				}
			}
		}
	}
	if released == 0 {
		t.Errorf("no attempt of the killed server %d was released (%s); it was running the job of %s just before the kill", victim, outcomeLeaseExpired, runningKey)
	}
	t.Logf("%d attempts of the killed server were released and run again elsewhere", released)
	for _, s := range servers {
		s.stopCleanly()
	}
}

// ownedBy reports whether execution execID was claimed by servers[s]: on a
// shared database a server begins the randomness of each execution's ULID
// with its owner name (store.Owner), which it logs at start.
func ownedBy(servers []*instance, s int, execID string) bool {
	id, err := ulid.ParseStrict(execID)
	if err != nil {
		return false
	}
	log, err := os.ReadFile(servers[s].log.Name())
	if err != nil {
		return false
	}
	return bytes.Contains(log, []byte(`"owner":"`+hex.EncodeToString(id.Entropy()[:4])+`"`))
}
