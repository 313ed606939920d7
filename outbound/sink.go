package outbound

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/webhook"
)

// sink is one subscriber as the delivery job sees it (delivery.Sender):
// it posts a row's body as stored, signed for this send.
type sink struct {
	name, url, secret string
	call              *provider.Caller
	now               func() time.Time
}

// Open builds every subscriber's sink, by its provider name
// ("events:<name>"), for the delivery job.
func Open(cfg *config.Config) map[string]delivery.Sender {
	out := make(map[string]delivery.Sender, len(cfg.Events))
	for _, s := range cfg.Events {
		out[s.ProviderName()] = &sink{name: s.ProviderName(), url: s.URL, secret: s.Secret, call: provider.NewCaller(s.ProviderName(), s.Timeout), now: time.Now}
	}
	return out
}

// Send posts the row's event under the webhook-id its row id fixes. The
// answer is sorted as a CRM's (crm.Judge): 2xx done, 429 not taken (try
// after Retry-After), 408 and 5xx may have acted (resent: the subscriber
// dedupes), any other 4xx refused for good (the dead letters).
func (s *sink) Send(ctx context.Context, m provider.Message) (string, error) {
	if m.Text == store.Erased {
		return "", &provider.Permanent{Err: fmt.Errorf("%s: not sent: the lead was erased before its event went out", s.name)}
	}
	if _, err := Decode(m.Text); err != nil {
		return "", &provider.Permanent{Err: err}
	}
	body := []byte(m.Text)
	id := MessageID(m.Ref)
	h, err := webhook.Header(s.secret, id, s.now(), body)
	if err != nil {
		return "", &provider.Permanent{Err: fmt.Errorf("%s: %w", s.name, err)}
	}
	a, err := s.call.Do(ctx, http.MethodPost, s.url, h, body)
	if err != nil {
		return "", err
	}
	if err := crm.Judge(s.name, s.call, a, nil); err != nil {
		return "", err
	}
	return id, nil
}

// Lookup: a subscriber cannot be asked what it received.
func (s *sink) Lookup(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

// Capabilities: the subscriber dedupes by webhook-id, so resending is safe.
func (s *sink) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotencyKey: true, Timeout: s.call.Timeout()}
}
