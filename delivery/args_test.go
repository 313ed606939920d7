package delivery_test

import (
	"testing"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// TestArgsStoredForm: delivery's job args go in under the kinds and with
// the payloads older files hold, byte for byte, and come back out as they
// went in: a delivery job (a reply's or an event's) stores only its row's id (its key), a bulk
// replay its filter and who asked from where.
func TestArgsStoredForm(t *testing.T) {
	deliver := delivery.DeliverArgs{OutboxID: "conv-1:d-1"}
	event := delivery.EventArgs{OutboxID: "ev:web:c1:n8n:reply.sent:c1:d-1"}
	bulk := delivery.BulkReplayArgs{RunID: "01RUN", Filter: store.BulkFilter{Channel: "web"}, By: "boss", From: "127.0.0.1"}
	tests := []struct {
		name              string
		args              jobs.Args
		kind, key, stored string
	}{
		{"deliver", deliver, "deliver", "conv-1:d-1", ""},
		{"deliver event", event, "deliver_event", "ev:web:c1:n8n:reply.sent:c1:d-1", ""},
		{"bulk replay", bulk, "bulk_replay", "01RUN", `{"filter":{"channel":"web"},"by":"boss","from":"127.0.0.1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nj, err := jobs.NewJob(tt.args, jobs.Opts{})
			if err != nil {
				t.Fatal(err)
			}
			if nj.Kind != tt.kind || nj.Key != tt.key || string(nj.Payload) != tt.stored {
				t.Fatalf("job %s %s payload %q; want %s %s payload %q", nj.Kind, nj.Key, nj.Payload, tt.kind, tt.key, tt.stored)
			}
			j := store.Job{ID: nj.ID, Kind: nj.Kind, Key: nj.Key, Payload: nj.Payload}
			var got jobs.Args
			switch tt.args.(type) {
			case delivery.DeliverArgs:
				got, err = jobs.Decode[delivery.DeliverArgs](j)
			case delivery.EventArgs:
				got, err = jobs.Decode[delivery.EventArgs](j)
			case delivery.BulkReplayArgs:
				got, err = jobs.Decode[delivery.BulkReplayArgs](j)
			}
			if err != nil || got != tt.args {
				t.Errorf("Decode = %+v, %v; want %+v", got, err, tt.args)
			}
		})
	}
	if delivery.Kind != store.KindDeliver {
		t.Errorf("delivery.Kind %q, the store's %q", delivery.Kind, store.KindDeliver)
	}
}
