// Package hook holds the pure parts of an inbound webhook: reading the body
// (JSON, form-encoded or multipart), picking fields and batch items out of
// it, composing the provider message id, checking signatures (every scheme
// here, Standard Webhooks through package webhook) and the presets that
// bundle them per provider.
// It knows nothing of HTTP routing or storage, so every rule the dedup key
// depends on can be tested, and fuzzed, on its own.
package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/handoff/handoff/jsonbody"
)

// Error is a client error: the handler answers with Status and Msg as the body,
// and stores nothing.
type Error struct {
	Status int
	Msg    string
}

// Error returns the sentence alone, because it goes to the client verbatim.
func (e *Error) Error() string { return e.Msg }

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

func unauthorized(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Msg: fmt.Sprintf(format, args...)}
}

// Payload is one parsed inbound request body plus its headers, so that every
// configured field source, body or header, is read the same way.
type Payload struct {
	isForm      bool
	isMultipart bool       // the form came as multipart/form-data
	doc         any        // decoded JSON document when !isForm
	form        url.Values // form fields when isForm
	attachments []Attachment
	header      http.Header
	// marked is the JSON body decoded again with each escaped lone surrogate
	// written as \u0000 instead of the U+FFFD that encoding/json puts there,
	// or nil when the body escapes none: a field that reads differently in
	// doc and marked was built from such an escape.
	marked any
	// valid is the proof that the body decoded into doc is one JSON value
	// (zero for a form): the store need not scan it again (see Valid).
	valid jsonbody.Valid
}

// Parse reads body according to contentType; a missing or text/plain content
// type is sniffed as JSON because many senders forget to set it.
func Parse(contentType string, body []byte, header http.Header) (*Payload, error) {
	mt, err := mediaType(contentType)
	if err != nil {
		return nil, err
	}
	p := &Payload{header: header.Clone()}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"),
		(mt == "" || mt == "text/plain") && looksLikeJSON(body):
		doc, valid, err := decodeJSON(body)
		if err != nil {
			return nil, err
		}
		p.doc, p.valid = doc, valid
		if m := markLoneSurrogates(body); m != nil {
			if p.marked, _, err = decodeJSON(m); err != nil {
				// Only escapes changed, digit for digit: it cannot fail.
				return nil, fmt.Errorf("hook: re-decode a body with lone surrogates: %w", err)
			}
		}
	case mt == "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, badRequest("the body is not valid form data: %v", err)
		}
		p.isForm = true
		p.form = form
	case mt == "multipart/form-data":
		if err := p.parseMultipart(contentType, body); err != nil {
			return nil, err
		}
	default:
		return nil, badRequest("the body is neither JSON, form-encoded nor multipart/form-data")
	}
	return p, nil
}

// mediaType returns the lowercased media type without parameters; a bad
// parameter is tolerated because only the type decides how the body is read.
func mediaType(contentType string) (string, error) {
	if strings.TrimSpace(contentType) == "" {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		return "", badRequest("the body is neither JSON, form-encoded nor multipart/form-data: the Content-Type header is not a valid media type")
	}
	return mt, nil
}

func looksLikeJSON(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// decodeJSON keeps numbers as json.Number so that a 20-digit id is not
// rounded through float64 into a different, colliding dedup key. It refuses
// invalid UTF-8, which RFC 8259 forbids in JSON and encoding/json would
// quietly turn into U+FFFD, so that "u-\xff" and "u-\xfe" would become one id.
// The decode is jsonbody.Decode's, which also gives the proof that body is
// one JSON value (Payload.Valid): a second value after the first means the
// sender framed the body wrongly, and taking only the first would silently
// drop data.
func decodeJSON(body []byte) (any, jsonbody.Valid, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, jsonbody.Valid{}, badRequest("the body is empty")
	}
	if !utf8.Valid(body) {
		return nil, jsonbody.Valid{}, badRequest("the body is not valid JSON: it is not valid UTF-8, which JSON requires (RFC 8259)")
	}
	doc, valid, err := jsonbody.Decode(body)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, jsonbody.Valid{}, badRequest("the body is not valid JSON: it ends too early")
	case errors.Is(err, jsonbody.ErrTrailing):
		return nil, jsonbody.Valid{}, badRequest("the body is not valid JSON: there is data after the top-level value")
	case err != nil:
		return nil, jsonbody.Valid{}, badRequest("the body is not valid JSON: %v", err)
	}
	return doc, valid, nil
}

// Valid is the proof that the body Parse read is one JSON value, for the
// store to keep it as JSON without scanning it again (jsonbody); the zero
// Valid for a form or multipart body, whose stored form is not the body.
func (p *Payload) Valid() jsonbody.Valid { return p.valid }

// markLoneSurrogates returns a copy of body with each \u escape of a lone
// UTF-16 surrogate rewritten as \u0000, or nil when there is none. It follows
// encoding/json: a high surrogate is paired only with a low one escaped right
// after it. body must be one valid JSON value, as decodeJSON checks.
func markLoneSurrogates(body []byte) []byte {
	if !mayEscapeSurrogate(body) {
		return nil // most bodies: no byte-by-byte walk
	}
	var out []byte
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			if i+6 > len(body) || body[i+1] != 'u' {
				i++ // a one-character escape such as \" or \\
				continue
			}
			r := hex4(body[i+2 : i+6])
			if !utf16.IsSurrogate(r) {
				i += 5
				continue
			}
			if r < 0xdc00 && i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
				if lo := hex4(body[i+8 : i+12]); 0xdc00 <= lo && lo <= 0xdfff {
					i += 11 // a pair: one character
					continue
				}
			}
			if out == nil {
				out = bytes.Clone(body)
			}
			copy(out[i+2:i+6], "0000")
			i += 5
		}
	}
	return out
}

// mayEscapeSurrogate reports whether body holds \ud or \uD anywhere:
// every escape of a surrogate (U+D800–U+DFFF) starts so, so a body without
// one escapes none, and markLoneSurrogates need not walk it.
func mayEscapeSurrogate(body []byte) bool {
	for {
		i := bytes.Index(body, []byte(`\u`))
		if i < 0 || i+2 >= len(body) {
			return false
		}
		if c := body[i+2]; c == 'd' || c == 'D' {
			return true
		}
		body = body[i+2:]
	}
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}

// replacedSurrogate reports whether v, the value found at source, reads
// differently once lone surrogate escapes are kept apart from U+FFFD: then
// two different ids would both have become v.
func (p *Payload) replacedSurrogate(source string, at []int, v string) bool {
	if p.marked == nil {
		return false
	}
	mv, res, err := p.resolveIn(p.marked, source, at)
	return err == nil && (res != found || mv != v)
}

// lookup is the outcome of resolving one source against a payload.
type lookup int

const (
	absent lookup = iota
	found
	notScalar
)

// IsJSON reports whether the body was JSON (else it was a form).
func (p *Payload) IsJSON() bool { return !p.isForm }

// Present reports whether source finds anything, a string, a number, an
// object or an array; null and a missing key are not present. It decides
// whether an item is a message or a notification.
func (p *Payload) Present(source string, at []int) bool {
	_, res, err := p.resolveAt(source, at)
	return err == nil && res != absent
}

// Field returns the value at source with surrounding space trimmed; ok is
// false when it is absent. A JSON null counts as absent because senders use
// it interchangeably with leaving the key out; a value that is not a string
// or number is an *Error.
func (p *Payload) Field(source string) (value string, ok bool, err error) {
	return p.FieldAt(source, nil)
}

// FieldAt is Field for one item of a batch: the k-th "*" token of source
// reads at[k], the item's index in the k-th array its pattern walks.
func (p *Payload) FieldAt(source string, at []int) (value string, ok bool, err error) {
	v, res, err := p.resolveAt(source, at)
	switch {
	case err != nil:
		return "", false, err
	case res == notScalar:
		return "", false, badRequest("field %s is not a string or number", source)
	case res == absent:
		return "", false, nil
	}
	return v, true, nil
}

// resolve returns an error only for a malformed source, which is a
// configuration mistake rather than the client's, so it is not an *Error.
func (p *Payload) resolve(source string) (string, lookup, error) {
	return p.resolveAt(source, nil)
}

func (p *Payload) resolveAt(source string, at []int) (string, lookup, error) {
	return p.resolveIn(p.doc, source, at)
}

// resolveIn is resolveAt with a JSON body read from doc: the body as
// decoded, or its marked copy (see Payload.marked).
func (p *Payload) resolveIn(doc any, source string, at []int) (string, lookup, error) {
	r, err := parseSource(source)
	if err != nil {
		return "", absent, err
	}
	r.bind(at)
	v, res := p.resolveRef(doc, r, at)
	return v, res, nil
}

// resolveRef reads one parsed, bound source. Alternatives give the first
// non-empty value found; failing that, the first found empty, else what
// the first present one found (an object is notScalar), else absent.
func (p *Payload) resolveRef(doc any, r ref, at []int) (string, lookup) {
	if len(r.or) > 0 {
		best, bestRes := "", absent
		for _, alt := range r.or {
			v, res := p.resolveRef(doc, alt, at)
			switch {
			case res == found && v != "":
				return v, found
			case res == found && bestRes != found, res == notScalar && bestRes == absent:
				best, bestRes = v, res
			}
		}
		return best, bestRes
	}
	if !p.isForm && !r.isHeader {
		var ok bool
		if r, ok = p.bindItemSelectors(doc, r, at); !ok {
			return "", absent
		}
	}
	v, res := p.lookup(r, doc)
	if r.mail != "" && res == found {
		v, res = mailHeader(v, r.mail)
	}
	if r.address != "" && res == found {
		v, res = mailAddress(v, r.address)
	}
	return v, res
}

// bindItemSelectors turns each [path=@/pointer] token of r into the
// selector [path=value], value read at the pointer for the same item;
// false when a pointer finds no string or number.
func (p *Payload) bindItemSelectors(doc any, r ref, at []int) (ref, bool) {
	copied := false
	for i, tok := range r.tokens {
		path, pointer, ok := itemSelector(tok)
		if !ok {
			continue
		}
		inner, err := parseSource(pointer)
		if err != nil {
			return r, false
		}
		inner.bind(at)
		v, res := lookupJSON(doc, inner.tokens)
		if res != found {
			return r, false
		}
		if !copied {
			r.tokens, copied = append([]string(nil), r.tokens...), true
		}
		r.tokens[i] = "[" + path + "=" + v + "]"
	}
	return r, true
}

// mailAddress reads v as one RFC 5322 address (net/mail: a display name
// quoted or not, RFC 2047 encoded words decoded): its address or its
// display name. A value that is not an address is absent.
func mailAddress(v, part string) (string, lookup) {
	a, err := mail.ParseAddress(v)
	if err != nil {
		return "", absent
	}
	if part == "name" {
		return strings.TrimSpace(a.Name), found
	}
	return a.Address, found
}

func (p *Payload) lookup(r ref, doc any) (string, lookup) {
	if r.isHeader {
		vs := p.header.Values(r.header)
		if len(vs) == 0 {
			return "", absent
		}
		return strings.TrimSpace(vs[0]), found
	}
	if p.isForm {
		return lookupForm(p.form, r.tokens)
	}
	return lookupJSON(doc, r.tokens)
}

// lookupForm treats a form as a flat object: the first value wins when a
// field repeats, as url.Values.Get does.
func lookupForm(form url.Values, tokens []string) (string, lookup) {
	switch len(tokens) {
	case 0:
		return "", notScalar
	case 1:
		vs, ok := form[tokens[0]]
		if !ok || len(vs) == 0 {
			return "", absent
		}
		return strings.TrimSpace(vs[0]), found
	}
	return "", absent
}

func lookupJSON(doc any, tokens []string) (string, lookup) {
	cur, ok := walkJSON(doc, tokens)
	if !ok {
		return "", absent
	}
	return scalar(cur)
}

// walkJSON follows tokens from doc: a key in an object; in an array, an
// RFC 6901 index or a [path=value] selector.
func walkJSON(doc any, tokens []string) (any, bool) {
	cur := doc
	for _, tok := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			if sel, ok := parseSelector(tok); ok {
				next, ok := sel.pick(v)
				if !ok {
					return nil, false
				}
				cur = next
				continue
			}
			i, ok := arrayIndex(tok, len(v))
			if !ok {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func scalar(cur any) (string, lookup) {
	switch v := cur.(type) {
	case nil:
		return "", absent
	case string:
		return strings.TrimSpace(v), found
	case json.Number:
		return v.String(), found
	}
	return "", notScalar
}

// arrayIndex follows RFC 6901: decimal digits without leading zeros; "-"
// (one past the end) and anything out of range find nothing.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i := 0
	for j := 0; j < len(tok); j++ {
		c := tok[j]
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
		if i >= n {
			return 0, false
		}
	}
	return i, true
}
