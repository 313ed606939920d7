package workers

import (
	"errors"
	"fmt"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// PastInput is the drafter's input for the turn that draft d answered,
// built as Run builds it, from what the store holds now: the turn's
// messages (d.AnsweredEvents), the conversation before them within the
// context budget, the routing hint and the person's instruction. It
// reads only, so it runs on a read-only store; handoff eval re-drafts
// past turns with it, and guards the new draft with the GuardInput.
func (k *DraftJob) PastInput(d store.Draft) (drafter.Input, review.GuardInput, error) {
	var events []store.Event
	var own *store.Event
	for _, key := range d.AnsweredEvents() {
		ev, err := k.Store.EventByKey(key)
		if errors.Is(err, store.ErrNotFound) && key != d.EventKey {
			continue // retention took an old message of the turn
		}
		if err != nil {
			return drafter.Input{}, review.GuardInput{}, fmt.Errorf("event %s of draft %s: %w", key, d.ID, err)
		}
		events = append(events, ev)
		if key == d.EventKey {
			own = &events[len(events)-1]
		}
	}
	if own == nil {
		ev, err := k.Store.EventByKey(d.EventKey)
		if err != nil {
			return drafter.Input{}, review.GuardInput{}, fmt.Errorf("event %s of draft %s: %w", d.EventKey, d.ID, err)
		}
		events, own = append(events, ev), &ev
	}
	ev := *own
	history, err := k.history(store.Turn{Events: events})
	if err != nil {
		return drafter.Input{}, review.GuardInput{}, err
	}
	history, _ = k.withinBudget(history)
	in := turnInput(ev, events, history)
	hint := k.Router.Route(ev.Channel, in.Text, routingFields(drafter.Extract(in.Text), ev))
	in.Owner, in.Instruction = hint.Owner, d.Instruction
	return in, guardInput(in), nil
}
