package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// maxReceiptHistory bounds the statuses one receipt keeps.
const maxReceiptHistory = 16

// Receipt is what a provider reported about one message it carried,
// keyed by the channel and the provider's message id: a WhatsApp status
// (sent, delivered, read, failed), a Twilio status callback, a Mailgun
// event. The outbound side joins it to a send by Outbox.ProviderID.
type Receipt struct {
	V          int             `json:"v"`
	Key        string          `json:"key"` // "<channel>:<provider message id>"
	Channel    string          `json:"channel"`
	ProviderID string          `json:"provider_id"`
	Status     string          `json:"status"` // the latest reported, in arrival order
	UpdatedAt  time.Time       `json:"updated_at"`
	History    []ReceiptStatus `json:"history"` // oldest first, at most 16, a repeat of the latest not added
	// OutboxID is the outbox row the receipt is about, once known: from our
	// reference on the receipt, or from the send's answer naming this id.
	OutboxID string `json:"outbox_id,omitempty"`
}

// ReceiptStatus is one reported status.
type ReceiptStatus struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// ReceiptKey is the key of the receipt about providerID on channel.
func ReceiptKey(channel, providerID string) string { return channel + ":" + providerID }

// PutReceipt records that the provider of channel reported status for
// providerID at at, and returns the receipt as it now stands. A repeat of
// the latest status (a retried callback) changes nothing.
func (tx *Tx) PutReceipt(channel, providerID, status string, at time.Time) (Receipt, error) {
	key := ReceiptKey(channel, providerID)
	old, err := receiptsTable.get(tx, []byte(key))
	switch {
	case errors.Is(err, ErrNotFound):
		r := Receipt{V: recordVersion, Key: key, Channel: channel, ProviderID: providerID, Status: status, UpdatedAt: at,
			History: []ReceiptStatus{{Status: status, At: at}}}
		if err := receiptsTable.insert(tx, &r); err != nil {
			return Receipt{}, fmt.Errorf("store: receipt %s: %w", key, err)
		}
		return r, nil
	case err != nil:
		return Receipt{}, fmt.Errorf("store: receipt %s: %w", key, err)
	}
	if old.Status == status {
		return old, nil
	}
	r := old
	r.V, r.Status, r.UpdatedAt = recordVersion, status, at
	r.History = append(append([]ReceiptStatus(nil), old.History...), ReceiptStatus{Status: status, At: at})
	if n := len(r.History); n > maxReceiptHistory {
		r.History = r.History[n-maxReceiptHistory:]
	}
	if err := receiptsTable.put(tx, &old, &r); err != nil {
		return Receipt{}, fmt.Errorf("store: receipt %s: %w", key, err)
	}
	return r, nil
}

// Receipt reads the receipt about providerID on channel: ErrNotFound when
// the provider reported nothing about it.
func (tx *Tx) Receipt(channel, providerID string) (Receipt, error) {
	return receiptsTable.get(tx, []byte(ReceiptKey(channel, providerID)))
}

// LinkReceipt records that the receipt about providerID on channel is
// about outbox row outboxID, creating it without a status when the
// provider has reported nothing yet. It returns the receipt as it now
// stands; a receipt already linked to another row is left alone and
// returned as it is.
func (tx *Tx) LinkReceipt(channel, providerID, outboxID string) (Receipt, error) {
	key := ReceiptKey(channel, providerID)
	old, err := receiptsTable.get(tx, []byte(key))
	switch {
	case errors.Is(err, ErrNotFound):
		r := Receipt{V: recordVersion, Key: key, Channel: channel, ProviderID: providerID, OutboxID: outboxID, History: []ReceiptStatus{}}
		if err := receiptsTable.insert(tx, &r); err != nil {
			return Receipt{}, fmt.Errorf("store: receipt %s: %w", key, err)
		}
		return r, nil
	case err != nil:
		return Receipt{}, fmt.Errorf("store: receipt %s: %w", key, err)
	case old.OutboxID != "":
		return old, nil
	}
	r := old
	r.V, r.OutboxID = recordVersion, outboxID
	if err := receiptsTable.put(tx, &old, &r); err != nil {
		return Receipt{}, fmt.Errorf("store: receipt %s: %w", key, err)
	}
	return r, nil
}

// Receipts have two indexes (tables.go, schema 8 on): by the outbox row
// they are about, so a row takes its receipts with it when it is deleted,
// and by the time of their latest status, so retention finds the old ones.
var (
	bucketReceiptsByOutbox = []byte("idx_receipts_by_outbox") // created by migration 7
	bucketReceiptsByTime   = []byte("idx_receipts_by_time")   // created by migration 7
)

// receiptOutboxKey is a receipt's idx_receipts_by_outbox entry:
// "<outbox id> 0x00 <receipt key>"; nil for a receipt not linked to a row.
func receiptOutboxKey(r *Receipt) []byte {
	if r.OutboxID == "" {
		return nil
	}
	return append(append([]byte(r.OutboxID), 0), r.Key...)
}

// receiptTimeKey is a receipt's idx_receipts_by_time entry: "<updated at>
// | <receipt key>"; nil for a receipt with no status yet (a link made by a
// send's answer), which goes with its outbox row.
func receiptTimeKey(r *Receipt) []byte {
	if r.UpdatedAt.IsZero() {
		return nil
	}
	return timeKey(r.UpdatedAt, r.Key)
}

// deleteReceiptsOf deletes the receipts linked to outbox row id: the row
// is going, and a receipt naming a row that is gone is damage to Check.
func deleteReceiptsOf(tx *Tx, id string) error {
	prefix := append([]byte(id), 0)
	var keys [][]byte
	c := tx.bucket(bucketReceiptsByOutbox).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k[len(prefix):]))
	}
	for _, k := range keys {
		r, err := receiptsTable.get(tx, k)
		if err != nil {
			return fmt.Errorf("idx_receipts_by_outbox points at receipt %s: %w", k, err)
		}
		if err := receiptsTable.delete(tx, &r); err != nil {
			return fmt.Errorf("delete receipt %s: %w", k, err)
		}
	}
	return nil
}

// pruneReceipts reads up to limit receipts whose latest status is older
// than cutoff, oldest first, after the time index key after (nil: from the
// start), and deletes those whose outbox row is not kept: a receipt about a
// kept row goes with its row (deleteReceiptsOf). It returns how many it
// deleted and the last key it read, nil once nothing older is left, so the
// next chunk resumes there rather than read the kept ones again.
func pruneReceipts(tx *Tx, cutoff time.Time, after []byte, limit int) (int, []byte, error) {
	var doomed []Receipt
	var last []byte
	c := tx.bucket(bucketReceiptsByTime).Cursor()
	k, _ := c.First()
	if after != nil {
		if k, _ = c.Seek(after); bytes.Equal(k, after) {
			k, _ = c.Next()
		}
	}
	end := timeKey(cutoff, "")
	seen := 0
	for ; k != nil && bytes.Compare(k, end) < 0 && seen < limit; k, _ = c.Next() {
		seen++
		last = bytes.Clone(k)
		_, key := splitTimeKey(k)
		r, err := receiptsTable.get(tx, []byte(key))
		if err != nil {
			return 0, nil, fmt.Errorf("idx_receipts_by_time points at receipt %s: %w", key, err)
		}
		if r.OutboxID != "" && outboxTable.has(tx, []byte(r.OutboxID)) {
			continue
		}
		doomed = append(doomed, r)
	}
	for _, r := range doomed {
		if err := receiptsTable.delete(tx, &r); err != nil {
			return 0, nil, fmt.Errorf("delete receipt %s: %w", r.Key, err)
		}
	}
	if seen < limit {
		last = nil
	}
	return len(doomed), last, nil
}

// migrateReceiptIndexes is migration 7: it creates idx_receipts_by_outbox
// and idx_receipts_by_time and fills them from the receipts. A receipt
// linked to a row that is gone (retention deleted the row before receipts
// went with it) is deleted, as it would have been with its row.
func migrateReceiptIndexes(tx *Tx) error {
	for _, b := range [][]byte{bucketReceiptsByOutbox, bucketReceiptsByTime} {
		if _, err := tx.tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	var all []Receipt
	_ = tx.bucket(bucketReceipts).ForEach(func(_, raw []byte) error {
		var r Receipt
		if decode(raw, &r) == nil { // an unreadable one is left for Check to name
			all = append(all, r)
		}
		return nil
	})
	for _, r := range all {
		if r.OutboxID != "" && !outboxTable.has(tx, []byte(r.OutboxID)) {
			if err := tx.bucket(bucketReceipts).Delete([]byte(r.Key)); err != nil {
				return err
			}
			continue
		}
		if err := receiptsTable.insert(tx, &r); err != nil {
			return err
		}
	}
	return nil
}

// checkReceiptRows proves that every receipt linked to an outbox row names
// a row that exists, on the receipt's channel (schema 8 on: before, retention
// left receipts behind their rows).
func checkReceiptRows(tx *Tx) []error {
	var problems []error
	_ = tx.bucket(bucketReceipts).ForEach(func(k, raw []byte) error {
		var r Receipt
		if decode(raw, &r) != nil || r.OutboxID == "" {
			return nil // an unreadable receipt is reported by the receipts table's check
		}
		o, err := tx.Outbox(r.OutboxID)
		switch {
		case len(problems) >= maxProblems:
		case err != nil:
			problems = append(problems, fmt.Errorf("check: receipt %s is about outbox row %s, which cannot be read: %v", k, r.OutboxID, err))
		case o.Channel != r.Channel:
			problems = append(problems, fmt.Errorf("check: receipt %s is about outbox row %s of channel %s", k, r.OutboxID, o.Channel))
		}
		return nil
	})
	return problems
}
