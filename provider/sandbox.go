package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/store"
)

func init() { register(kinds.Sandbox, newSandbox) }

// SandboxStore is where the sandbox keeps what it received.
type SandboxStore interface {
	SandboxAccept(ctx context.Context, m store.SandboxMessage) (store.SandboxMessage, bool, error)
	SandboxLookup(ref string) (store.SandboxMessage, error)
}

// Sandbox is the built-in provider: it delivers nowhere and records every
// message in the database by our reference. A repeated reference is
// deduplicated when the sandbox is configured to honour idempotency keys,
// and refused otherwise with a 409: an ambiguous answer, not a permanent
// failure, because the first copy did arrive, so the row never reads
// "failed" and a double send can never pass unnoticed. Its knobs make it
// fail, stall or time out after accepting, for tests and drills.
type Sandbox struct {
	name string
	cfg  kinds.Provider
	st   SandboxStore
	now  func() time.Time

	mu       sync.Mutex
	failures map[string]int // sends that failed on purpose, per reference (FailFirst)
}

func newSandbox(cfg kinds.Provider, d Deps) (Provider, error) {
	if d.Sandbox == nil {
		return nil, errors.New("the sandbox needs the store")
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return &Sandbox{name: cfg.Name, cfg: cfg, st: d.Sandbox, now: now, failures: map[string]int{}}, nil
}

// Capabilities follow the config: lookup unless turned off, idempotency keys when declared.
func (s *Sandbox) Capabilities() Capabilities {
	// Its lookup reads what its send committed to the same database, so a
	// "not found" needs no settle time unless a drill asks for one.
	return Capabilities{IdempotencyKey: s.cfg.SupportsIdempotencyKey, Lookup: !s.cfg.NoLookup, LookupSettle: s.cfg.LookupSettle}
}

// Send records m, or fails as configured.
func (s *Sandbox) Send(ctx context.Context, m Message) (string, error) {
	if s.cfg.Delay > 0 {
		t := time.NewTimer(s.cfg.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", &Ambiguous{Err: fmt.Errorf("sandbox: no answer before the deadline: %w", ctx.Err())}
		}
	}
	if s.failNow(m.Ref) {
		if s.cfg.Fail == "permanent" {
			return "", &Permanent{Status: http.StatusUnprocessableEntity, Err: errors.New("sandbox: configured to refuse this message")}
		}
		return "", &Ambiguous{Status: http.StatusServiceUnavailable, Err: errors.New("sandbox: configured to fail with 503")}
	}
	got, dup, err := s.st.SandboxAccept(ctx, store.SandboxMessage{
		Ref: m.Ref, Provider: s.name, ID: "sbx_" + ulid.Make().String(), To: m.To, Text: m.Text,
		ConversationID: m.ConversationID, CorrelationID: m.CorrelationID, ReceivedAt: s.now().UTC(),
	})
	if err != nil {
		return "", &Ambiguous{Err: err}
	}
	if dup && !s.cfg.SupportsIdempotencyKey {
		// 409 is ambiguous by the spec's rules: the message may well have
		// arrived (here it did), so the row must not read "failed".
		return "", &Ambiguous{Status: http.StatusConflict, Err: fmt.Errorf("sandbox: reference %s was already delivered as %s; refusing a second copy", m.Ref, got.ID)}
	}
	if s.cfg.TimeoutAfterAccept && !dup {
		return "", &Ambiguous{Err: errors.New("sandbox: accepted the message, then timed out before answering")}
	}
	return got.ID, nil
}

// failNow decides whether this send fails on purpose.
func (s *Sandbox) failNow(ref string) bool {
	if s.cfg.Fail == "" {
		return false
	}
	if s.cfg.FailFirst == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures[ref] < s.cfg.FailFirst {
		s.failures[ref]++
		return true
	}
	return false
}

// Lookup finds a message by our reference.
func (s *Sandbox) Lookup(ctx context.Context, ref, _ string) (string, bool, error) {
	if s.cfg.NoLookup {
		return "", false, ErrNoLookup
	}
	m, err := s.st.SandboxLookup(ref)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return m.ID, true, nil
}
