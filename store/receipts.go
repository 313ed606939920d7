package store

import (
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

// Receipt is tx.Receipt in a read transaction of its own.
func (s *Store) Receipt(channel, providerID string) (Receipt, error) {
	var r Receipt
	err := s.view(func(tx *Tx) error {
		var err error
		r, err = tx.Receipt(channel, providerID)
		return err
	})
	if err != nil {
		return Receipt{}, fmt.Errorf("store: receipt %s: %w", ReceiptKey(channel, providerID), err)
	}
	return r, nil
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
