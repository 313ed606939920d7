package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestDuplicateStormRealBinary sends every delivery of 50 events 8 times at
// once, as a provider that retries aggressively would. The real binary, with
// its default configuration, must record each event exactly once and tell
// every later delivery the first one's correlation id.
func TestDuplicateStormRealBinary(t *testing.T) {
	inst := startInstance(t, "") // no config: the demo channel and defaults

	const (
		distinct = 50
		copies   = 8
	)
	// Interleaved (id 0..49, then again 0..49, ...) so that copies of one id
	// are spread over the whole storm rather than sent side by side.
	ids := make([]string, 0, distinct*copies)
	for range copies {
		for n := range distinct {
			ids = append(ids, fmt.Sprintf("storm-%02d", n))
		}
	}

	results := make([]delivery, len(ids)) // slot n is written only by goroutine n
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	for n, id := range ids {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start // every request races from the same instant
			res, err := inst.postHook(id)
			results[n] = delivery{id: id, res: res, err: err}
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()

	acceptedCorr := make(map[string]string, distinct) // event key -> correlation id of its 202
	accepted, duplicates := 0, 0
	for _, d := range results {
		key := "demo:" + d.id
		switch {
		case d.err != nil:
			t.Errorf("delivery of %s: %v", d.id, d.err)
		case d.res.code == http.StatusAccepted:
			accepted++
			c := checkReply(t, d, http.StatusAccepted, "accepted")
			if prev, dup := acceptedCorr[key]; dup {
				t.Errorf("%s accepted twice (correlation ids %s and %s); exactly one delivery may record it", key, prev, c)
			}
			acceptedCorr[key] = c
		case d.res.code == http.StatusOK:
			duplicates++
			checkReply(t, d, http.StatusOK, "duplicate")
		default:
			t.Errorf("delivery of %s: got %s; want 202 accepted or 200 duplicate", d.id, d.res)
		}
	}
	if accepted != distinct || duplicates != distinct*(copies-1) {
		t.Errorf("storm answers: %d accepted, %d duplicate; want %d and %d", accepted, duplicates, distinct, distinct*(copies-1))
	}
	// A duplicate must name the first delivery's correlation id, even when it
	// was answered before the first delivery's own response reached us.
	for _, d := range results {
		key := "demo:" + d.id
		if d.err == nil && d.res.code == http.StatusOK && d.res.reply.CorrelationID != acceptedCorr[key] {
			t.Errorf("duplicate of %s carries correlation id %q; the accepted delivery got %q",
				d.id, d.res.reply.CorrelationID, acceptedCorr[key])
		}
	}
	checkDistinctCorrelations(t, acceptedCorr)

	// The stored events agree: one each, seven duplicates counted, one draft job.
	keys := make([]string, 0, distinct)
	for n := range distinct {
		keys = append(keys, fmt.Sprintf("demo:storm-%02d", n))
	}
	views, err := inst.events(keys)
	if err != nil {
		t.Fatalf("events after the storm: %v", err)
	}
	for n := range distinct {
		id := fmt.Sprintf("storm-%02d", n)
		v := views["demo:"+id]
		checkEvent(t, id, v, acceptedCorr["demo:"+id], copies-1)
		drafts := 0
		for _, j := range v.Jobs {
			if j.Kind == "draft" {
				drafts++
			}
		}
		if drafts != 1 {
			t.Errorf("event demo:%s has %d draft jobs after %d deliveries, want 1: %s", id, drafts, copies, describe(v))
		}
	}

	inst.stopCleanly()
}
