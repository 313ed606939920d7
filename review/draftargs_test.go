package review_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// TestDraftArgsStoredForm: the draft job's args go in under kind "draft"
// and the event's key, with the payload older files hold (byte for byte:
// none for a first draft, regenerate_version and instruction after it),
// and come back out as they went in.
func TestDraftArgsStoredForm(t *testing.T) {
	tests := []struct {
		name        string
		args        review.DraftArgs
		wantPayload string
	}{
		{"first draft", review.DraftArgs{EventKey: "web:m-1"}, ""},
		{"regenerate", review.DraftArgs{EventKey: "web:m-2", RegenerateVersion: 3}, `{"regenerate_version":3}`},
		{"draft again", review.DraftArgs{EventKey: "web:m-3", RegenerateVersion: 2, Instruction: "shorter"}, `{"regenerate_version":2,"instruction":"shorter"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nj, err := jobs.NewJob(tt.args, jobs.Opts{MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			if nj.Kind != "draft" || review.KindDraft != store.KindDraft || nj.Key != tt.args.EventKey || string(nj.Payload) != tt.wantPayload {
				t.Fatalf("job %s %s payload %q; want draft %s payload %q", nj.Kind, nj.Key, nj.Payload, tt.args.EventKey, tt.wantPayload)
			}
			got, err := jobs.Decode[review.DraftArgs](store.Job{ID: nj.ID, Kind: nj.Kind, Key: nj.Key, Payload: nj.Payload})
			if err != nil || got != tt.args {
				t.Errorf("Decode = %+v, %v; want %+v", got, err, tt.args)
			}
		})
	}
	var discard *jobs.Discard
	if _, err := jobs.Decode[review.DraftArgs](store.Job{ID: "j1", Kind: store.KindDraft, Key: "web:m-1", Payload: []byte(`{"regenerate_version":"two"}`)}); !errors.As(err, &discard) {
		t.Errorf("Decode of a bad payload = %v, want a *jobs.Discard", err)
	}
}

// TestRegenerateTx: the payload a person's regenerate gives a discarded
// draft job (delivery's replay revives it with it, tx.ReviveJob) decodes as
// the DraftArgs the draft job reads: the next version of the event's
// draft, 1 when none is stored; it is refused once that draft is approved.
func TestRegenerateTx(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	rec := record(t, st, "web", "web:m-1", t0)
	regenerate := func() (review.DraftArgs, error) {
		var got review.DraftArgs
		err := st.Update(ctx, func(tx *store.Tx) error {
			j, err := tx.Job(rec.Job.ID)
			if err != nil {
				return err
			}
			raw, err := review.RegenerateTx(tx, j)
			if err != nil {
				return err
			}
			j.Payload = raw
			got, err = jobs.Decode[review.DraftArgs](j)
			return err
		})
		return got, err
	}
	if got, err := regenerate(); err != nil || got != (review.DraftArgs{EventKey: "web:m-1", RegenerateVersion: 1}) {
		t.Errorf("regenerate without a draft = %+v, %v; want version 1", got, err)
	}
	rv := review.New(st, testConfig())
	d, _, err := rv.Save(ctx, store.Draft{EventKey: "web:m-1", Text: "first", CreatedAt: t0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := regenerate(); err != nil || got != (review.DraftArgs{EventKey: "web:m-1", RegenerateVersion: 2}) {
		t.Errorf("regenerate after version %d = %+v, %v; want version 2", d.Version, got, err)
	}
	if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var state *store.StateError
	if _, err := regenerate(); !errors.As(err, &state) || state.State != "approved" {
		t.Errorf("regenerate of an approved draft = %v; want a StateError naming it approved", err)
	}
}
