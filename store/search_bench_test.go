package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// BenchmarkSearch: 20,000 messages of 10,000 leads; a prefix found
// through idx_handoffs_by_term, and a text search that reads the newest
// TextScan messages.
func BenchmarkSearch(b *testing.B) {
	st := openTest(b)
	ctx := context.Background()
	const leads = 10000
	for i := range 2 * leads {
		ev := Event{
			ID: ulid.Make().String(), Key: fmt.Sprintf("web:m%d", i), Channel: "web", MessageID: fmt.Sprintf("m%d", i),
			CorrelationID: ulid.Make().String(), ConversationID: fmt.Sprintf("w-%05d", i%leads),
			Contact: fmt.Sprintf("p%d@example.com", i%leads), Name: fmt.Sprintf("Person%d Surname%d", i%leads, i%97),
			Text: fmt.Sprintf("message %d about order %d", i, i%500), ReceivedAt: t0.Add(time.Duration(i) * time.Millisecond),
		}
		if _, err := st.RecordEvent(ctx, ev, draftJobFor(ev.Key, 3)); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{"person42", "surname7", "w-0004", "refund"} {
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				if _, err := st.Search(Everything(), q, 50); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
