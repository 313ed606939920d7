package workers

import (
	"errors"
	"fmt"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// PastInput is the drafter's input for the turn that draft d answered,
// built as Run builds it, from what the store holds now: the turn's
// messages (d.AnsweredEvents), the conversation before them within the
// context budget, the routing hint and the person's instruction. It
// reads only, so it runs on a read-only store; handoff eval re-drafts
// past turns with it, and guards the new draft with the GuardInput. The
// facts are the version d was written from (pastFacts), given to the
// drafter and to the guard alike.
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
	var history []drafter.Message
	err := k.Store.View(func(tx *store.Tx) (err error) {
		history, err = k.history(tx, store.Turn{Events: events})
		return err
	})
	if err != nil {
		return drafter.Input{}, review.GuardInput{}, err
	}
	history, _ = k.withinBudget(history)
	in := turnInput(ev, events, history)
	hint := k.Router.Route(ev.Channel, in.Text, routingFields(drafter.Extract(in.Text), ev))
	in.Owner, in.Instruction = hint.Owner, d.Instruction
	gi := guardInput(in)
	v, ok, err := k.pastFacts(d)
	if err != nil {
		return drafter.Input{}, review.GuardInput{}, err
	}
	if ok && len(v.Entries) > 0 {
		in.Facts, gi.Facts = DrafterFacts(v.Version, v.Entries), v.Text
	}
	return in, gi, nil
}

// pastFacts is the facts version draft d was written from, else (a draft
// from before versions, or a version the store no longer has) its
// client's current one; ok false when there is none (or no Client).
func (k *DraftJob) pastFacts(d store.Draft) (store.FactsVersion, bool, error) {
	if k.Client == nil {
		return store.FactsVersion{}, false, nil
	}
	client := k.Client(d.Channel)
	if d.FactsVersion > 0 {
		v, err := facts.Version(k.Store, client, d.FactsVersion)
		if err == nil {
			return v, true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.FactsVersion{}, false, fmt.Errorf("facts version %d of client %s: %w", d.FactsVersion, client, err)
		}
	}
	return facts.Current(k.Store, client)
}
