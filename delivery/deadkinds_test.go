package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
)

// tidyRules are a job kind's dead-letter rules as a concept above
// delivery would declare them: its job is about a channel, is unsafe to
// replay, and can be regenerated.
type tidyRules struct{}

func (tidyRules) Describe(_ *store.Tx, dl *store.DeadLetter) {
	dl.Channel = "sms"
	dl.Effects = append(dl.Effects, "bins emptied")
	dl.Safe, dl.Why = false, "the bins may be emptied twice"
}

func (tidyRules) Regenerate(_ *store.Tx, j store.Job) (json.RawMessage, error) {
	return json.RawMessage(`{"fresh":"` + j.Key + `"}`), nil
}

// TestDeadKindRules: a discarded job is described by its kind's rules, as
// handed in by Judging, inside the list's walk (its filter sees the channel
// the rules name); a kind without rules is replayed as it is and cannot be
// regenerated; a Regenerator gives the regenerate's arguments.
func TestDeadKindRules(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	if err := st.Update(ctx, func(tx *store.Tx) error {
		_, _, err := tx.Enqueue(store.NewJob{ID: ulid.Make().String(), Kind: "tidy", Key: "t-1", MaxAttempts: 1}, "c-1", t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, st, t0, time.Minute)
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, store.Result{Outcome: store.OutcomeDiscarded, Err: "bins jammed"}); err != nil {
		t.Fatal(err)
	}
	plain := delivery.NewForTest(st.Store, 3, func() string { return ulid.Make().String() })
	ruled := plain.Judging(delivery.DeadKinds{"tidy": tidyRules{}})
	bySMS := store.DeadLetterFilter{Kind: store.DeadJob, Channel: "sms"}

	dl, err := plain.DeadLetter(j.ID)
	if err != nil || !dl.Safe || dl.Why != "a replay runs the job again under the same key" || dl.Channel != "" || len(dl.Effects) != 0 {
		t.Errorf("without rules: %+v, %v; want safe, run again as it is", dl, err)
	}
	if got, err := plain.DeadLetters(bySMS); err != nil || len(got) != 0 {
		t.Errorf("without rules, by channel sms: %d items, %v; want none (no rule names its channel)", len(got), err)
	}
	_, err = plain.Replay(ctx, j.ID, store.Replay{By: "boss", At: t0, Regenerate: true})
	var nr *delivery.NotRegenerableError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), j.ID+" is a tidy job") {
		t.Errorf("regenerate without rules: %v, want NotRegenerableError naming a tidy job", err)
	}

	dl, err = ruled.DeadLetter(j.ID)
	if err != nil || dl.Safe || dl.Why != "the bins may be emptied twice" || dl.Channel != "sms" || !slices.Equal(dl.Effects, []string{"bins emptied"}) {
		t.Errorf("with rules: %+v, %v; want the rules' channel, effects and sentence", dl, err)
	}
	if got, err := ruled.DeadLetters(bySMS); err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Errorf("with rules, by channel sms: %v, %v; want the tidy job", got, err)
	}
	_, err = ruled.Replay(ctx, j.ID, store.Replay{By: "boss", At: t0, Regenerate: true})
	var unsafe *delivery.UnsafeReplayError
	if !errors.As(err, &unsafe) || unsafe.Why != "the bins may be emptied twice" {
		t.Errorf("unconfirmed regenerate: %v, want UnsafeReplayError with the rules' sentence", err)
	}
	if _, err := ruled.Replay(ctx, j.ID, store.Replay{By: "boss", At: t0, Regenerate: true, Confirmed: true}); err != nil {
		t.Fatalf("confirmed regenerate: %v", err)
	}
	if got := mustJob(t, st, j.ID); got.State != store.JobAvailable || string(got.Payload) != `{"fresh":"t-1"}` {
		t.Errorf("after the regenerate: %s with payload %s; want available with the Regenerator's", got.State, got.Payload)
	}
}
