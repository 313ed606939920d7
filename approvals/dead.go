package approvals

import (
	"encoding/json"

	"github.com/handoff/handoff/store"
)

// DeadCard is the dead-letter rules of the surfaces' jobs (announce,
// follow, remind; workers.DeadKinds): a discarded one names its draft and
// what its card is known to have done, and a replay is safe — an announce
// job posts nothing for a card posted or marked uncertain, a follow job
// changes a card to what its draft is, a remind job says nothing of a
// draft decided meanwhile (a reminder may be posted again).
type DeadCard struct{}

// Describe fills in dl from the job's card.
func (DeadCard) Describe(tx *store.Tx, dl *store.DeadLetter) {
	var args struct {
		Surface string `json:"surface"`
		Draft   string `json:"draft"`
	}
	if dl.Job == nil || json.Unmarshal(dl.Job.Payload, &args) != nil {
		dl.Safe, dl.Why = false, "the job's arguments cannot be read"
		return
	}
	if d, err := tx.Draft(args.Draft); err == nil {
		dl.Draft, dl.EventKey, dl.Channel = &d, d.EventKey, d.Channel
	}
	c, err := tx.Card(args.Surface, args.Draft)
	switch {
	case err != nil:
		dl.Effects = append(dl.Effects, "no "+surfaceLabel(args.Surface)+" card is recorded")
	case c.Uncertain != "":
		dl.Effects = append(dl.Effects, c.Uncertain)
	case c.Ref != "":
		dl.Effects = append(dl.Effects, "the "+surfaceLabel(args.Surface)+" card is posted in "+c.Chat)
	}
	dl.Safe = true
	dl.Why = "a replay never posts a card twice: a card posted, or perhaps posted with no way to tell, is not posted again"
	if dl.Job.Kind == KindRemind {
		dl.Why = "a replay posts the reminder once more, unless its draft was decided meanwhile"
	}
}
