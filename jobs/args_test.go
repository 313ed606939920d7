package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

var argsT0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// enqueueArgs enqueues args in one transaction through Enqueue.
func enqueueArgs(t *testing.T, st *store.Store, args Args, o Opts) (store.Job, bool) {
	t.Helper()
	var (
		j       store.Job
		created bool
	)
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		var err error
		j, created, err = Enqueue(tx, args, o)
		return err
	})
	if err != nil {
		t.Fatalf("Enqueue(%+v): %v", args, err)
	}
	return j, created
}

// TestEnqueueDecode: typed arguments go in under their kind and key and
// come back out as they went in; the key is the job's Key, not repeated
// in its payload, and arguments with nothing but a key store no payload.
func TestEnqueueDecode(t *testing.T) {
	tests := []struct {
		name        string
		args        Args
		wantKind    string
		wantKey     string
		wantPayload string
	}{
		{"draft", DraftArgs{EventKey: "web:m-1"}, KindDraft, "web:m-1", ""},
		{"regenerate", DraftArgs{EventKey: "web:m-2", RegenerateVersion: 3}, KindDraft, "web:m-2", `{"regenerate_version":3}`},
		{"deliver", DeliverArgs{OutboxID: "conv-1:d-1"}, KindDeliver, "conv-1:d-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			j, created := enqueueArgs(t, st, tt.args, Opts{MaxAttempts: 3, CorrelationID: "corr", Now: argsT0})
			if !created || j.Kind != tt.wantKind || j.Key != tt.wantKey || string(j.Payload) != tt.wantPayload || j.MaxAttempts != 3 || j.CorrelationID != "corr" {
				t.Fatalf("job %+v created %v, want kind %s key %s payload %q", j, created, tt.wantKind, tt.wantKey, tt.wantPayload)
			}
			var got Args
			var err error
			switch tt.args.(type) {
			case DraftArgs:
				got, err = Decode[DraftArgs](j)
			case DeliverArgs:
				got, err = Decode[DeliverArgs](j)
			}
			if err != nil || got != tt.args {
				t.Errorf("Decode = %+v, %v; want %+v", got, err, tt.args)
			}
		})
	}
}

// TestEnqueueKeepsOneLiveJobPerKey: the business key stays the unique key:
// a second enqueue for the same kind and key returns the live job, one of
// another kind on the same key is a job of its own.
func TestEnqueueKeepsOneLiveJobPerKey(t *testing.T) {
	st := openStore(t)
	first, _ := enqueueArgs(t, st, DraftArgs{EventKey: "web:m-1"}, Opts{Now: argsT0})
	again, created := enqueueArgs(t, st, DraftArgs{EventKey: "web:m-1", RegenerateVersion: 2}, Opts{Now: argsT0})
	if created || again.ID != first.ID {
		t.Errorf("second draft job for web:m-1: created %v id %s, want the live job %s", created, again.ID, first.ID)
	}
	other, created := enqueueArgs(t, st, DeliverArgs{OutboxID: "web:m-1"}, Opts{Now: argsT0})
	if !created || other.ID == first.ID {
		t.Errorf("deliver job on the same key: created %v id %s, want a new job", created, other.ID)
	}
}

// TestDecodeRefuses: a payload that does not decode, or a job of another
// kind, is a Discard: running it again cannot help.
func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		job  store.Job
	}{
		{"bad payload", store.Job{ID: "j1", Kind: KindDraft, Key: "web:m-1", Payload: []byte(`{"regenerate_version":"two"}`)}},
		{"other kind", store.Job{ID: "j2", Kind: KindDeliver, Key: "web:m-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var discard *Discard
			if _, err := Decode[DraftArgs](tt.job); !errors.As(err, &discard) {
				t.Errorf("Decode[DraftArgs](%+v) = %v, want a *Discard", tt.job, err)
			}
		})
	}
}

// TestStoreRegeneratePayloadIsDraftArgs: the payload the store writes when a
// person regenerates a discarded draft job (delivery.Replay revives it
// through tx.ReviveJob) decodes as the DraftArgs the draft job reads.
func TestStoreRegeneratePayloadIsDraftArgs(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	j, _ := enqueueArgs(t, st, DraftArgs{EventKey: "web:m-1"}, Opts{MaxAttempts: 1, Now: argsT0})
	claimed, err := st.ClaimJobs(ctx, argsT0, 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimJobs: %v %v", claimed, err)
	}
	if _, err := st.FinishJob(ctx, j.ID, claimed[0].ExecutionID, argsT0, store.Result{Outcome: store.OutcomeDiscarded, Err: "model said no"}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	err = st.Update(ctx, func(tx *store.Tx) error {
		dead, err := tx.Job(j.ID)
		if err != nil {
			return err
		}
		return tx.ReviveJob(&dead, store.Replay{By: "boss", At: argsT0.Add(time.Minute), Regenerate: true}, 3)
	})
	if err != nil {
		t.Fatalf("ReviveJob with regenerate: %v", err)
	}
	revived, err := st.Job(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode[DraftArgs](revived)
	if want := (DraftArgs{EventKey: "web:m-1", RegenerateVersion: 1}); err != nil || got != want {
		t.Errorf("Decode of the regenerated job (payload %s) = %+v, %v; want %+v", revived.Payload, got, err, want)
	}
}
