package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// Looker is what a lookup needs of a provider: to find a send by our
// reference, and what its "not found" is worth.
type Looker interface {
	Lookup(ctx context.Context, ref, correlationID string) (string, bool, error)
	Capabilities() provider.Capabilities
}

// Verdicts of a person's lookup.
const (
	LookedSent    = "sent"   // the provider has it: the row is sent
	LookedFailed  = "failed" // the provider never got it: the row is failed, a replay sends it once
	LookedUnknown = ""       // the answer proves nothing yet: the row is unchanged
)

// Looked is what one lookup found: the row as it then stands, the verdict,
// and why in a sentence.
type Looked struct {
	Row     store.Outbox
	Verdict string
	Why     string
}

// Lookable reports whether a person's lookup can settle row o through p:
// the row's outcome is unknown (needs_reconciliation, or failed after an
// attempt of unknown outcome) and p can find a send by our reference.
func Lookable(o store.Outbox, p Looker) bool {
	if p == nil || !p.Capabilities().Lookup {
		return false
	}
	switch o.Status {
	case store.OutboxNeedsReconciliation:
		return true
	case store.OutboxFailed:
		safe, _, _ := Safety(o)
		return !safe
	}
	return false
}

// LookUp asks row id's provider p once, by our reference, whether it has
// the reply, and settles the row by the answer in one transaction with an
// attempt "lookup" and an audit entry: found, the row is sent (its lead
// replied); not found once the answer counts (the provider's lookup_settle
// after the last send that may have reached it, the delivery job's rule),
// it is failed, which a replay sends once; an error or a "not found" too
// soon leaves it as it was, saying why. The provider is called outside any
// transaction; a row that another hand moved meanwhile is refused
// (*store.StateError) and nothing is written.
func (ob *Outbox) LookUp(ctx context.Context, id string, p Looker, by, from string, now time.Time) (Looked, error) {
	o, err := ob.st.OutboxRow(id)
	if err != nil {
		return Looked{}, fmt.Errorf("delivery: look up %s: %w", id, err)
	}
	if !Lookable(o, p) {
		if p == nil || !p.Capabilities().Lookup {
			return Looked{}, &store.StateError{What: "provider " + o.Provider + " of " + id, State: "unable to look a message up", Want: "able to find a send by our reference (check with the provider and reconcile instead)"}
		}
		return Looked{}, &store.StateError{What: "outbox row " + id, State: string(o.Status), Want: "needs_reconciliation, or failed after an unknown outcome, to be looked up"}
	}
	caps := p.Capabilities()
	pid, found, lerr := p.Lookup(ctx, o.ID, o.CorrelationID)
	a := store.OutboxAttempt{At: now, Action: "lookup"}
	out := Looked{}
	switch {
	case lerr != nil:
		a.Outcome, a.Error = "ambiguous", lerr.Error()
		out.Why = "the lookup could not tell (" + lerr.Error() + "); the reply still needs a person"
	case found:
		a.Outcome, a.ProviderID = "sent", pid
		out.Verdict, out.Why = LookedSent, "the provider has it as "+pid+": it is recorded as sent"
	default:
		if proof := settledAt(o, Claim{}, caps); now.Before(proof) {
			a.Outcome = "not_found_yet"
			a.Error = fmt.Sprintf("the provider has no record of the message yet, which proves nothing before %s (lookup_settle after the last send that may have reached it)", proof.UTC().Format(time.RFC3339))
			out.Why = "the lookup could not tell: " + a.Error + "; ask again then"
		} else {
			a.Outcome = "not_found"
			out.Verdict, out.Why = LookedFailed, "the provider has no record of it: it was not delivered, so it is recorded as failed and a replay sends it once"
		}
	}
	err = ob.st.Update(ctx, func(tx *store.Tx) error {
		row, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		if row.Status != o.Status || len(row.Attempts) != len(o.Attempts) || len(row.Reconciliations) != len(o.Reconciliations) {
			return &store.StateError{What: "outbox row " + id, State: "changed while it was looked up (now " + string(row.Status) + ")", Want: "as it was when the lookup started; look at it again"}
		}
		old := row
		row.Attempts = append(row.Attempts[:len(row.Attempts):len(row.Attempts)], a)
		row.UpdatedAt = now
		switch out.Verdict {
		case LookedSent:
			row.Status = store.OutboxSent
			if err := markSent(tx, &row, pid, now); err != nil {
				return err
			}
		case LookedFailed:
			row.Status, row.Note = store.OutboxFailed, "a lookup by "+by+" found no record of it at the provider: it was not delivered, so a replay sends it once"
		}
		if err := tx.PutOutbox(&old, &row); err != nil {
			return err
		}
		if out.Verdict == LookedSent {
			if row, err = linkAnswer(tx, row, pid); err != nil {
				return err
			}
		}
		out.Row = row
		detail := a.Outcome
		if pid != "" {
			detail += " " + pid
		}
		return tx.Audit(store.AuditEntry{At: now, Who: by, From: from, Action: "look up", Target: id, Detail: detail})
	})
	if err != nil {
		return Looked{}, fmt.Errorf("delivery: look up %s: %w", id, err)
	}
	return out, nil
}
