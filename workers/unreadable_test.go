package workers

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/storetest"
	"github.com/handoff/handoff/testkit"
)

// TestUnreadableRecordsInTheQueue flips bytes inside two records of a real
// file, the event of one draft job and another draft job's own record, and
// runs the queue on it: the job whose event cannot be read is discarded at
// its first attempt, saying why; the job that cannot be read is stepped
// over by the claim and listed among the dead letters; the others run.
func TestUnreadableRecordsInTheQueue(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := recordDraftEvent(t, st, "web:a", now)
	b := recordDraftEvent(t, st, "web:b", now)
	c := recordDraftEvent(t, st, "web:c", now)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, store.FileName)
	broken := storetest.Replace(`"v":1`, `"v"#1`)
	if err := storetest.Rot(path, "events", []byte(a.Event.ID), broken); err != nil {
		t.Fatal(err)
	}
	if err := storetest.Rot(path, "jobs", []byte(c.Job.ID), broken); err != nil {
		t.Fatal(err)
	}

	st, err = store.Open(dir, store.Options{CheckPages: true})
	if err != nil {
		t.Fatalf("open a file with two unreadable records: %v", err)
	}
	t.Cleanup(func() {
		r, err := st.Inspect()
		if err != nil || len(r.Damaged) > 0 {
			t.Errorf("check after the test: %v %v; want only the unreadable records", err, r.Damaged)
		}
		if len(r.Unreadable) != 2 {
			t.Errorf("check after the test found %d unreadable records, want 2: %+v", len(r.Unreadable), r.Unreadable)
		}
		st.Close()
	})
	d := newCountingTemplate(t)
	r := startRunner(t, st, map[string]jobs.Kind{review.KindDraft: newDraftJob(st, d)}, testOptions())
	r.Wake()

	ja := testkit.WaitJob(t, st, a.Job.ID, store.JobDiscarded)
	if ja.Attempt != 1 || !strings.Contains(ja.LastError, "event "+a.Event.ID+" cannot be read") {
		t.Errorf("the job of the unreadable event: %d attempts, error %q; want one, naming the event", ja.Attempt, ja.LastError)
	}
	testkit.WaitJob(t, st, b.Job.ID, store.JobCompleted)
	if _, err := st.Job(c.Job.ID); err == nil {
		t.Fatal("the rotten job reads")
	}
	var dead []store.DeadLetter
	testkit.Eventually(t, 10*time.Second, func() bool {
		dead, err = st.DeadLetters(store.DeadLetterFilter{}, nil)
		for _, dl := range dead {
			if dl.ID == c.Job.ID && dl.Unreadable != nil && dl.State == "unreadable" {
				return true
			}
		}
		return false
	}, "the unreadable job among the dead letters")
	if n := d.calls.Load(); n != 1 {
		t.Errorf("drafter called %d times, want 1 (web:b only)", n)
	}
	// Nothing is left to claim: the unreadable job no longer heads the queue.
	if got, err := st.Claim(context.Background(), time.Now().Add(time.Hour), store.AnyJobs(10), time.Minute); err != nil || len(got) != 0 {
		t.Errorf("a claim after: %d jobs, %v; want none", len(got), err)
	}
}
