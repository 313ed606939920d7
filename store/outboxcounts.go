package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
)

// The outbox rows the navigation counts — replies being sent now
// (effect_pending), and failed or to-reconcile replies no person has taken
// off the list — are counted in meta by status and channel, moved by
// every write of a row (PutOutbox, DeleteOutbox, insertOutbox) in its own
// transaction (schema 11 on; migration 10 fills them, Check proves them),
// so no page reads the rows, and a dismissed failure, which stays in its
// status for good, costs nothing:
//
//	"count:outbox_open:" status 0x00 channel → 8-byte count
//
// The channel is the row's, or its event's (Visible.Outbox); "" for a row
// with neither, which only a person who sees everything counts.
var outboxCountPrefix = []byte("count:outbox_open:")

func outboxCountKey(status OutboxStatus, channel string) []byte {
	return append(append(append(bytes.Clone(outboxCountPrefix), status...), 0), channel...)
}

// outboxCounted are the fields of a row its count reads.
type outboxCounted struct {
	Status    OutboxStatus    `json:"status"`
	Channel   string          `json:"channel"`
	EventKey  string          `json:"event_key"`
	Dismissed json.RawMessage `json:"dismissed"`
}

// countKey is the count o is in; nil when none.
func (o outboxCounted) countKey() []byte {
	dismissed := len(o.Dismissed) > 0 && string(o.Dismissed) != "null"
	switch {
	case o.Status == OutboxEffectPending:
	case (o.Status == OutboxFailed || o.Status == OutboxNeedsReconciliation) && !dismissed:
	default:
		return nil
	}
	ch := o.Channel
	if ch == "" {
		ch, _, _ = strings.Cut(o.EventKey, ":")
	}
	return outboxCountKey(o.Status, ch)
}

func outboxCountOf(o *Outbox) []byte {
	if o == nil {
		return nil
	}
	c := outboxCounted{Status: o.Status, Channel: o.Channel, EventKey: o.EventKey}
	if o.Dismissed != nil {
		c.Dismissed = json.RawMessage("{}")
	}
	return c.countKey()
}

// moveOutboxCount moves one row from old's count to o's (nil: none).
func moveOutboxCount(tx *Tx, old, o *Outbox) error {
	ko, kn := outboxCountOf(old), outboxCountOf(o)
	if bytes.Equal(ko, kn) {
		return nil
	}
	if ko != nil {
		if err := addCount(tx, ko, -1); err != nil {
			return err
		}
	}
	if kn != nil {
		return addCount(tx, kn, 1)
	}
	return nil
}

// visibleOutboxCount is how many rows of status in the channels v sees
// are counted open.
func visibleOutboxCount(tx *Tx, v Visible, status OutboxStatus) int {
	if !v.all {
		n := 0
		for ch := range v.channels {
			n += count(tx, outboxCountKey(status, ch))
		}
		return n
	}
	prefix := outboxCountKey(status, "")
	n := 0
	c := tx.bucket(bucketMeta).Cursor()
	for k, val := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
		if len(val) == 8 {
			n += int(binary.BigEndian.Uint64(val))
		}
	}
	return n
}

// recountOutbox counts the open rows from the records.
func recountOutbox(tx *Tx) map[string]int {
	out := map[string]int{}
	_ = tx.bucket(bucketOutbox).ForEach(func(_, raw []byte) error {
		var o outboxCounted
		if json.Unmarshal(raw, &o) == nil {
			if k := o.countKey(); k != nil {
				out[string(k)]++
			}
		}
		return nil
	})
	return out
}

// fillOutboxCounts writes the counts from the records (migration 10).
func fillOutboxCounts(tx *Tx) error {
	if err := deletePrefix(tx, outboxCountPrefix); err != nil {
		return err
	}
	for k, n := range recountOutbox(tx) {
		if err := putCount(tx, []byte(k), n); err != nil {
			return err
		}
	}
	return nil
}

// deletePrefix deletes every meta key that starts with prefix.
func deletePrefix(tx *Tx, prefix []byte) error {
	meta := tx.bucket(bucketMeta)
	var old [][]byte
	c := meta.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		if err := meta.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// checkOutboxCounts proves the open-row counts against a scan of the
// outbox (schema 11 on).
func checkOutboxCounts(tx *Tx) []error {
	var problems []error
	stored := map[string]int{}
	c := tx.bucket(bucketMeta).Cursor()
	for k, v := c.Seek(outboxCountPrefix); k != nil && bytes.HasPrefix(k, outboxCountPrefix); k, v = c.Next() {
		if bytes.IndexByte(k, 0) < 0 || len(v) != 8 {
			problems = append(problems, fmt.Errorf("check: meta key %q is not an outbox count", k))
			continue
		}
		stored[string(k)] = int(binary.BigEndian.Uint64(v))
	}
	return append(problems, diffCounts(stored, recountOutbox(tx), strings.Compare, func(k string, got, want int) error {
		st, ch, _ := strings.Cut(k[len(outboxCountPrefix):], "\x00")
		return fmt.Errorf("check: the count of channel %q's open %s replies says %d, the outbox holds %d", ch, st, got, want)
	})...)
}
