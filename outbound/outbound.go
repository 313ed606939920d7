// Package outbound posts handoff's outbound events — lead.status_changed,
// draft.approved, reply.sent, reply.failed and dead_letter.added — to the
// subscribers of events[], each once per business key, signed with
// Standard Webhooks.
//
// The business change that causes an event writes it: the store's hooks
// (a lead's move, an outbox row's move, a job's discard) run inside the
// change's own write transaction, and there each event becomes an outbox
// row of kind store.OutboxEvent per subscriber that takes it, with its
// delivery job (delivery.CreateEventTx). The row's id is derived from the
// business key alone,
//
//	ev:<lead key>:<subscriber>:<type>:<business key>
//
// so the change running again (a retried round, a replay) finds the row
// and writes nothing, and the webhook-id, derived from the row id, is the
// same on every resend: a receiver that dedupes by it acts once. The
// business keys:
//
//	lead.status_changed  <cycle>:<status>[:r<n>]  the CRM write's key (crm.MoveKey)
//	draft.approved       the draft id
//	reply.sent           the reply's outbox id
//	reply.failed         the reply's outbox id
//	dead_letter.added    the item's id and its returns to the list: <id>#<replays>
//
// The delivery job sends the rows in a pool of their own
// (delivery.KindEvent) with the rules of every outbox row: retries with
// backoff, an unknown outcome resent (the subscriber dedupes), a refusal
// or the last attempt to the dead-letter list, replayed from it by a
// person. Nothing waits on a subscriber: ingest, drafting and sending only
// write rows.
package outbound

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
)

// Event is an event's JSON body, under Standard Webhooks' type, timestamp
// and data envelope: the same bytes on every resend (only the
// webhook-timestamp header, and so the signature, is the send's). It is
// also the row's stored form (its Text).
type Event struct {
	Type string `json:"type"`
	// Timestamp is when the business change happened.
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what an event says; each type fills the fields that concern it
// (docs/contract.md shows each).
type Data struct {
	// Key is the event's business key (see the package comment).
	Key    string `json:"key"`
	Client string `json:"client,omitempty"`
	// Lead is the lead key, "<channel>:<conversation id>".
	Lead           string `json:"lead,omitempty"`
	Channel        string `json:"channel,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	// Status is the lead's status (lead.status_changed: the new one; From
	// the one it left, "" for the first), Cycle its cycle.
	Status string `json:"status,omitempty"`
	From   string `json:"from,omitempty"`
	Cycle  int    `json:"cycle,omitempty"`
	Owner  string `json:"owner,omitempty"`
	// DraftID and OutboxID name the draft and its reply's outbox row.
	DraftID  string `json:"draft_id,omitempty"`
	OutboxID string `json:"outbox_id,omitempty"`
	// ApprovedBy is who approved the reply (a user, or the auto-approval).
	ApprovedBy string `json:"approved_by,omitempty"`
	// Text is the reply as approved (draft.approved).
	Text string `json:"text,omitempty"`
	// ProviderID is the provider's id of the sent reply (reply.sent).
	ProviderID string `json:"provider_id,omitempty"`
	// Error says why it failed (reply.failed, dead_letter.added).
	Error string `json:"error,omitempty"`
	// DeadLetterID is the item's id on the dead-letter list, DeadLetterKind
	// "outbox" (a row) or "job" (a discarded job), What what it is (reply,
	// crm, alert, or the job's kind), State its state there.
	DeadLetterID   string `json:"dead_letter_id,omitempty"`
	DeadLetterKind string `json:"dead_letter_kind,omitempty"`
	What           string `json:"what,omitempty"`
	State          string `json:"state,omitempty"`
	// Link is the lead's message in handoff's dashboard.
	Link string `json:"link,omitempty"`
}

// Encode is the event's body and stored form.
func (e Event) Encode() string {
	b, _ := json.Marshal(e) // strings, an int and a time: nothing can fail
	return string(b)
}

// Decode reads a row's Text back.
func Decode(text string) (Event, error) {
	var e Event
	if err := json.Unmarshal([]byte(text), &e); err != nil {
		return Event{}, fmt.Errorf("outbound: the row's event cannot be read: %w", err)
	}
	if e.Type == "" || e.Data.Key == "" {
		return Event{}, errors.New("outbound: the row's event names no type or key")
	}
	return e, nil
}

// RowID is the outbox id of the event typ of key about lead ("" for none)
// to subscriber sub.
func RowID(lead, sub, typ, key string) string {
	return "ev:" + lead + ":" + sub + ":" + typ + ":" + key
}

// MessageID is the webhook-id of row id's event, derived from the row id
// alone, as the crm webhook's are.
func MessageID(rowID string) string { return crm.MessageID(rowID) }

// Hooks are the store hooks that write the events, for app to set
// (Store.HookLeadMoves, HookOutboxMoves, HookJobDiscards).
type Hooks struct {
	cfg *config.Config
}

// New returns the hooks of cfg's subscribers.
func New(cfg *config.Config) *Hooks { return &Hooks{cfg: cfg} }

// LeadMoved is the lead.status_changed of lead h, just moved in tx.
func (hk *Hooks) LeadMoved(tx *store.Tx, h store.Handoff, now time.Time) error {
	k := crm.MoveKey(h)
	key := strings.TrimPrefix(k.String(), "crm:"+h.Key+":")
	d := Data{Key: key, Lead: h.Key, Channel: h.Channel, ConversationID: h.ConversationID, Status: string(h.Status), Cycle: h.Cycle, Owner: h.Owner, Link: hk.link(h.LastEventKey)}
	if n := len(h.History); n >= 2 {
		d.From = string(h.History[n-2].Status)
	}
	return hk.emit(tx, config.EventLeadStatusChanged, h.LastEventKey, now, d)
}

// OutboxMoved is the events of row o, written new (old nil) or moved in
// tx: a new reply is its draft's approval; a reply moved to sent or
// failed is reply.sent or reply.failed; any row but an event's that
// moves into failed or needs_reconciliation joins the dead-letter list.
// An event's own row causes no event: its dead letters are on the list,
// not posted about.
func (hk *Hooks) OutboxMoved(tx *store.Tx, old *store.Outbox, o store.Outbox) error {
	if o.Kind == store.OutboxEvent {
		return nil
	}
	at := o.UpdatedAt
	base := Data{Channel: o.Channel, ConversationID: o.ConversationID, Link: hk.link(o.EventKey)}
	if o.Channel != "" {
		base.Lead = store.LeadKey(o.Channel, o.ConversationID)
	}
	if o.Kind == "" {
		reply := base
		reply.DraftID, reply.OutboxID = o.DraftID, o.ID
		if h, err := tx.Handoff(base.Lead); err == nil {
			reply.Owner = h.Owner
		}
		switch {
		case old == nil:
			d := reply
			d.Key, d.ApprovedBy, d.Text = o.DraftID, o.ApprovedBy, o.Text
			if err := hk.emit(tx, config.EventDraftApproved, o.EventKey, o.CreatedAt, d); err != nil {
				return err
			}
		case o.Status == store.OutboxSent:
			d := reply
			d.Key, d.ProviderID = o.ID, o.ProviderID
			if err := hk.emit(tx, config.EventReplySent, o.EventKey, at, d); err != nil {
				return err
			}
		case o.Status == store.OutboxFailed:
			d := reply
			d.Key, d.Error = o.ID, noteOf(o)
			if err := hk.emit(tx, config.EventReplyFailed, o.EventKey, at, d); err != nil {
				return err
			}
		}
	}
	if dead(o.Status) && (old == nil || !dead(old.Status)) {
		d := base
		d.Key = o.ID + "#" + strconv.Itoa(len(o.Replays)+len(o.Reconciliations))
		d.DeadLetterID, d.DeadLetterKind, d.What, d.State, d.Error = o.ID, store.DeadOutbox, whatRow(o), string(o.Status), noteOf(o)
		if o.Kind == "" {
			d.DraftID, d.OutboxID = o.DraftID, o.ID
		}
		return hk.emit(tx, config.EventDeadLetterAdded, o.EventKey, at, d)
	}
	return nil
}

// JobDiscarded is the dead_letter.added of job j, discarded in tx. A
// discarded delivery job of an event's row causes none.
func (hk *Hooks) JobDiscarded(tx *store.Tx, j store.Job) error {
	if j.Kind == delivery.KindEvent {
		return nil
	}
	d := Data{Key: j.ID + "#" + strconv.Itoa(len(j.Replays)), DeadLetterID: j.ID, DeadLetterKind: store.DeadJob, What: j.Kind, State: string(j.State), Error: j.LastError}
	eventKey := ""
	switch j.Kind {
	case delivery.Kind:
		o, err := tx.Outbox(j.Key)
		if err == nil && o.Kind == store.OutboxEvent {
			return nil
		}
		if err == nil {
			d.Lead, d.Channel, d.ConversationID, eventKey = store.LeadKey(o.Channel, o.ConversationID), o.Channel, o.ConversationID, o.EventKey
			if o.Kind == "" {
				d.DraftID, d.OutboxID = o.DraftID, o.ID
			}
		}
	case store.KindDraft:
		if ev, err := tx.EventByKey(j.Key); err == nil {
			d.Lead, d.Channel, d.ConversationID, eventKey = store.LeadKey(ev.Channel, ev.ConversationID), ev.Channel, ev.ConversationID, ev.Key
		}
	}
	d.Link = hk.link(eventKey)
	return hk.emit(tx, config.EventDeadLetterAdded, eventKey, j.UpdatedAt, d)
}

// emit writes the event typ with data d, at, to every subscriber that
// takes it, in tx: a row and its delivery job each, unless the row exists.
func (hk *Hooks) emit(tx *store.Tx, typ, eventKey string, at time.Time, d Data) error {
	client := ""
	if d.Channel != "" {
		client = hk.cfg.ClientOf(d.Channel)
	}
	d.Client = client
	for _, s := range hk.cfg.Events {
		if !s.Takes(typ, client) {
			continue
		}
		ev := Event{Type: typ, Timestamp: at.UTC().Round(0), Data: clean(d)}
		_, err := delivery.CreateEventTx(tx, delivery.Event{
			ID: RowID(d.Lead, s.Name, typ, d.Key), Lead: d.Lead, Channel: d.Channel, ConvID: d.ConversationID, EventKey: eventKey,
			Provider: s.ProviderName(), To: typ + " to events subscriber " + s.Name, Text: ev.Encode(), At: at,
			JobID: ulid.Make().String(), MaxAttempts: hk.cfg.Retry.MaxAttempts,
		})
		if err != nil {
			return fmt.Errorf("outbound: %s %s to %s: %w", typ, d.Key, s.Name, err)
		}
	}
	return nil
}

func (hk *Hooks) link(eventKey string) string {
	if hk.cfg.BaseURL == "" || eventKey == "" {
		return ""
	}
	return hk.cfg.BaseURL + "/events/" + url.PathEscape(eventKey)
}

// dead reports a status that puts a row on the dead-letter list.
func dead(s store.OutboxStatus) bool {
	return s == store.OutboxFailed || s == store.OutboxNeedsReconciliation
}

// noteOf is why row o failed: its note, else its last attempt's error.
func noteOf(o store.Outbox) string {
	if o.Note != "" || len(o.Attempts) == 0 {
		return o.Note
	}
	return o.Attempts[len(o.Attempts)-1].Error
}

// whatRow names what row o is.
func whatRow(o store.Outbox) string {
	if o.Kind == "" {
		return "reply"
	}
	return o.Kind
}

// clean makes every string of d valid UTF-8, so the stored form reads
// back as written.
func clean(d Data) Data {
	for _, p := range []*string{&d.Key, &d.Client, &d.Lead, &d.Channel, &d.ConversationID, &d.Status, &d.From, &d.Owner, &d.DraftID, &d.OutboxID,
		&d.ApprovedBy, &d.Text, &d.ProviderID, &d.Error, &d.DeadLetterID, &d.DeadLetterKind, &d.What, &d.State, &d.Link} {
		*p = strings.ToValidUTF8(*p, "\uFFFD")
	}
	return d
}
