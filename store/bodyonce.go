package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The body is stored once, as received. An event's value in the events
// bucket is its record JSON, a newline, and the request body's bytes
// exactly as they arrived:
//
//	{"v":1,"id":"01J…",…,"raw":"body","text_at":[56,87]}\n{"id":"m-1", "text": "…"}
//
// "raw" names the field those bytes fill: "body" (a JSON body, Body) or
// "body_text" (anything else, BodyText). json.Marshal never writes a raw
// newline (it escapes control characters in strings), so the first one
// ends the record. Marshalling the body inside the record instead would
// rewrite it (json compacts a json.RawMessage and escapes < > & in it):
// the stored body would differ from the received one, and any offset
// measured on the one would point elsewhere in the other.
//
// A webhook's text is usually one string of its JSON body ("text": "…"),
// and a large message is mostly that string: kept both as Event.Text and
// in the body it cost two bytes on disk per byte received. So when the
// text's JSON string literal occurs in the stored bytes, the record keeps
// only its place (text_at: the literal's offset and length in them), and
// every read decodes the text from there again.
//
// A value without a newline is a record from schema 8 or earlier: the
// body inside it (compacted and HTML-escaped), text_at measured on it.
// Migration 8 (schema_repair.go) verified or repaired every such event,
// so those decode the old way. The Event a caller sees is the same either
// way: Text filled in, TextAt nil, Raw "".

// The fields the bytes after an event's record fill ("raw").
const (
	rawBody     = "body"
	rawBodyText = "body_text"
)

// recordEncoder is a record with its own stored form; encode uses it.
type recordEncoder interface{ encodeRecord() ([]byte, error) }

// recordDecoder is a record with its own stored form; decode uses it.
type recordDecoder interface {
	decodeRecord(raw []byte, strict bool) error
}

// encode is a record's stored form: its JSON, unless it has its own.
func encode[T any](v *T) ([]byte, error) {
	if e, ok := any(v).(recordEncoder); ok {
		return e.encodeRecord()
	}
	return json.Marshal(v)
}

// decode reads a record's stored form into v. The decoded record owns
// its bytes, so it outlives the transaction raw belongs to.
func decode[T any](raw []byte, v *T) error { return decodeAs(raw, v, false) }

// decodeAs is decode, strict for Check (see unmarshal): the one path every
// record is read by. A record that decodes but says it cannot be read
// (Event.Unreadable) is an error too.
func decodeAs[T any](raw []byte, v *T, strict bool) error {
	var err error
	if d, ok := any(v).(recordDecoder); ok {
		err = d.decodeRecord(raw, strict)
	} else {
		err = unmarshal(raw, v, strict)
	}
	if err != nil {
		return err
	}
	if u, ok := any(v).(unreadableRecord); ok && u.unreadableReason() != "" {
		return errors.New(u.unreadableReason())
	}
	return nil
}

// encodeRecord is the event's stored form: its record, a newline, and its
// body's bytes as received, Text left out when they hold it (see textIn).
// A body kept as JSON must be valid JSON: checked here.
func (ev *Event) encodeRecord() ([]byte, error) { return ev.encodeBody(false) }

// encodeBody is encodeRecord; bodyValid says the body was proven one JSON
// value already (a jsonbody.Valid of these very bytes: EncodeEventJSON),
// so it is not scanned again.
func (ev *Event) encodeBody(bodyValid bool) ([]byte, error) {
	e := *ev
	var raw []byte
	e.Raw, e.TextAt = "", nil
	switch {
	case len(ev.Body) > 0:
		if !bodyValid && !json.Valid(ev.Body) {
			return nil, fmt.Errorf("event %s: its body is not valid JSON", ev.ID)
		}
		e.Raw, raw, e.Body = rawBody, ev.Body, nil
	case ev.BodyText != "":
		e.Raw, raw, e.BodyText = rawBodyText, []byte(ev.BodyText), ""
	}
	if e.TextAt = textIn(raw, ev.Text); e.TextAt != nil {
		e.Text = ""
	}
	head, err := json.Marshal(e.head())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+1+len(raw))
	return append(append(append(out, head...), '\n'), raw...), nil
}

// The record before the body leaves out what it would say twice: the
// event key when it is the channel and the message id joined by ":" (as
// intake makes every key; absent, it reads so), and a count of no
// duplicates. Records that write both, every one before, read as before.
//
//	{"v":1,"id":"01J…","channel":"demo","message_id":"m-1","correlation_id":"01J…",…,"raw":"body"}

// eventFields is Event without its methods, for eventHead to embed.
type eventFields Event

// eventHead is the stored record: its fields shadow Event's of the same name.
type eventHead struct {
	eventFields
	Key        *string `json:"key,omitempty"` // nil: Channel ":" MessageID
	Duplicates int     `json:"duplicates,omitempty"`
}

// head is e's stored record.
func (e *Event) head() *eventHead {
	h := &eventHead{eventFields: eventFields(*e), Duplicates: e.Duplicates}
	if e.Key != e.Channel+":"+e.MessageID {
		h.Key = &e.Key
	}
	return h
}

// fill puts the record h read into ev.
func (h *eventHead) fill(ev *Event) {
	*ev = Event(h.eventFields)
	ev.Duplicates = h.Duplicates
	if h.Key != nil {
		ev.Key = *h.Key
	} else {
		ev.Key = ev.Channel + ":" + ev.MessageID
	}
}

// decodeRecord reads either stored form of an event and puts its text back.
func (ev *Event) decodeRecord(raw []byte, strict bool) error {
	head, tail, split := bytes.Cut(raw, []byte{'\n'})
	var h eventHead
	if err := unmarshal(head, &h, strict); err != nil {
		return err
	}
	h.fill(ev)
	if !split { // schema 8 or earlier: the body inside the record
		if ev.Raw != "" {
			return fmt.Errorf("event %s: its record names a %s after it, but nothing follows it", ev.ID, ev.Raw)
		}
		return ev.textFrom(ev.Body)
	}
	switch ev.Raw {
	case rawBody:
		if ev.Body != nil || ev.BodyText != "" {
			return fmt.Errorf("event %s: its record holds a body and names one after it", ev.ID)
		}
		if strict && !json.Valid(tail) {
			return fmt.Errorf("event %s: its body is not valid JSON", ev.ID)
		}
		ev.Body = bytes.Clone(tail)
	case rawBodyText:
		if ev.Body != nil || ev.BodyText != "" {
			return fmt.Errorf("event %s: its record holds a body and names one after it", ev.ID)
		}
		ev.BodyText = string(tail)
	case "":
		if len(tail) > 0 {
			return fmt.Errorf("event %s: %d bytes follow its record, which names no field for them", ev.ID, len(tail))
		}
	default:
		return fmt.Errorf("event %s: its record names %q for the bytes after it, which is no field", ev.ID, ev.Raw)
	}
	ev.Raw = ""
	return ev.textFrom(tail)
}

// textFrom decodes the text from body at TextAt, when the record has one.
func (ev *Event) textFrom(body []byte) error {
	if ev.TextAt == nil {
		return nil
	}
	off, n := ev.TextAt[0], ev.TextAt[1]
	ev.TextAt = nil
	if off < 0 || n < 2 || off > len(body) || n > len(body)-off {
		return fmt.Errorf("event %s: its text is at %d+%d, outside its %d-byte body", ev.ID, off, n, len(body))
	}
	if err := json.Unmarshal(body[off:off+n], &ev.Text); err != nil {
		return fmt.Errorf("event %s: its text at %d+%d in the body: %w", ev.ID, off, n, err)
	}
	return nil
}

// minTextRef is the shortest text worth a reference: below it the
// reference ("text_at":[1234,56]) costs about what it saves.
const minTextRef = 64

// textIn finds text's JSON string literal in body, as most senders write
// it (UTF-8, no HTML escapes), and returns its offset and length when
// decoding that literal gives text back exactly; otherwise nil, and the
// text is stored as itself. body is the bytes stored, so the place is
// right by construction: the read decodes the very bytes checked here.
func textIn(body []byte, text string) *[2]int {
	if len(text) < minTextRef || len(body) < len(text) {
		return nil
	}
	// literal(text) decodes back to text exactly when text is valid UTF-8
	// (encoding/json writes each invalid byte as \ufffd, and reads every
	// other escape it writes back as the character), so for valid text the
	// bytes found are the proof, and no decode is needed to check them;
	// invalid text never came back, so it is never referred to.
	// (canonical makes every Text valid before it is stored.)
	if !utf8.ValidString(text) {
		return nil
	}
	want := literal(text)
	off := bytes.Index(body, want)
	if off < 0 {
		return nil
	}
	return &[2]int{off, len(want)}
}

// literal is s as a JSON string literal without HTML escapes, the way
// most senders write it.
func literal(s string) []byte {
	var lit bytes.Buffer
	enc := json.NewEncoder(&lit)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(lit.Bytes(), []byte("\n"))
}

// validUTF8 is s as JSON keeps it: each byte of an invalid UTF-8
// sequence becomes U+FFFD (encoding/json's rule), so that the event a
// caller holds after recording is the one every read returns.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}

// canonical makes the strings of ev that JSON keeps (all but the body,
// which is kept as bytes) what a read returns.
func (ev *Event) canonical() {
	for _, s := range []*string{&ev.ID, &ev.Key, &ev.Channel, &ev.MessageID, &ev.CorrelationID, &ev.ConversationID, &ev.Contact, &ev.Name, &ev.Text, &ev.Subject, &ev.ContentType, &ev.Unreadable} {
		*s = validUTF8(*s)
	}
	if ev.ReplyTo != nil {
		r := *ev.ReplyTo // a copy: the caller's stays as it is
		for _, s := range []*string{&r.Chat, &r.MessageID, &r.Thread} {
			*s = validUTF8(*s)
		}
		ev.ReplyTo = &r
	}
}

// CanonicalJSON is raw as json.Marshal writes a json.RawMessage (compact,
// < > & escaped): the form a record's RawMessage field (a job's payload,
// a key's result) is stored and read back in, so a caller puts it so
// before comparing or storing it. Invalid JSON is returned as it is, for
// the encode to refuse.
func CanonicalJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	out, err := json.Marshal(raw)
	if err != nil {
		return raw
	}
	return out
}
