package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/handoff/handoff/store"
)

// Receipt is a provider's report on one of our sends, as a status webhook
// brought it: the channel it came in on, the provider's message id, our
// reference when the provider carries one (WhatsApp
// biz_opaque_callback_data, the ref of a Twilio StatusCallback URL), and
// the status.
type Receipt struct {
	Channel    string
	ProviderID string
	Ref        string
	Status     string
	At         time.Time
}

// receiptVerdict sorts a reported status: "sent" proves the provider took
// the message, "failed" that it was not delivered, "" decides nothing.
// The names are WhatsApp's (sent, delivered, read, failed), Twilio's
// (accepted, queued, sending, sent, delivered, read, undelivered, failed,
// canceled) and Mailgun's (accepted, delivered, opened, clicked, failed,
// rejected).
func receiptVerdict(status string) string {
	switch strings.ToLower(status) {
	case "accepted", "scheduled", "queued", "sending", "sent", "delivered", "read", "opened", "clicked":
		return "sent"
	case "failed", "undelivered", "rejected", "canceled":
		return "failed"
	}
	return ""
}

// SettleReceiptTx applies receipt r to the outbox row it is about, found
// by our reference on it or by the provider id an earlier answer linked:
//   - a row whose outcome is unknown (effect_pending, needs_reconciliation)
//     moves to sent with the provider id, or to failed when the provider
//     says it was not delivered; the move is an attempt "receipt" on the
//     row (so on its timeline), and a sent row moves its lead to replied;
//   - every status is kept on the row as Delivery: a sent row the provider
//     reports undelivered stays sent (its lead was answered when it was
//     accepted) and shows "undelivered" for a person to act on.
//
// The receipt must already be stored (tx.PutReceipt). A receipt about no
// known row, or naming a row of another channel, changes nothing.
func SettleReceiptTx(tx *store.Tx, r Receipt) (settled bool, err error) {
	rec, err := tx.Receipt(r.Channel, r.ProviderID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	id := rec.OutboxID
	if id == "" {
		id = r.Ref
	}
	if id == "" {
		return false, nil // not linked yet: the send's answer links it (FinishTx)
	}
	o, err := tx.Outbox(id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if o.Channel != r.Channel {
		// A reference is only believed on the channel the reply went to.
		return false, nil
	}
	if rec.OutboxID == "" {
		if _, err := tx.LinkReceipt(r.Channel, r.ProviderID, o.ID); err != nil {
			return false, err
		}
	}
	return applyReceipt(tx, o, r.ProviderID, r.Status, r.At)
}

// applyReceipt moves row o by one reported status (see SettleReceiptTx).
func applyReceipt(tx *store.Tx, o store.Outbox, providerID, status string, at time.Time) (bool, error) {
	old := o
	verdict := receiptVerdict(status)
	o.Delivery, o.DeliveryAt, o.UpdatedAt = status, &at, at
	settled := false
	unknown := o.Status == store.OutboxEffectPending || o.Status == store.OutboxNeedsReconciliation
	a := store.OutboxAttempt{ExecutionID: o.ExecutionID, At: at, Action: "receipt", ProviderID: providerID}
	switch {
	case unknown && verdict == "sent":
		a.Outcome = "sent"
		o.Attempts = append(o.Attempts, a)
		o.Status = store.OutboxSent
		exec := o.ExecutionID
		if err := markSent(tx, &o, providerID, at); err != nil {
			return false, err
		}
		// The execution holding the row, if one is mid-call, still records
		// its answer (FinishTx finds this attempt by its id).
		o.ExecutionID = exec
		settled = true
	case unknown && verdict == "failed":
		a.Outcome, a.Error = "failed", fmt.Sprintf("the provider reported the message %s", status)
		o.Attempts = append(o.Attempts, a)
		o.Status = store.OutboxFailed
		if o.ProviderID == "" {
			o.ProviderID = providerID
		}
		o.Note = fmt.Sprintf("the provider reported message %s %s: it was not delivered, so a replay sends it once", providerID, status)
		settled = true
	}
	if err := tx.PutOutbox(&old, &o); err != nil {
		return false, err
	}
	return settled, nil
}

// linkAnswer joins the provider id of a send's answer to its receipts: a
// receipt that came before the answer (without our reference) is applied
// now. It returns the row as it then stands.
func linkAnswer(tx *store.Tx, o store.Outbox, providerID string) (store.Outbox, error) {
	if providerID == "" || o.Channel == "" {
		return o, nil
	}
	rec, err := tx.LinkReceipt(o.Channel, providerID, o.ID)
	if err != nil || rec.OutboxID != o.ID {
		return o, err
	}
	for _, h := range rec.History {
		if _, err := applyReceipt(tx, o, providerID, h.Status, h.At); err != nil {
			return o, err
		}
		if o, err = tx.Outbox(o.ID); err != nil {
			return o, err
		}
	}
	return o, nil
}

// settledByReceipt reports whether a receipt settled row o while execID
// held it.
func settledByReceipt(o store.Outbox, execID string) bool {
	if o.Status != store.OutboxSent && o.Status != store.OutboxFailed {
		return false
	}
	for _, a := range o.Attempts {
		if a.Action == "receipt" && a.ExecutionID == execID && execID != "" {
			return true
		}
	}
	return false
}

// SettleReceipts settles each stored receipt in rs, in one transaction,
// and returns how many rows moved.
func SettleReceipts(ctx context.Context, st *store.Store, rs []Receipt) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	n := 0
	err := st.Update(ctx, func(tx *store.Tx) error {
		n = 0
		for _, r := range rs {
			ok, err := SettleReceiptTx(tx, r)
			if err != nil {
				return err
			}
			if ok {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delivery: settle %d receipts: %w", len(rs), err)
	}
	return n, nil
}
