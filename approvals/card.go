package approvals

import (
	"fmt"
	"strings"
	"time"

	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// State is what a card shows of its draft.
type State string

// The states of a card.
const (
	Waiting    State = "waiting"    // pending: Approve, Edit, Reject offered
	Held       State = "held"       // approved, its send held for undo_window: Undo offered
	Approved   State = "approved"   // approved, sent or being sent
	Rejected   State = "rejected"   // rejected (by a person, or replaced by a new version)
	Superseded State = "superseded" // a newer message moved its turn on
)

// View is a draft as every surface's card shows it.
type View struct {
	Draft      store.Draft
	Client     string // the client id of the draft's channel
	ClientName string
	Channel    string
	Customer   string   // the lead's name, else its contact
	Messages   []string // the turn's messages, oldest first
	Text       string   // the reply: the draft's text, or the approved one
	State      State
	// Status is one line of who decided and when ("Approved by dana via
	// slack at 06:10 UTC"); "" while waiting.
	Status    string
	UndoUntil time.Time // Held, Rejected: an undo works until then
}

// Final reports whether the card can no longer change: any state but
// waiting and held, once no undo can bring its draft back.
func (v View) Final() bool {
	return v.State != Waiting && v.State != Held && v.UndoUntil.IsZero()
}

// Fingerprint names what the card shows, so a card whose Shown differs is
// behind its draft.
func (v View) Fingerprint() string {
	s := string(v.State)
	if d := v.Draft.Decision; d != nil {
		s += "|" + d.By + "|" + d.At.UTC().Format(time.RFC3339Nano)
	}
	if !v.UndoUntil.IsZero() {
		s += "|undoable" // its end changes the card: it becomes final
	}
	return s
}

// maxMessages bounds the messages a card quotes (the newest are kept).
const maxMessages = 5

// viewTx reads the card of draft id as of now.
func (a *Approvals) viewTx(tx *store.Tx, id string, now time.Time) (View, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return View{}, err
	}
	v := View{Draft: d, Channel: d.Channel, Client: a.cfg.ClientOf(d.Channel), Text: d.Text}
	if cl, ok := a.cfg.Client(v.Client); ok {
		v.ClientName = cl.Name
	}
	if v.ClientName == "" {
		v.ClientName = v.Client
	}
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return View{}, fmt.Errorf("lead of draft %s: %w", d.ID, err)
	}
	v.Customer = h.Name
	if v.Customer == "" {
		v.Customer = h.Contact
	}
	keys := d.AnsweredEvents()
	if len(keys) > maxMessages {
		keys = keys[len(keys)-maxMessages:]
	}
	for _, k := range keys {
		ev, err := tx.EventByKey(k)
		if err != nil {
			continue // pruned by retention: the card quotes what is left
		}
		if v.Customer == "" {
			v.Customer = firstOf(ev.Name, ev.Contact)
		}
		v.Messages = append(v.Messages, firstOf(ev.Text, ev.BodyText, ev.Subject))
	}
	if v.Customer == "" {
		v.Customer = "a customer"
	}
	dec := d.Decision
	switch d.Status {
	case store.DraftPending:
		v.State = Waiting
	case store.DraftApproved:
		v.State = Approved
		if dec != nil && dec.Text != "" {
			v.Text = dec.Text
		}
		if o, err := tx.Outbox(d.OutboxID); err == nil && o.Status == store.OutboxPending && o.UndoUntil.After(now) {
			v.State, v.UndoUntil = Held, o.UndoUntil
		}
	case store.DraftRejected:
		v.State = Rejected
		if until, ok := review.RejectionUndoUntil(a.cfg, d); ok && until.After(now) {
			v.UndoUntil = until // an undo can bring it back: the card stays open
		}
	default:
		v.State = Superseded
	}
	if dec != nil {
		v.Status = statusLine(v.State, dec)
	}
	return v, nil
}

// statusLine says who decided a card's draft, where and when.
func statusLine(s State, dec *store.Decision) string {
	var what string
	switch s {
	case Held, Approved:
		what = "Approved"
		if dec.Edited {
			what = "Approved with an edit"
		}
	case Rejected:
		what = "Rejected"
	default:
		return sentence(dec.Reason)
	}
	line := what + " by " + dec.By
	if dec.Via != "" {
		line += " via " + dec.Via
	}
	line += " at " + hhmm(dec.At)
	if s == Rejected && dec.Reason != "" {
		line += ": " + dec.Reason
	}
	return line
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}
