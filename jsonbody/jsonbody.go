// Package jsonbody carries one fact from the parser of a webhook's body to
// the store: these bytes were decoded as exactly one JSON value. The store
// refuses to keep a body as JSON unless it is valid JSON (Event.Body), and
// checks it with json.Valid, a third scan of a body hook had already decoded
// (and scanned again for lone surrogates). A Valid is made only by Decode,
// here, after the decode succeeded, so the store can skip its own check for
// a body that comes with one and still never keeps one that was not checked:
// every other way in (fixtures, leads.RecordEvent, a rewrite of a stored
// event) has no Valid to give and is checked as before.
//
// A leaf: it imports nothing of handoff, so hook and store can both import it.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Valid is a body Decode decoded as exactly one JSON value (whitespace
// around it allowed), the bytes themselves, not a copy: whoever holds one
// must not change them. The zero Valid proves nothing.
type Valid struct{ b []byte }

// Bytes is the body decoded; nil for the zero Valid.
func (v Valid) Bytes() []byte { return v.b }

// Of reports whether v was made from the very bytes b (the same memory,
// the same length): a proof for one slice says nothing about another, even
// one equal to it today.
func (v Valid) Of(b []byte) bool {
	return v.b != nil && len(v.b) == len(b) && (len(b) == 0 || &v.b[0] == &b[0])
}

// ErrTrailing is Decode's error for data after the top-level value: a
// sender who framed the body wrongly, whose second value would otherwise
// be dropped silently.
var ErrTrailing = errors.New("there is data after the top-level value")

// Decode decodes body as exactly one JSON value, numbers kept as
// json.Number, and returns it with the proof that body is that value. Its
// errors are encoding/json's (io.ErrUnexpectedEOF for a body that ends too
// early) or ErrTrailing. It does not check UTF-8 (encoding/json turns an
// invalid byte into U+FFFD, and json.Valid accepts it too); a caller that
// refuses invalid UTF-8 checks before.
func Decode(body []byte) (any, Valid, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, Valid{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Valid{}, ErrTrailing
	}
	return doc, Valid{b: body}, nil
}
