package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// Receipt is a provider's report on one message it carried (a WhatsApp
// status, a Twilio status callback), as the webhook read it.
type Receipt struct {
	Channel, ProviderID, Status string
	At                          time.Time
}

// RecordBatch records every message and receipt of one request (a WhatsApp
// POST carrying several) in one transaction, each message deduplicated on
// its own as Record does: either all of them are stored, with their leads'
// moves and draft jobs, or none is. The answers are in the order of ms.
func RecordBatch(ctx context.Context, st *store.Store, ms []Message, receipts []Receipt, maxAttempts int) ([]store.Recorded, error) {
	encoded := make([]*store.Encoded, len(ms))
	for i, m := range ms {
		e, err := Encode(m, maxAttempts)
		if err != nil {
			return nil, err
		}
		encoded[i] = e
	}
	var out []store.Recorded
	err := st.UpdateIngest(ctx, encoded, func(tx *store.Tx) error {
		out = make([]store.Recorded, 0, len(encoded)) // the committer may run this again
		for _, e := range encoded {
			rec, err := leads.RecordTx(tx, e)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		for _, r := range receipts {
			if _, err := tx.PutReceipt(r.Channel, r.ProviderID, r.Status, r.At); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("intake: record %d messages and %d receipts: %w", len(ms), len(receipts), err)
	}
	return out, nil
}

// Encode mints m's ids and encodes its event and draft job: what Record and
// RecordBatch commit.
func Encode(m Message, maxAttempts int) (*store.Encoded, error) {
	ev := store.Event{
		ID: ulid.Make().String(), Key: m.Key(), Channel: m.Channel, MessageID: m.MessageID,
		CorrelationID: ulid.Make().String(), ConversationID: m.ConversationID,
		Contact: m.Contact, Name: m.Name, Text: m.Text, Subject: m.Subject, ContentType: m.ContentType,
		ReceivedAt: m.ReceivedAt,
	}
	if m.ReplyTo != (store.ReplyTo{}) {
		r := m.ReplyTo
		ev.ReplyTo = &r
	}
	if !m.SentAt.IsZero() {
		at := m.SentAt.UTC()
		ev.SentAt = &at
	}
	job, err := jobs.NewJob(review.DraftArgs{EventKey: ev.Key}, jobs.Opts{MaxAttempts: maxAttempts, RunAt: m.ReceivedAt.Add(m.Coalesce)})
	if err != nil {
		return nil, err
	}
	switch {
	case m.JSON && m.Valid.Of(m.Body): // the parser's proof: the store need not scan it again
		return store.EncodeEventJSON(ev, m.Valid, job)
	case m.JSON: // the store checks it is JSON
		ev.Body = m.Body
	default:
		ev.BodyText = string(m.Body)
	}
	return store.EncodeEvent(ev, job)
}
