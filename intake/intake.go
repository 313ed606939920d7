// Package intake records inbound messages: one event per event key, with
// its lead received and its draft job, in one transaction, durable before
// the webhook is answered.
package intake

import (
	"context"
	"time"

	"github.com/handoff/handoff/jsonbody"
	"github.com/handoff/handoff/leads"

	"github.com/handoff/handoff/store"
)

// Message is an inbound message as the webhook parsed it.
type Message struct {
	Channel, MessageID, ConversationID string
	Contact, Name, Text                string
	Subject                            string // an email's, where the channel maps one
	// ReplyTo is where in the channel the message sits (a group, a
	// thread), where the channel maps it: its reply goes there. Zero:
	// the reply goes to the contact, as before.
	ReplyTo     store.ReplyTo
	ContentType string
	// Body is the request body as received; JSON says it was decoded as
	// exactly one JSON value, so it is kept as JSON rather than as text.
	Body []byte
	JSON bool
	// Valid, when it was made from Body itself (hook.Payload.Valid for
	// the body received), proves Body one JSON value: the store keeps it
	// without scanning it again. Zero, or made from other bytes: the
	// store checks Body as before (a JSON body that is not JSON is refused).
	Valid      jsonbody.Valid
	ReceivedAt time.Time
	// SentAt is when the provider says the customer wrote it, where the
	// channel's preset reads it (hook.Messages.Sent); zero: unknown.
	SentAt time.Time
	// Coalesce is the channel's quiet period: the lead's draft job is due
	// this long after its latest message, so a burst is drafted once.
	Coalesce time.Duration
}

// Key is the message's event key, the dedup key.
func (m Message) Key() string { return m.Channel + ":" + m.MessageID }

// Record records m unless its event key was recorded before, with its
// lead's move and its turn's draft job (maxAttempts attempts, due once the
// lead has been quiet for m.Coalesce; see leads/turns.go), in one commit
// round: the answer says whether this call created the event; a duplicate
// returns the first event, its duplicate count raised. The ids are minted
// and the records encoded here, in the caller's goroutine, so the
// committer's step only copies bytes.
func Record(ctx context.Context, st *store.Store, m Message, maxAttempts int) (store.Recorded, error) {
	// The due time is the message's quiet period: if the lead's turn is still
	// waiting for its draft job, leads.ReceiveTx moves that job to this time instead.
	e, err := Encode(m, maxAttempts)
	if err != nil {
		return store.Recorded{}, err
	}
	return leads.Record(ctx, st, e)
}
