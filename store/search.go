package store

import (
	"bytes"
	"encoding/json"
)

// FindEvent finds the event a person means by q: an event key, a draft id,
// an outbox id, a lead key, a correlation id, or a conversation id or
// contact (the lead's newest event). It returns "" when nothing matches.
func (s *Store) FindEvent(q string) (string, error) {
	var key string
	err := s.view(func(tx *Tx) error {
		if tx.bucket(bucketEventsByKey).Get([]byte(q)) != nil {
			key = q
			return nil
		}
		if d, err := tx.Draft(q); err == nil {
			key = d.EventKey
			return nil
		}
		if o, err := tx.Outbox(q); err == nil && o.EventKey != "" {
			key = o.EventKey
			return nil
		}
		if h, err := tx.Handoff(q); err == nil {
			key = h.LastEventKey
			return nil
		}
		// A correlation id: its jobs carry the event's key (the draft job's key).
		prefix := []byte(q + "|")
		if k, _ := tx.bucket(bucketJobsByCorr).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			if j, err := tx.Job(string(k[len(prefix):])); err == nil && j.Kind == KindDraft {
				key = j.Key
				return nil
			}
		}
		// A conversation id or contact: scan the leads (a search, not a hot path).
		return tx.bucket(bucketHandoffs).ForEach(func(k, v []byte) error {
			var h Handoff
			if key == "" && json.Unmarshal(v, &h) == nil && (h.ConversationID == q || h.Contact == q) {
				key = h.LastEventKey
			}
			return nil
		})
	})
	return key, err
}
