package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// LastMessages reads the latest message of each lead of hs (its
// LastEventKey), in one read transaction: two point reads a lead, no walk,
// for a list of leads that shows what each said last. A lead whose latest
// message is gone (retention, erasure) or cannot be read gets a zero
// Event; the unreadable ones are listed too.
func (s *Store) LastMessages(hs []Handoff) ([]Event, []Unreadable, error) {
	out := make([]Event, len(hs))
	var skipped []Unreadable
	err := s.view(func(tx *Tx) error {
		skipped = nil
		for i, h := range hs {
			if h.LastEventKey == "" {
				continue
			}
			ev, err := tx.EventByKey(h.LastEventKey)
			switch {
			case err == nil:
				out[i] = ev
			case errors.Is(err, ErrNotFound), tx.skip(err, &skipped):
			default:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: the leads' latest messages: %w", err)
	}
	return out, skipped, nil
}

// LeadView is what a lead's page shows: the lead and its conversation,
// read in one read transaction.
type LeadView struct {
	Lead Handoff
	// Conversation is the newest lines of the lead's conversation, its
	// messages and the replies sent (or on their way), oldest first.
	Conversation []Said
	// Earlier says older lines were left out.
	Earlier bool
	// Unreadable is each record of the conversation that cannot be read, left out.
	Unreadable []Unreadable
}

// LeadConversation reads lead (a lead key) and the newest limit lines of
// its conversation: at most limit+1 of its messages, newest first along
// idx_events_by_conv, and at most limit+1 of its replies (repliesOf),
// merged by time. ErrNotFound when no lead has the key.
func (s *Store) LeadConversation(lead string, limit int) (LeadView, error) {
	var v LeadView
	err := s.view(func(tx *Tx) error {
		var err error
		v, err = leadConversation(tx, lead, limit)
		return err
	})
	if err != nil {
		return LeadView{}, fmt.Errorf("store: conversation of lead %s: %w", lead, err)
	}
	return v, nil
}

func leadConversation(tx *Tx, lead string, limit int) (LeadView, error) {
	v := LeadView{Conversation: []Said{}}
	var err error
	if v.Lead, err = tx.Handoff(lead); err != nil {
		return v, err
	}
	var lines []Said
	prefix := append([]byte(lead), 0)
	c := tx.bucket(bucketEventsByConv).Cursor()
	n := 0
	for k := lastWithPrefix(c, prefix); k != nil && bytes.HasPrefix(k, prefix) && n <= limit; k, _ = c.Prev() {
		n++
		e, err := tx.event(string(k[len(prefix):]))
		if tx.skip(err, &v.Unreadable) {
			continue
		}
		if err != nil {
			return v, err
		}
		lines = append(lines, Said{At: e.ReceivedAt, Event: &e})
	}
	replies, err := repliesOf(tx, v.Lead.Channel, v.Lead.ConversationID, limit+1, &v.Unreadable)
	if err != nil {
		return v, err
	}
	for i := range replies {
		lines = append(lines, Said{At: replies[i].saidAt(), Reply: &replies[i]})
	}
	slices.SortStableFunc(lines, func(a, b Said) int { return b.At.Compare(a.At) })
	if len(lines) > limit {
		lines, v.Earlier = lines[:limit], true
	}
	slices.Reverse(lines)
	v.Conversation = append(v.Conversation, lines...)
	return v, nil
}
