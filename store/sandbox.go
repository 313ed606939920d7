package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// SandboxMessage is what the built-in sandbox provider received, keyed by
// our client reference.
type SandboxMessage struct {
	V              int        `json:"v"`
	Ref            string     `json:"client_ref"`
	Provider       string     `json:"provider"`
	ID             string     `json:"id"`
	To             string     `json:"to"`
	Text           string     `json:"text"`
	ConversationID string     `json:"conversation_id"`
	CorrelationID  string     `json:"correlation_id"`
	ReceivedAt     time.Time  `json:"received_at"`
	Repeats        int        `json:"repeats"` // later sends of the same reference (deduplicated or refused)
	LastRepeatAt   *time.Time `json:"last_repeat_at,omitempty"`
}

// SandboxAccept records m unless its reference was received before; then the
// first message is returned with dup true and its repeat count raised, so a
// second send of one reply is visible.
func (s *Store) SandboxAccept(ctx context.Context, m SandboxMessage) (SandboxMessage, bool, error) {
	var (
		out SandboxMessage
		dup bool
	)
	err := s.update(ctx, func(tx *Tx) error {
		b := tx.bucket(bucketSandbox)
		out, dup = SandboxMessage{}, false
		if err := getJSON(b, []byte(m.Ref), &out); err == nil {
			dup = true
			out.Repeats++
			at := m.ReceivedAt
			out.LastRepeatAt = &at
			return putJSON(b, []byte(m.Ref), out)
		}
		m.V = recordVersion
		out = m
		return putJSON(b, []byte(m.Ref), m)
	})
	if err != nil {
		return SandboxMessage{}, false, fmt.Errorf("store: sandbox accept %s: %w", m.Ref, err)
	}
	return out, dup, nil
}

// SandboxLookup finds a sandbox message by our reference.
func (s *Store) SandboxLookup(ref string) (SandboxMessage, error) {
	var m SandboxMessage
	err := s.view(func(tx *Tx) error { return getJSON(tx.bucket(bucketSandbox), []byte(ref), &m) })
	if err != nil {
		return SandboxMessage{}, fmt.Errorf("store: sandbox message %s: %w", ref, err)
	}
	return m, nil
}

// SandboxMessages lists the newest limit messages the sandbox received, newest last.
func (s *Store) SandboxMessages(limit int) ([]SandboxMessage, error) {
	out := []SandboxMessage{}
	err := s.view(func(tx *Tx) error {
		return tx.bucket(bucketSandbox).ForEach(func(k, v []byte) error {
			var m SandboxMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("message %s: %w", k, err)
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: sandbox messages: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReceivedAt.Before(out[j].ReceivedAt) })
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}
