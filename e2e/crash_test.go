package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCrashKeepsAcknowledgedEvents kills the server with SIGKILL in the middle
// of a burst of webhooks while drafts are running, restarts it on the same data
// folder and checks the promises that matter after a crash: an acknowledged
// event is never lost, an unacknowledged one is either absent or recorded once,
// and a job that was running when the process died is run again to completion.
func TestCrashKeepsAcknowledgedEvents(t *testing.T) {
	inst := startInstance(t, slowDrafterConfig)

	const (
		total   = 300
		senders = 32
		// Killing after a third of the answers leaves about 200 deliveries
		// in flight or unsent, and by then drafts (300ms each, 4 workers) are running.
		killAfter = 100
	)
	ids := make([]string, total)
	for n := range ids {
		ids[n] = fmt.Sprintf("crash-%03d", n)
	}

	var (
		first      = make([]delivery, total) // slot n is written only by the sender of ids[n]
		late       = make([]bool, total)     // likewise: answered (or failed) after the kill went out
		killed     atomic.Bool
		next       atomic.Int64
		answers    atomic.Int64
		acceptedMu sync.Mutex
		accepted   []string // keys answered 202, in order, for finding a running job
		killNow    = make(chan struct{})
		start      = make(chan struct{})
		ready, wg  sync.WaitGroup
	)
	for range senders {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start // all senders race from the same instant
			for {
				n := int(next.Add(1) - 1)
				if n >= total {
					return
				}
				res, err := inst.postHook(ids[n])
				first[n] = delivery{id: ids[n], res: res, err: err}
				late[n] = killed.Load()
				if err != nil {
					continue // after the kill: keep going, every id must be tried (before it, reported below)
				}
				if res.code == http.StatusAccepted {
					acceptedMu.Lock()
					accepted = append(accepted, "demo:"+ids[n])
					acceptedMu.Unlock()
				}
				if answers.Add(1) == killAfter {
					close(killNow)
				}
			}
		}()
	}
	sendersDone := make(chan struct{})
	go func() { wg.Wait(); close(sendersDone) }()
	ready.Wait()
	close(start)

	select {
	case <-killNow:
	case <-sendersDone:
	}
	if got := answers.Load(); got < killAfter {
		t.Fatalf("only %d of %d deliveries were answered before any kill; first failure: %v", got, total, firstError(first))
	}
	// Make the kill provably land on a running draft; otherwise the restart
	// would have nothing to recover and the test could not fail.
	runningKey, err := waitForRunningJob(inst, func() []string {
		acceptedMu.Lock()
		defer acceptedMu.Unlock()
		return slices.Clone(accepted)
	}, 5*time.Second)
	if err != nil {
		t.Fatalf("before the kill: %v; with drafts of 300ms queued on 4 workers some must be running", err)
	}
	killAt := time.Now()
	killed.Store(true)
	inst.kill()
	<-sendersDone // the rest fail fast: nothing listens any more

	corr := make(map[string]string, total) // event key -> its one correlation id
	var acked, unanswered []string
	for n, d := range first {
		switch {
		case d.err != nil:
			if !late[n] {
				// Only the kill excuses a broken connection; it is still
				// re-sent below so the other checks see every id.
				t.Errorf("delivery of %s failed before the kill: %v", d.id, d.err)
			}
			unanswered = append(unanswered, d.id)
		case d.res.code == http.StatusAccepted:
			corr["demo:"+d.id] = checkReply(t, d, http.StatusAccepted, "accepted")
			acked = append(acked, d.id)
		default:
			// Every id is new, and a crash is not a reason to answer anything but 202.
			t.Errorf("first delivery of %s: got %s; want 202 accepted, or no answer once killed", d.id, d.res)
		}
	}
	t.Logf("killed while %s was drafting: %d deliveries acknowledged, %d without an answer", runningKey, len(acked), len(unanswered))
	if len(unanswered) == 0 {
		t.Logf("note: the kill landed after the last answer; nothing unacknowledged to re-send")
	}

	inst.restart()

	// Every acknowledged event survived, under the correlation id it was given.
	views, err := inst.events(keysOf(acked))
	if err != nil {
		t.Fatalf("acknowledged events after the crash: %v", err)
	}
	for _, id := range acked {
		checkEvent(t, id, views["demo:"+id], corr["demo:"+id], 0)
	}
	// The release happens on start, before the server takes requests: an
	// attempt of the killed process still without an outcome was not released.
	checkNoOpenAttemptBefore(t, views, killAt, "SIGKILL")

	// Re-deliver everything, as a provider retrying would. An acknowledged id
	// is a duplicate of itself; an unanswered one was either never stored (202
	// now) or stored just before the kill (a duplicate now): both are fine,
	// anything else is not.
	wantDup := make(map[string]int, total)
	for _, d := range inst.postHooks(acked) {
		key := "demo:" + d.id
		if c := checkReply(t, d, http.StatusOK, "duplicate"); c != corr[key] {
			t.Errorf("re-delivery of acknowledged %s: correlation id %q, first answer said %q", d.id, c, corr[key])
		}
		wantDup[key] = 1
	}
	storedUnanswered := 0
	for _, d := range inst.postHooks(unanswered) {
		key := "demo:" + d.id
		switch {
		case d.err == nil && d.res.code == http.StatusAccepted:
			corr[key] = checkReply(t, d, http.StatusAccepted, "accepted")
		case d.err == nil && d.res.code == http.StatusOK:
			corr[key] = checkReply(t, d, http.StatusOK, "duplicate")
			wantDup[key] = 1
			storedUnanswered++
		default:
			t.Errorf("re-delivery of unanswered %s: got %v %v; want 202 accepted or 200 duplicate", d.id, d.res, d.err)
		}
	}
	t.Logf("of the unanswered deliveries, %d had been stored before the kill", storedUnanswered)

	// Now every id has exactly one event: one correlation id, the expected
	// duplicate count, and one draft job (checked once drafted, below).
	views, err = inst.events(keysOf(ids))
	if err != nil {
		t.Fatalf("events after re-delivery: %v", err)
	}
	for _, id := range ids {
		checkEvent(t, id, views["demo:"+id], corr["demo:"+id], wantDup["demo:"+id])
	}
	checkDistinctCorrelations(t, corr)
	if t.Failed() {
		return // the draft checks would only repeat the same breakage
	}

	// Every job finishes, including those that were running when the process died.
	drafted := waitAllDrafted(t, inst, keysOf(ids), 60*time.Second)
	if recovered := checkDraftedTimelines(t, drafted); recovered == 0 {
		t.Errorf("no job shows a %q attempt followed by a %q attempt with another execution id, although %s was drafting when the process was killed: %s",
			outcomeLeaseExpired, outcomeCompleted, runningKey, describe(drafted[runningKey]))
	} else {
		t.Logf("%d jobs left running by the killed process were released and completed", recovered)
	}
	for key, v := range drafted {
		if v.Event.CorrelationID != corr[key] {
			t.Errorf("event %s: correlation id changed to %q while drafting; was %q", key, v.Event.CorrelationID, corr[key])
		}
	}

	inst.stopCleanly()
}

// TestGracefulShutdownUnderLoad sends SIGTERM while webhooks arrive and drafts
// run. The process must exit 0 in time, every acknowledged event must be there
// after a restart, and no attempt begun before the SIGTERM may be left looking
// as if it were still running.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	inst := startInstance(t, slowDrafterConfig)

	const (
		senders   = 16
		termAfter = 100
		// A ceiling on the load, so the drafts still to do after the restart
		// (300ms each on 4 workers) fit the package's time budget.
		maxSends = 320
	)
	var (
		mu        sync.Mutex
		sent      []delivery
		late      = make(map[string]bool) // answered (or failed) after SIGTERM went out
		accepted  []string
		next      atomic.Int64
		acceptedN atomic.Int64
		termSent  atomic.Bool
		termNow   = make(chan struct{})
		stop      = make(chan struct{})
		start     = make(chan struct{})
		ready, wg sync.WaitGroup
	)
	for range senders {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1)
				if n > maxSends {
					return
				}
				id := fmt.Sprintf("term-%04d", n)
				res, err := inst.postHook(id)
				after := termSent.Load()
				mu.Lock()
				sent = append(sent, delivery{id: id, res: res, err: err})
				late[id] = after
				if err == nil && res.code == http.StatusAccepted {
					accepted = append(accepted, "demo:"+id)
				}
				mu.Unlock()
				if err != nil {
					return // before SIGTERM a failure (reported below); after it, the server is gone
				}
				if res.code == http.StatusAccepted && acceptedN.Add(1) == termAfter {
					close(termNow)
				}
			}
		}()
	}
	sendersDone := make(chan struct{})
	go func() { wg.Wait(); close(sendersDone) }()
	ready.Wait()
	close(start)

	select {
	case <-termNow:
	case <-sendersDone:
		mu.Lock()
		failure := firstError(sent)
		mu.Unlock()
		t.Fatalf("load ended with %d accepted, before SIGTERM could be sent; first failure: %v", acceptedN.Load(), failure)
	}
	runningKey, err := waitForRunningJob(inst, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(accepted)
	}, 5*time.Second)
	if err != nil {
		t.Fatalf("before SIGTERM: %v; with drafts of 300ms queued on 4 workers some must be running", err)
	}

	termAt := time.Now()
	termSent.Store(true)
	if err := inst.stop(30 * time.Second); err != nil {
		t.Errorf("after SIGTERM under load: %v; want exit status 0", err)
	}
	t.Logf("SIGTERM while %s was drafting; the process exited after %v", runningKey, time.Since(termAt).Round(time.Millisecond))
	close(stop)
	<-sendersDone

	corr := make(map[string]string)
	var acked []string
	for _, d := range sent {
		switch {
		case d.err != nil && !late[d.id]:
			t.Errorf("delivery of %s failed before SIGTERM: %v", d.id, d.err)
		case d.err != nil:
			// No answer once shutting down: the caller retries, nothing promised.
		case d.res.code == http.StatusAccepted:
			corr["demo:"+d.id] = checkReply(t, d, http.StatusAccepted, "accepted")
			acked = append(acked, d.id)
		case d.res.code == http.StatusServiceUnavailable && late[d.id]:
			// Refusing work while shutting down is allowed; nothing was promised.
		default:
			t.Errorf("delivery of %s: got %s; want 202 accepted (or 503 / no answer after SIGTERM)", d.id, d.res)
		}
	}
	t.Logf("%d deliveries acknowledged of %d sent", len(acked), len(sent))

	inst.restart()

	// Directly after the restart, before the new process can have finished
	// much: whatever the old one began must be closed or visibly released.
	views, err := inst.events(keysOf(acked))
	if err != nil {
		t.Fatalf("acknowledged events after SIGTERM and restart: %v", err)
	}
	checkNoOpenAttemptBefore(t, views, termAt, "SIGTERM")
	// That check alone cannot tell a clean stop from a crash: the restart
	// closes every attempt a dead process left open, as lease_expired. A
	// graceful stop finishes its attempts or hands them back itself (outcome
	// retry, "released at shutdown"), so no attempt of the stopped process
	// may have been closed by the restart.
	states, released := map[string]int{}, 0
	for _, id := range acked {
		v := views["demo:"+id]
		checkEvent(t, id, v, corr["demo:"+id], 0)
		for _, j := range v.Jobs {
			states[j.State]++
			for _, a := range j.Attempts {
				switch {
				case a.Outcome == outcomeLeaseExpired:
					t.Errorf("event %s: job %s attempt %d (%s) ended %s: the restart released it, so the SIGTERM did not stop the runner cleanly",
						v.Event.Key, j.ID, a.Number, a.ExecutionID, a.Outcome)
				case strings.HasPrefix(a.Error, "released at shutdown"):
					released++
				}
			}
		}
	}
	t.Logf("job states right after the restart: %v; %d attempts released at shutdown", states, released)
	checkDistinctCorrelations(t, corr)
	if t.Failed() {
		return
	}

	// Nothing stays running forever: every job completes.
	drafted := waitAllDrafted(t, inst, keysOf(acked), 45*time.Second)
	checkDraftedTimelines(t, drafted)

	inst.stopCleanly()
}

// keysOf turns demo-channel message ids into event keys.
func keysOf(ids []string) []string {
	keys := make([]string, len(ids))
	for n, id := range ids {
		keys[n] = "demo:" + id
	}
	return keys
}

// checkDistinctCorrelations fails when two events share a correlation id: it
// identifies one business event, so two keys cannot have the same one.
func checkDistinctCorrelations(t *testing.T, corr map[string]string) {
	t.Helper()
	owner := make(map[string]string, len(corr))
	for key, c := range corr {
		if other, dup := owner[c]; dup {
			t.Errorf("events %s and %s share correlation id %s", other, key, c)
		}
		owner[c] = key
	}
}

// firstError is the first transport error among deliveries, for messages.
func firstError(ds []delivery) error {
	for _, d := range ds {
		if d.err != nil {
			return d.err
		}
	}
	return nil
}
