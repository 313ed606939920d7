package workers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"

	"github.com/handoff/handoff/testkit"
)

// bulkFixture is a store with n discarded noop jobs, a bulk run over them
// (and the missing item "gone" after the second), and the job kind.
func bulkFixture(t *testing.T, n int) (*store.Store, *BulkReplayJob, store.BulkRun, delivery.BulkReplayArgs) {
	t.Helper()
	st := openStore(t)
	now := time.Now().UTC()
	var items []string
	for i := range n {
		j := testkit.Enqueue(t, st, "noop", string(rune('a'+i)), 1, now)
		claimed, err := st.Claim(context.Background(), now, store.AnyJobs(1), time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != j.ID {
			t.Fatalf("claim %s: %v %v", j.ID, claimed, err)
		}
		if _, err := st.FinishJob(context.Background(), j.ID, claimed[0].ExecutionID, now, store.Result{Outcome: store.OutcomeDiscarded, Err: "boom"}); err != nil {
			t.Fatal(err)
		}
		items = append(items, j.ID)
		if i == 1 {
			items = append(items, "gone")
		}
	}
	run := store.BulkRun{ID: "01BULKRUN", Total: len(items), Items: items, StartedAt: now}
	args := delivery.BulkReplayArgs{RunID: run.ID, By: "boss", From: "127.0.0.1"}
	k := &BulkReplayJob{Store: st, Outbox: delivery.New(st, config.Default())}
	if err := st.Update(context.Background(), func(tx *store.Tx) error {
		r := run
		return k.Outbox.StartBulkReplayTx(tx, &r, args.By, args.From, now)
	}); err != nil {
		t.Fatal(err)
	}
	return st, k, run, args
}

func bulkJob(t *testing.T, args delivery.BulkReplayArgs, attempt int) store.Job {
	t.Helper()
	nj, err := jobs.NewJob(args, jobs.Opts{})
	if err != nil {
		t.Fatal(err)
	}
	return store.Job{ID: nj.ID, Kind: nj.Kind, Key: nj.Key, Payload: nj.Payload, Attempt: attempt}
}

func readRun(t *testing.T, st *store.Store, id string) store.BulkRun {
	t.Helper()
	var run store.BulkRun
	if err := st.View(func(tx *store.Tx) error {
		var err error
		run, err = tx.BulkRun(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return run
}

func replays(t *testing.T, st *store.Store, id string) int {
	t.Helper()
	j, err := st.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	return len(j.Replays)
}

// TestBulkReplayResumes: an attempt that resumes a run starts at its first
// item not recorded (the recorded one is not replayed again: it has no
// replay of this attempt's), replays each later item once, and a missing
// item fails with the single replay's sentence.
func TestBulkReplayResumes(t *testing.T) {
	st, k, run, args := bulkFixture(t, 3)
	first, second := run.Items[0], run.Items[1]
	// The last attempt replayed and recorded the first item (one commit:
	// an item is never replayed without being recorded), then stopped.
	if err := st.Update(context.Background(), func(tx *store.Tx) error {
		old, err := tx.BulkRun(run.ID)
		if err != nil {
			return err
		}
		r := old
		r.Replayed = []string{first}
		return tx.PutBulkRun(&old, &r)
	}); err != nil {
		t.Fatal(err)
	}
	var paused []int
	k.Pause = func(_ context.Context, i int) { paused = append(paused, i) }
	if err := k.Run(context.Background(), bulkJob(t, args, 2)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := readRun(t, st, run.ID)
	want := []string{first, second, run.Items[3]}
	if got.State != store.BulkDone || got.FinishedAt == nil || !slices.Equal(got.Replayed, want) {
		t.Errorf("run %+v, want done with %v replayed", got, want)
	}
	if len(got.Failed) != 1 || got.Failed[0].ID != "gone" || got.Failed[0].Why != `there is no dead letter "gone"` {
		t.Errorf("failed %v, want gone with its sentence", got.Failed)
	}
	if !slices.Equal(paused, []int{1, 2, 3}) {
		t.Errorf("paused before items %v, want 1, 2, 3", paused)
	}
	for id, n := range map[string]int{first: 0, second: 1, run.Items[3]: 1} {
		if r := replays(t, st, id); r != n {
			t.Errorf("job %s has %d replays, want %d", id, r, n)
		}
	}
}

// TestBulkReplayCancelled: a cancel while the run is held before an item
// stops it there, cancelled, the items after it untouched.
func TestBulkReplayCancelled(t *testing.T) {
	st, k, run, args := bulkFixture(t, 3)
	k.Pause = func(_ context.Context, i int) {
		if i != 1 {
			return
		}
		if err := st.Update(context.Background(), func(tx *store.Tx) error {
			_, err := delivery.CancelBulkReplay(tx, run.ID)
			return err
		}); err != nil {
			t.Error(err)
		}
	}
	if err := k.Run(context.Background(), bulkJob(t, args, 1)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := readRun(t, st, run.ID)
	if got.State != store.BulkCancelled || !got.Cancelled || !slices.Equal(got.Replayed, run.Items[:1]) {
		t.Errorf("run %+v, want cancelled after %s", got, run.Items[0])
	}
	if r := replays(t, st, run.Items[1]); r != 0 {
		t.Errorf("the item after the cancel has %d replays, want 0", r)
	}
	// A finished run is left as it is, and the job has nothing left to do.
	if err := k.Run(context.Background(), bulkJob(t, args, 2)); err != nil {
		t.Errorf("Run of a finished run: %v", err)
	}
	if again := readRun(t, st, run.ID); again.State != store.BulkCancelled || len(again.Replayed) != 1 {
		t.Errorf("after a second Run: %+v", again)
	}
}
