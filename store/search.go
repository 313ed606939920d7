package store

import (
	"bytes"
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// FindEvent finds the event a person means by q: an event key, a draft id,
// an outbox id, a lead key, a correlation id, or a conversation id or
// contact (the lead's newest event). It returns "" when nothing matches.
func (s *Store) FindEvent(q string) (string, error) {
	var key string
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketEventsByKey).Get([]byte(q)) != nil {
			key = q
			return nil
		}
		var d Draft
		if getJSON(tx.Bucket(bucketDrafts), []byte(q), &d) == nil {
			key = d.EventKey
			return nil
		}
		var o Outbox
		if getJSON(tx.Bucket(bucketOutbox), []byte(q), &o) == nil && o.EventKey != "" {
			key = o.EventKey
			return nil
		}
		var h Handoff
		if getJSON(tx.Bucket(bucketHandoffs), []byte(q), &h) == nil {
			key = h.LastEventKey
			return nil
		}
		// A correlation id: its jobs carry the event's key (the draft job's key).
		prefix := []byte(q + "|")
		if k, _ := tx.Bucket(bucketJobsByCorr).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			var j Job
			if getJSON(tx.Bucket(bucketJobs), k[len(prefix):], &j) == nil && j.Kind == KindDraft {
				key = j.Key
				return nil
			}
		}
		// A conversation id or contact: scan the leads (a search, not a hot path).
		return tx.Bucket(bucketHandoffs).ForEach(func(k, v []byte) error {
			var h Handoff
			if key == "" && json.Unmarshal(v, &h) == nil && (h.ConversationID == q || h.Contact == q) {
				key = h.LastEventKey
			}
			return nil
		})
	})
	return key, err
}
