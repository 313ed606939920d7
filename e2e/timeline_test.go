package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
)

// Job and attempt vocabulary from the contract.
const (
	jobRunning   = "running"
	jobCompleted = "completed"
	jobDiscarded = "discarded"
	jobCancelled = "cancelled"

	outcomeCompleted    = "completed"
	outcomeLeaseExpired = "lease_expired"

	draftPendingApproval = "pending_approval"
)

// slowDrafterConfig makes every draft take 300ms on 4 workers, so that at any
// moment of a load test several jobs are mid-run and a kill or SIGTERM lands
// on running work rather than on an idle queue.
const slowDrafterConfig = `workers: 4
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id}
    coalesce: 0s
drafter: {kind: template, delay: 300ms}
retry: {max_attempts: 8, base_delay: 100ms, max_delay: 1s}
`

// drafted reports whether an event's work is done: every draft job completed
// and its draft waiting for approval. A job that can no longer complete is
// returned as fatal, so the caller fails at once instead of at the deadline.
func drafted(v eventView) (done bool, fatal string) {
	if len(v.Jobs) == 0 {
		return false, ""
	}
	for _, j := range v.Jobs {
		switch j.State {
		case jobCompleted:
		case jobDiscarded, jobCancelled:
			return false, fmt.Sprintf("job %s is %s (last error %q) and will never complete", j.ID, j.State, j.LastError)
		default:
			return false, ""
		}
	}
	return v.Draft != nil && v.Draft.Status == draftPendingApproval, ""
}

// waitAllDrafted polls every key's timeline until all of them are drafted or
// the deadline passes, and returns the final timelines.
func waitAllDrafted(t *testing.T, inst *instance, keys []string, timeout time.Duration) map[string]eventView {
	t.Helper()
	final := make(map[string]eventView, len(keys))
	pending := slices.Clone(keys)
	var views map[string]eventView
	// A round is hundreds of GETs; Eventually pauses as long as one takes.
	err := proc.Eventually(t.Context(), timeout, func() (bool, error) {
		var err error
		views, err = inst.events(pending)
		if err != nil {
			t.Fatalf("polling for drafts: %v", err)
		}
		var still []string
		for _, k := range pending {
			v := views[k]
			done, fatal := drafted(v)
			if fatal != "" {
				t.Fatalf("event %s: %s", k, fatal)
			}
			if done {
				final[k] = v
			} else {
				still = append(still, k)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		var b strings.Builder
		for _, k := range pending[:min(5, len(pending))] {
			fmt.Fprintf(&b, "\n  %s: %s", k, describe(views[k]))
		}
		t.Fatalf("%d of %d events still not drafted (job completed, draft %s): %v; for example:%s",
			len(pending), len(keys), draftPendingApproval, err, b.String())
	}
	return final
}

// describe summarises a timeline's jobs and draft for failure messages.
func describe(v eventView) string {
	var b strings.Builder
	for _, j := range v.Jobs {
		fmt.Fprintf(&b, "job %s kind=%s state=%s attempt=%d/%d attempts=[", j.ID, j.Kind, j.State, j.Attempt, j.MaxAttempts)
		for n, a := range j.Attempts {
			if n > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "#%d %s %q", a.Number, a.ExecutionID, a.Outcome)
		}
		b.WriteString("] ")
	}
	if v.Draft == nil {
		b.WriteString("draft=null")
	} else {
		fmt.Fprintf(&b, "draft=%s status=%s exec=%s", v.Draft.ID, v.Draft.Status, v.Draft.ExecutionID)
	}
	return b.String()
}

// checkDraftedTimelines checks the finished timelines of many events against
// each other and against the job contract, and returns how many jobs show a
// lease_expired attempt later completed by a different execution: the proof
// that a job left running by a dead process was picked up again.
func checkDraftedTimelines(t *testing.T, views map[string]eventView) (recovered int) {
	t.Helper()
	keys := make([]string, 0, len(views))
	for k := range views {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	execOwner := make(map[string]string) // execution id -> "event key / attempt n"
	for _, key := range keys {
		v := views[key]
		var drafts []jobView
		for _, j := range v.Jobs {
			if j.Kind == "draft" {
				drafts = append(drafts, j)
			}
		}
		// One event, one draft job, however many deliveries and restarts.
		if len(drafts) != 1 {
			t.Errorf("event %s has %d draft jobs, want exactly 1: %s", key, len(drafts), describe(v))
			continue
		}
		j := drafts[0]
		if j.State != jobCompleted {
			t.Errorf("event %s: draft job state %q, want %q", key, j.State, jobCompleted)
		}
		if len(j.Attempts) == 0 || j.Attempt != len(j.Attempts) {
			t.Errorf("event %s: job attempt counter %d but %d attempt records; every attempt is recorded: %s",
				key, j.Attempt, len(j.Attempts), describe(v))
		}

		completedAt, leaseExpiredAt := -1, -1
		for n, a := range j.Attempts {
			if a.Number != n+1 {
				t.Errorf("event %s: attempt %d is numbered %d, want %d", key, n, a.Number, n+1)
			}
			if !ulidRE.MatchString(a.ExecutionID) {
				t.Errorf("event %s: attempt %d execution id %q is not a ULID", key, a.Number, a.ExecutionID)
			}
			if prev, dup := execOwner[a.ExecutionID]; dup {
				t.Errorf("execution id %s used twice: %s and %s attempt %d; every attempt needs its own",
					a.ExecutionID, prev, key, a.Number)
			}
			execOwner[a.ExecutionID] = fmt.Sprintf("%s attempt %d", key, a.Number)
			switch a.Outcome {
			case "":
				t.Errorf("event %s: attempt %d (%s) has no outcome although the job is %s", key, a.Number, a.ExecutionID, j.State)
			case outcomeCompleted:
				if completedAt >= 0 {
					t.Errorf("event %s: attempts %d and %d both completed; a job completes once", key, completedAt+1, n+1)
				}
				completedAt = n
			case outcomeLeaseExpired:
				leaseExpiredAt = n
			}
		}
		if completedAt != len(j.Attempts)-1 {
			t.Errorf("event %s: the last attempt is not the one that completed: %s", key, describe(v))
		}
		if leaseExpiredAt >= 0 && completedAt > leaseExpiredAt &&
			j.Attempts[completedAt].ExecutionID != j.Attempts[leaseExpiredAt].ExecutionID {
			recovered++
		}

		d := v.Draft
		if d == nil {
			t.Errorf("event %s: job completed but no draft", key)
			continue
		}
		if d.EventKey != key || d.Status != draftPendingApproval || d.Text == "" {
			t.Errorf("event %s: draft %+v, want event_key %s, status %s and some text", key, *d, key, draftPendingApproval)
		}
		// The draft is stored by the attempt that called the drafter; a later
		// attempt reuses it. Either way it names one of this job's executions.
		if !slices.ContainsFunc(j.Attempts, func(a attemptView) bool { return a.ExecutionID == d.ExecutionID }) {
			t.Errorf("event %s: draft execution id %q is none of its job's attempts: %s", key, d.ExecutionID, describe(v))
		}
	}
	return recovered
}

// checkNoOpenAttemptBefore fails for every attempt that still has no outcome
// although it started before the given instant: after a restart, work begun by
// the previous process must have been finished or visibly released (outcome
// lease_expired), never left silently "running".
func checkNoOpenAttemptBefore(t *testing.T, views map[string]eventView, before time.Time, what string) {
	t.Helper()
	for key, v := range views {
		for _, j := range v.Jobs {
			for _, a := range j.Attempts {
				if a.Outcome != "" {
					continue
				}
				started, err := time.Parse(time.RFC3339Nano, a.StartedAt)
				if err != nil {
					t.Errorf("event %s: attempt %d started_at %q: %v", key, a.Number, a.StartedAt, err)
					continue
				}
				if started.Before(before) {
					t.Errorf("event %s: job %s is %s with attempt %d (%s) started %s, before the %s, and still no outcome: it was left silently running",
						key, j.ID, j.State, a.Number, a.ExecutionID, a.StartedAt, what)
				}
			}
		}
	}
}

// waitForRunningJob polls the timelines of keys() (re-read every round, since
// load may still be adding to it) until one has a job in state running, and
// returns that key. Tests call it before a kill or SIGTERM so that the signal
// provably lands while a draft is mid-run.
func waitForRunningJob(inst *instance, keys func() []string, timeout time.Duration) (string, error) {
	var running string
	// An event whose jobs all completed is never looked at again: its jobs
	// never run again, and on a loaded machine a pass over every key from
	// the oldest (drafted first) could spend the whole timeout on them.
	finished := map[string]bool{}
	err := proc.Eventually(inst.t.Context(), timeout, func() (bool, error) {
		for _, k := range keys() {
			if finished[k] {
				continue
			}
			v, err := inst.event(k)
			if err != nil {
				return false, err
			}
			done := len(v.Jobs) > 0
			for _, j := range v.Jobs {
				if j.State == jobRunning {
					running = k
					return true, nil
				}
				done = done && j.State == jobCompleted
			}
			finished[k] = done
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("no job in state %s: %w", jobRunning, err)
	}
	return running, nil
}
