package store

import (
	"bytes"
	"encoding/json"
)

// FindEvent finds the event a person means by q: an event key, a draft id,
// an outbox id, a lead key, a correlation id, or a conversation id or
// contact (the lead's newest event). It returns "" when nothing that vis
// sees matches: a match in a channel it does not see is no match at all.
func (s *Store) FindEvent(vis Visible, q string) (string, error) {
	var key string
	err := s.view(func(tx *Tx) error {
		key = ""
		if tx.bucket(bucketEventsByKey).Get([]byte(q)) != nil && vis.Key(q) {
			key = q
			return nil
		}
		if d, err := tx.Draft(q); err == nil && vis.Key(d.EventKey) {
			key = d.EventKey
			return nil
		}
		if o, err := tx.Outbox(q); err == nil && o.EventKey != "" && vis.Key(o.EventKey) {
			key = o.EventKey
			return nil
		}
		if h, err := tx.Handoff(q); err == nil && vis.Key(h.LastEventKey) {
			key = h.LastEventKey
			return nil
		}
		// A correlation id: its jobs carry the event's key (the draft job's key).
		prefix := []byte(q + "|")
		if k, _ := tx.bucket(bucketJobsByCorr).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			if j, err := tx.Job(string(k[len(prefix):])); err == nil && j.Kind == KindDraft && vis.Key(j.Key) {
				key = j.Key
				return nil
			}
		}
		// A conversation id or contact: scan the leads (a search, not a hot path).
		return tx.bucket(bucketHandoffs).ForEach(func(k, v []byte) error {
			var h Handoff
			if key == "" && vis.Key(string(k)) && json.Unmarshal(v, &h) == nil && (h.ConversationID == q || h.Contact == q) {
				key = h.LastEventKey
			}
			return nil
		})
	})
	return key, err
}
