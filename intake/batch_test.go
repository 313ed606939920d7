package intake_test

import (
	"context"
	"sync"
	"testing"

	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

func batchMsg(id string) intake.Message {
	return intake.Message{Channel: "wa", MessageID: id, ConversationID: "c1", Contact: "c1", Text: "x", Body: []byte(`{}`), JSON: true, ReceivedAt: t0}
}

// TestRecordBatch: every message of a batch is deduplicated on its own, a
// key repeated inside the batch included, and its receipts are stored in
// the same transaction.
func TestRecordBatch(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	if _, err := intake.Record(ctx, st, batchMsg("old"), 3); err != nil {
		t.Fatal(err)
	}
	recs, err := intake.RecordBatch(ctx, st, []intake.Message{batchMsg("a"), batchMsg("old"), batchMsg("a"), batchMsg("b")},
		[]intake.Receipt{{Channel: "wa", ProviderID: "wamid.S1", Status: "read", At: t0}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	created := []bool{true, false, false, true}
	for i, rec := range recs {
		if rec.Created != created[i] {
			t.Errorf("message %d (%s): created %v, want %v", i, rec.Event.Key, rec.Created, created[i])
		}
	}
	if recs[0].Event.CorrelationID != recs[2].Event.CorrelationID {
		t.Error("the repeat inside the batch names another correlation id than the first")
	}
	var r store.Receipt
	if err := st.View(func(tx *store.Tx) (err error) { r, err = tx.Receipt("wa", "wamid.S1"); return err }); err != nil || r.Status != "read" {
		t.Errorf("receipt = %+v, %v", r, err)
	}
	if s, _ := st.Stats(); s.Events != 3 {
		t.Errorf("stored %d events, want 3", s.Events)
	}
}

// TestRecordBatchConcurrent: overlapping batches recorded at once create
// each event exactly once.
func TestRecordBatchConcurrent(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	const n = 16
	var mu sync.Mutex
	createdBy := map[string]int{}
	testkit.Together(n, func(i int) {
		ids := []string{"m0", "m1"}
		if i%2 == 1 {
			ids = []string{"m1", "m2"}
		}
		recs, err := intake.RecordBatch(ctx, st, []intake.Message{batchMsg(ids[0]), batchMsg(ids[1])}, nil, 3)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if r.Created {
				createdBy[r.Event.Key]++
			}
		}
	})
	for _, k := range []string{"wa:m0", "wa:m1", "wa:m2"} {
		if createdBy[k] != 1 {
			t.Errorf("%s created %d times, want 1", k, createdBy[k])
		}
	}
}
