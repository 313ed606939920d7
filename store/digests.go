package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Waiting is what a digest reads of the approval queue: how many waiting
// drafts a filter keeps, and the oldest few of them, oldest first.
type Waiting struct {
	Count  int
	Oldest []Draft
}

// WaitingDrafts walks the waiting drafts oldest first (idx_drafts_by_status)
// and returns how many keep accepts and the first limit of those. A nil
// keep counts from the kept draft counts and reads only limit drafts, so
// the unfiltered digest costs the same however long the queue is; a
// filter reads every waiting draft once.
func (tx *Tx) WaitingDrafts(keep func(Draft) bool, limit int) (Waiting, error) {
	w := Waiting{Oldest: []Draft{}}
	prefix := append([]byte(DraftPending), 0)
	c := tx.bucket(bucketDraftsByStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if keep == nil && len(w.Oldest) == limit {
			break
		}
		_, id := splitTimeKey(k[len(prefix):])
		d, err := tx.Draft(id)
		if err != nil {
			return Waiting{}, fmt.Errorf("status index points at draft %s: %w", id, err)
		}
		if keep != nil && !keep(d) {
			continue
		}
		w.Count++
		if len(w.Oldest) < limit {
			w.Oldest = append(w.Oldest, d)
		}
	}
	if keep == nil {
		w.Count = count(tx, draftCountKey(DraftPending))
	}
	return w, nil
}

// DigestMark is what a digest remembers between checks of the oldest
// waiting draft: whether it was past the threshold at the last check, and
// the crossing that was announced. It lives in meta under "digest:<name>",
// written in the transaction that enqueues the digest, so a restart
// neither forgets a crossing nor announces it again.
type DigestMark struct {
	V int `json:"v"`
	// Over is true from the check that saw the oldest waiting draft past
	// the threshold until one that saw it under (or nothing waiting).
	Over bool `json:"over"`
	// Draft is the draft whose wait crossed the threshold, At when the
	// crossing was seen.
	Draft string    `json:"draft,omitempty"`
	At    time.Time `json:"at,omitzero"`
}

func digestMarkKey(name string) []byte { return []byte("digest:" + name) }

// DigestMark reads the mark of digest name; the zero mark when it has none.
func (tx *Tx) DigestMark(name string) (DigestMark, error) {
	var m DigestMark
	err := getJSON(tx.bucket(bucketMeta), digestMarkKey(name), &m)
	if errors.Is(err, ErrNotFound) {
		return DigestMark{}, nil
	}
	if err != nil {
		return DigestMark{}, fmt.Errorf("digest %s mark: %w", name, err)
	}
	return m, nil
}

// PutDigestMark writes the mark of digest name.
func (tx *Tx) PutDigestMark(name string, m DigestMark) error {
	m.V = recordVersion
	return putJSON(tx.bucket(bucketMeta), digestMarkKey(name), m)
}

// OldestWaiting is the oldest waiting draft keep accepts (nil: any), and
// false when there is none; it reads drafts only up to the first kept.
func (tx *Tx) OldestWaiting(keep func(Draft) bool) (Draft, bool, error) {
	prefix := append([]byte(DraftPending), 0)
	c := tx.bucket(bucketDraftsByStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		_, id := splitTimeKey(k[len(prefix):])
		d, err := tx.Draft(id)
		if err != nil {
			return Draft{}, false, fmt.Errorf("status index points at draft %s: %w", id, err)
		}
		if keep == nil || keep(d) {
			return d, true, nil
		}
	}
	return Draft{}, false, nil
}
