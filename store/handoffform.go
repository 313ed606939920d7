package store

import (
	"encoding/json"
	"strings"
)

// A lead's stored form leaves out what its other fields already say. The
// ingest writes the lead with every message, and a new lead's record was
// 527 bytes: its channel and conversation id are its key's two halves, and
// the event key that drafts the open turn (turn_draft: each message that
// joins the turn takes over its draft, leads/turns.go) and the lead's last
// message (last_event_key) are both turn_events' last.
//
//	{"v":1,"key":"demo:+15550001234","status":"received",…,"turn_events":["demo:m-1"],"draft_job":"01J…"}
//
// channel and conversation_id absent: the key's parts before and after
// its first ":" (written whenever the channel holds a ":" or the key is
// not the two joined); turn_draft and last_event_key absent: turn_events'
// last, or none. Every older record
// writes all four and reads as before. Field names stay the record's, so
// recountLeads, which reads status alone, reads either form.

// handoffFields is Handoff without its methods, for handoffForm to embed.
type handoffFields Handoff

// handoffForm is the stored form: the fields below shadow Handoff's own.
type handoffForm struct {
	handoffFields
	Channel        *string `json:"channel,omitempty"`
	ConversationID *string `json:"conversation_id,omitempty"`
	LastEventKey   *string `json:"last_event_key,omitempty"`
	TurnDraft      *string `json:"turn_draft,omitempty"`
}

// turnLast is the last of keys, "" when it is empty.
func turnLast(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[len(keys)-1]
}

// encodeRecord is the lead's stored form (above).
func (h *Handoff) encodeRecord() ([]byte, error) {
	f := handoffForm{handoffFields: handoffFields(*h)}
	if strings.Contains(h.Channel, ":") || h.Key != LeadKey(h.Channel, h.ConversationID) {
		f.Channel, f.ConversationID = &h.Channel, &h.ConversationID
	}
	if h.LastEventKey != turnLast(h.TurnEvents) {
		f.LastEventKey = &h.LastEventKey
	}
	if h.TurnDraft != turnLast(h.TurnEvents) {
		f.TurnDraft = &h.TurnDraft
	}
	return json.Marshal(&f)
}

// decodeRecord reads either form of a lead.
func (h *Handoff) decodeRecord(raw []byte, strict bool) error {
	var f handoffForm
	if err := unmarshal(raw, &f, strict); err != nil {
		return err
	}
	*h = Handoff(f.handoffFields)
	ch, conv, _ := strings.Cut(h.Key, ":")
	h.Channel, h.ConversationID = ch, conv
	if f.Channel != nil {
		h.Channel = *f.Channel
	}
	if f.ConversationID != nil {
		h.ConversationID = *f.ConversationID
	}
	h.LastEventKey, h.TurnDraft = turnLast(h.TurnEvents), turnLast(h.TurnEvents)
	if f.LastEventKey != nil {
		h.LastEventKey = *f.LastEventKey
	}
	if f.TurnDraft != nil {
		h.TurnDraft = *f.TurnDraft
	}
	return nil
}
