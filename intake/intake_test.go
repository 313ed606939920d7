package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// openStore opens a store on a real bbolt file, checked and closed at cleanup.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, "")
}

// TestRecord: the first message is stored with its lead received and one
// draft job, in one transaction; the same message again is a duplicate
// that writes nothing but its count.
func TestRecord(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	m := intake.Message{
		Channel: "web", MessageID: "m-1", ConversationID: "conv-1", Contact: "ada@example.com", Name: "Ada",
		Text: "hello", ContentType: "application/json", Body: []byte(`{"id":"m-1"}`), JSON: true, ReceivedAt: t0,
	}
	first, err := intake.Record(ctx, st, m, 4)
	if err != nil || !first.Created {
		t.Fatalf("Record = created %v, %v; want created", first.Created, err)
	}
	ev := first.Event
	if ev.Key != "web:m-1" || ev.ID == "" || ev.CorrelationID == "" || string(ev.Body) != `{"id":"m-1"}` || ev.BodyText != "" || ev.Contact != "ada@example.com" {
		t.Errorf("event = %+v; want key web:m-1, minted ids, the JSON body kept as JSON", ev)
	}
	if j := first.Job; j.Kind != review.KindDraft || j.Key != ev.Key || j.MaxAttempts != 4 || j.CorrelationID != ev.CorrelationID || len(j.Payload) != 0 {
		t.Errorf("draft job = %+v; want kind draft, key %s, 4 attempts, the event's correlation, no payload", j, ev.Key)
	}
	if args, err := jobs.Decode[review.DraftArgs](first.Job); err != nil || args.EventKey != ev.Key {
		t.Errorf("Decode(draft job) = %+v, %v; want event key %s", args, err, ev.Key)
	}
	h, err := st.Handoff(store.LeadKey("web", "conv-1"))
	if err != nil || h.Status != leads.Received || h.LastEventKey != ev.Key || h.Cycle != 1 {
		t.Errorf("lead = %+v, %v; want received in cycle 1 on %s", h, err, ev.Key)
	}

	m.ReceivedAt = t0.Add(time.Second)
	dup, err := intake.Record(ctx, st, m, 4)
	if err != nil || dup.Created {
		t.Fatalf("Record again = created %v, %v; want a duplicate", dup.Created, err)
	}
	if dup.Event.ID != ev.ID || dup.Event.CorrelationID != ev.CorrelationID || dup.Event.Duplicates != 1 {
		t.Errorf("duplicate answered %+v; want the first event %s with 1 duplicate", dup.Event, ev.ID)
	}
	var js []store.Job
	if err := st.View(func(tx *store.Tx) (err error) { js, err = tx.JobsByCorrelation(ev.CorrelationID); return err }); err != nil || len(js) != 1 {
		t.Errorf("jobs of the event = %d, %v; want the one draft job", len(js), err)
	}
}

// TestRecordFormBody keeps a body that is not JSON as text.
func TestRecordFormBody(t *testing.T) {
	st := openStore(t)
	rec, err := intake.Record(context.Background(), st, intake.Message{
		Channel: "web", MessageID: "f-1", ConversationID: "conv-f", Body: []byte("a=1&b=2"), ReceivedAt: t0,
	}, 1)
	if err != nil || !rec.Created {
		t.Fatalf("Record = created %v, %v", rec.Created, err)
	}
	if rec.Event.BodyText != "a=1&b=2" || rec.Event.Body != nil {
		t.Errorf("body = %q / text %q; want the form body as text", rec.Event.Body, rec.Event.BodyText)
	}
}
