package crm

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/webhook"
)

// EventType is the type of the webhook's event.
const EventType = "lead.status_changed"

// Event is the webhook's JSON body: the record, under Standard Webhooks'
// type/timestamp/data envelope. The body is the same on every resend; only
// webhook-timestamp (and so the signature) is the send's.
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Record    `json:"data"`
}

// MessageID is the webhook-id of row id's event: derived from the row id
// alone, so every resend of one write carries the same id and a receiver
// that dedupes by it (as Standard Webhooks asks) acts once.
func MessageID(rowID string) string {
	sum := sha256.Sum256([]byte(rowID))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

type webhookKind struct {
	name, url, secret string
	call              *provider.Caller
	now               func() time.Time
}

func newWebhook(m config.CRM) *webhookKind {
	return &webhookKind{name: m.ProviderName(), url: m.URL, secret: m.Secret, call: provider.NewCaller(m.ProviderName(), m.Timeout), now: time.Now}
}

func (w *webhookKind) send(ctx context.Context, rowID string, r Record) (string, error) {
	body, err := json.Marshal(Event{Type: EventType, Timestamp: r.At, Data: r})
	if err != nil {
		return "", &provider.Permanent{Err: err}
	}
	id := MessageID(rowID)
	h, err := webhook.Header(w.secret, id, w.now(), body)
	if err != nil {
		return "", &provider.Permanent{Err: err}
	}
	a, err := w.call.Do(ctx, http.MethodPost, w.url, h, body)
	if err != nil {
		return "", err
	}
	if err := Judge(w.name, w.call, a, nil); err != nil {
		return "", err
	}
	return id, nil
}

// owner: a webhook holds no record to read an owner from.
func (w *webhookKind) owner(context.Context, string, Record) (string, error) { return "", nil }

// lookup: a webhook cannot be asked what it received.
func (w *webhookKind) lookup(context.Context, string, Record) (string, bool, error) {
	return "", false, nil
}

// caps: the receiver dedupes by webhook-id, so resending is safe.
func (w *webhookKind) caps() provider.Capabilities {
	return provider.Capabilities{IdempotencyKey: true, Timeout: w.call.Timeout()}
}
