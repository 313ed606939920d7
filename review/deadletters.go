package review

import (
	"encoding/json"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
)

var _ delivery.Regenerator = DeadDraft{}

// DeadDraft is the draft job's rules on the dead-letter list
// (delivery.DeadKind, handed to delivery by workers.DeadKinds): a
// discarded draft job is about its event; replaying it is safe, since no
// draft reaches a customer before a person approves it; and it is the one
// kind a person can regenerate.
type DeadDraft struct{}

// Describe names the job's event and its stored draft, if any, and says
// what a replay does with it.
func (DeadDraft) Describe(tx *store.Tx, dl *store.DeadLetter) {
	dl.EventKey = dl.Job.Key
	if d, err := tx.DraftByEvent(dl.Job.Key); err == nil {
		dl.Draft = &d
		dl.Effects = append(dl.Effects, "draft "+d.ID+" is stored ("+string(d.Status)+")")
		dl.Safe, dl.Why = true, "the draft is stored and will be reused: no model call"
	} else {
		dl.Safe, dl.Why = true, "no draft was stored, so the drafter is called again; nothing has reached the customer"
	}
}

// Regenerate is RegenerateTx: the next version of the event's draft.
func (DeadDraft) Regenerate(tx *store.Tx, j store.Job) (json.RawMessage, error) {
	return RegenerateTx(tx, j)
}
