package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The body is stored once. A webhook's text is usually one string of its
// JSON body ("text": "…"), and a large message is mostly that string: kept
// both as Event.Text and inside Event.Body it cost two bytes on disk per
// byte received (300 webhooks of 1 MiB made a 705 MB file). So when the
// text's JSON string literal occurs in the body, the events bucket keeps
// only its place (text_at: the literal's offset and length in body), and
// every read decodes the text from there again. The Event a caller sees is
// the same either way: Text filled in, TextAt nil.

// recordEncoder is a record with its own stored form; table.encode uses it.
type recordEncoder interface{ encodeRecord() ([]byte, error) }

// recordDecoder is a record that finishes itself after decoding; table.decode calls it.
type recordDecoder interface{ decodedRecord() error }

// encode is a record's stored JSON.
func encode[T any](v *T) ([]byte, error) {
	if e, ok := any(v).(recordEncoder); ok {
		return e.encodeRecord()
	}
	return json.Marshal(v)
}

// decode reads a record's stored JSON into v.
func decode[T any](raw []byte, v *T) error { return decodeAs(raw, v, false) }

// decodeAs is decode, strict for Check (see unmarshal): the one path every
// record is read by. A record that decodes but says it cannot be read
// (Event.Unreadable) is an error too.
func decodeAs[T any](raw []byte, v *T, strict bool) error {
	if err := unmarshal(raw, v, strict); err != nil {
		return err
	}
	if d, ok := any(v).(recordDecoder); ok {
		if err := d.decodedRecord(); err != nil {
			return err
		}
	}
	if u, ok := any(v).(unreadableRecord); ok && u.unreadableReason() != "" {
		return errors.New(u.unreadableReason())
	}
	return nil
}

// encodeRecord is the event's stored form: Text left out when the body
// holds it (see textIn).
func (ev *Event) encodeRecord() ([]byte, error) {
	e := *ev
	if e.TextAt = textIn(ev.Body, ev.Text); e.TextAt != nil {
		e.Text = ""
	}
	return json.Marshal(&e)
}

// decodedRecord puts the text back from the body.
func (ev *Event) decodedRecord() error {
	if ev.TextAt == nil {
		return nil
	}
	off, n := ev.TextAt[0], ev.TextAt[1]
	ev.TextAt = nil
	if off < 0 || n < 2 || off+n > len(ev.Body) {
		return fmt.Errorf("event %s: its text is at %d+%d, outside its %d-byte body", ev.ID, off, n, len(ev.Body))
	}
	if err := json.Unmarshal(ev.Body[off:off+n], &ev.Text); err != nil {
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
// text is stored as itself.
func textIn(body json.RawMessage, text string) *[2]int {
	if len(text) < minTextRef || len(body) < len(text) {
		return nil
	}
	var lit bytes.Buffer
	enc := json.NewEncoder(&lit)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(text); err != nil {
		return nil
	}
	want := bytes.TrimSuffix(lit.Bytes(), []byte("\n"))
	off := bytes.Index(body, want)
	if off < 0 {
		return nil
	}
	var got string
	if json.Unmarshal(body[off:off+len(want)], &got) != nil || got != text {
		return nil
	}
	return &[2]int{off, len(want)}
}
