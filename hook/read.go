package hook

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Mapping says where a channel's messages, their fields and its receipts
// are in a payload: the channel's fields, messages and receipts keys
// (config.Channel.Mapping builds it).
type Mapping struct {
	// MessageID is tried in order; the first present names the message.
	MessageID []string
	// ConversationID is optional; empty: the contact, else the message id.
	ConversationID, Contact, Name, Text, Subject string
	Messages                                     Messages
	Receipts                                     Receipts
}

// Item is one message of a payload, its fields read by a Mapping. Only
// MessageID is sure to be set.
type Item struct {
	MessageID, ConversationID, Contact, Name, Text, Subject string
	ReplyTo                                                 ReplyTo // Messages.ReplyTo's values
	// SentAt is when the provider says the customer wrote it
	// (Messages.Sent); zero when it does not say, or not readably.
	SentAt time.Time
}

// ReceiptItem is one report a payload carries on a message sent: the
// provider's id of it, its status, and our reference where the provider
// echoes it (WhatsApp's biz_opaque_callback_data).
type ReceiptItem struct {
	ProviderID, Status, Ref string
}

// Read is what one payload carries: its messages, the items that are not
// messages (a status, an edit, a bot's message…) and its receipts.
type Read struct {
	Messages      []Item
	Notifications int
	Receipts      []ReceiptItem
}

// ReadAll reads every message and receipt of p by m and counts every
// notification. A message whose id, contact or conversation id is refused
// refuses the whole payload (an *Error, a 400), naming the item in a
// batch; a receipt that cannot be read stays a plain notification. A body
// with no item at all is one notification.
func (p *Payload) ReadAll(m Mapping) (Read, error) {
	var r Read
	items, err := p.Items(m.Messages.Items)
	if err != nil {
		return r, err
	}
	for i, at := range items {
		if !p.isMessage(m.Messages, at) {
			r.Notifications++
			continue
		}
		refuse := func(err error) (Read, error) {
			var he *Error
			if m.Messages.Items != "" && errors.As(err, &he) {
				return r, &Error{Status: he.Status, Msg: fmt.Sprintf("message %d of the batch: %s", i+1, he.Msg)}
			}
			return r, err
		}
		msgID, err := MessageIDAt(p, m.MessageID, at)
		if err != nil {
			return refuse(err)
		}
		contact := p.optional(m.Contact, at)
		if err := CheckKeyField("contact", m.Contact, contact); err != nil {
			return refuse(err)
		}
		conv := p.conversationID(m, at, contact, msgID)
		if err := CheckKeyField("conversation_id", m.ConversationID, conv); err != nil {
			return refuse(err)
		}
		text := p.optional(m.Text, at)
		if text == "" {
			text = p.mediaText(m.Messages.Media, at)
		}
		r.Messages = append(r.Messages, Item{
			MessageID: msgID, ConversationID: conv, Contact: contact,
			Name: p.optional(m.Name, at), Text: text, Subject: p.optional(m.Subject, at),
			ReplyTo: ReplyTo{
				Chat:      p.optional(m.Messages.ReplyTo.Chat, at),
				MessageID: p.optional(m.Messages.ReplyTo.MessageID, at),
				Thread:    p.optional(m.Messages.ReplyTo.Thread, at),
			},
			SentAt: sentAt(p.optional(m.Messages.Sent, at), m.Messages.SentMillis),
		})
	}
	if rc := m.Receipts; rc.ID != "" && rc.Status != "" {
		ritems, err := p.Items(rc.Items)
		if err != nil {
			return r, err
		}
		for _, at := range ritems {
			// A receipt whose id would not make a clean key, or without a
			// status, stays a plain notification: never a 400 for it.
			id, err := MessageIDAt(p, []string{rc.ID}, at)
			status := p.optional(rc.Status, at)
			if err != nil || status == "" || len(status) > 64 {
				continue
			}
			var ref string
			if rc.Items != "" {
				ref = p.optional(rc.Items+"/biz_opaque_callback_data", at)
			}
			r.Receipts = append(r.Receipts, ReceiptItem{ProviderID: id, Status: status, Ref: ref})
		}
		if rc.Items == "" && len(r.Receipts) > 0 && r.Notifications > 0 {
			r.Notifications-- // the body is the receipt: count it once
		}
	}
	if len(r.Messages) == 0 && r.Notifications == 0 && len(r.Receipts) == 0 {
		r.Notifications = 1
	}
	return r, nil
}

// isMessage applies messages.when and messages.unless to the item at.
func (p *Payload) isMessage(m Messages, at []int) bool {
	for _, src := range m.When {
		if !p.Present(src, at) {
			return false
		}
	}
	for _, src := range m.Unless {
		if p.Present(src, at) {
			return false
		}
	}
	return true
}

// mediaText is what the first media kind present at the item sent ("sent
// a photo"), or "" when none is.
func (p *Payload) mediaText(media []Media, at []int) string {
	for _, md := range media {
		if md.Source != "" && p.Present(md.Source, at) {
			return md.Text
		}
	}
	return ""
}

// optional reads a field that may be absent or of the wrong type: a
// message is never refused over a name that is not a string. FieldAt
// trims the value.
func (p *Payload) optional(source string, at []int) string {
	if source == "" {
		return ""
	}
	v, ok, err := p.FieldAt(source, at)
	if !ok || err != nil {
		return ""
	}
	return v
}

// conversationID is the mapped field, else the contact, else the message id.
func (p *Payload) conversationID(m Mapping, at []int, contact, msgID string) string {
	if v := p.optional(m.ConversationID, at); v != "" {
		return v
	}
	if contact != "" {
		return contact
	}
	return msgID
}

// sentAt reads a provider's time of a message: a Unix time (seconds, or
// milliseconds with millis), or an RFC 3339 time; zero for anything else,
// a time not after 0, or one before 2000 (not a time a message was written).
func sentAt(v string, millis bool) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		// A generic webhook's own time is as often RFC 3339 as a number.
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || at.Year() < 2000 {
			return time.Time{}
		}
		return at.UTC()
	}
	if n <= 0 {
		return time.Time{}
	}
	at := time.Unix(n, 0)
	if millis {
		at = time.UnixMilli(n)
	}
	if at.Year() < 2000 {
		return time.Time{}
	}
	return at.UTC()
}
