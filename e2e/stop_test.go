package e2e

import (
	"net/http"
	"testing"
	"time"
)

// dockerStopWait is how long `docker stop` (and Kubernetes' default grace,
// for most of it) waits after SIGTERM before it sends SIGKILL.
const dockerStopWait = 10 * time.Second

// stalledDrafterConfig makes a draft take a minute: longer than any stop may
// wait, so a SIGTERM always lands on a draft in flight.
const stalledDrafterConfig = `workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id}
    coalesce: 0s
drafter: {kind: template, delay: 60s}
retry: {max_attempts: 8, base_delay: 100ms, max_delay: 1s}
`

// TestStopInsideDockersWait sends SIGTERM while a draft is running and will
// run for a minute more, as `docker stop` does, and waits only as long as
// docker would before killing: the process must cancel the draft, release
// its job and exit 0 by itself. After the restart the draft's job is still
// to do (not discarded, not completed with half an answer), with the
// stopped attempt closed.
func TestStopInsideDockersWait(t *testing.T) {
	inst := startInstance(t, stalledDrafterConfig)
	res, err := inst.postHook("stop-1")
	if err != nil || res.code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo = %v, %v; want 202", res, err)
	}
	if _, err := waitForRunningJob(inst, func() []string { return []string{"demo:stop-1"} }, 15*time.Second); err != nil {
		t.Fatalf("the draft never started: %v", err)
	}
	if err := inst.stop(dockerStopWait); err != nil {
		t.Fatalf("SIGTERM with a draft in flight: %v; want exit 0 within docker stop's %v", err, dockerStopWait)
	}

	inst.restart()
	v, err := inst.event("demo:stop-1")
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if v.Draft != nil {
		t.Errorf("a draft was stored for a drafting call that was cancelled: %+v", *v.Draft)
	}
	if len(v.Jobs) != 1 {
		t.Fatalf("after the restart the event has %d jobs, want its one draft job: %+v", len(v.Jobs), v.Jobs)
	}
	j := v.Jobs[0]
	if j.State == jobDiscarded || j.State == jobCompleted || j.State == jobCancelled {
		t.Errorf("the stopped draft job is %s (%q), want it still to do", j.State, j.LastError)
	}
	if len(j.Attempts) == 0 || j.Attempts[0].EndedAt == "" {
		t.Errorf("the attempt the stop cut short is not closed: %+v", j.Attempts)
	}
	inst.kill() // the restarted draft would take a minute; nothing more to check
}
