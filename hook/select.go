package hook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"strings"
)

// selector is an array token [path=value]: it picks the first element of an
// array whose property at path (dot-separated keys) is the string or number
// value. Typeform's answers move when an optional question is skipped, so
// /form_response/answers/[field.ref=email]/email survives where
// /form_response/answers/2/email reads the wrong answer.
type selector struct {
	path  []string
	value string
}

// parseSelector reads a token of the form [path=value]: path is one or more
// keys separated by '.', none empty; value is everything after the first
// '=' up to the closing ']', and may be empty. A token in brackets is always
// a selector, so that no key can be mistaken for one.
func parseSelector(tok string) (selector, bool) {
	if len(tok) < 2 || tok[0] != '[' || tok[len(tok)-1] != ']' {
		return selector{}, false
	}
	path, value, ok := strings.Cut(tok[1:len(tok)-1], "=")
	if !ok || path == "" {
		return selector{}, false
	}
	keys := strings.Split(path, ".")
	for _, k := range keys {
		if k == "" {
			return selector{}, false
		}
	}
	return selector{path: keys, value: value}, true
}

func (s selector) pick(arr []any) (any, bool) {
	for _, el := range arr {
		if v, res := lookupJSON(el, s.path); res == found && v == strings.TrimSpace(s.value) {
			return el, true
		}
	}
	return nil, false
}

// MaxItems bounds the messages and notifications one request may carry.
const MaxItems = 1000

// Items returns the index tuples of every element pattern reaches: each "*"
// token walks every element of the array found there, in order, and the
// tuple holds one index per "*" (see FieldAt). A pattern that finds no
// array returns none. An empty pattern is the whole body: one item, nil.
func (p *Payload) Items(pattern string) ([][]int, error) {
	if pattern == "" {
		return [][]int{nil}, nil
	}
	r, err := parseSource(pattern)
	if err != nil {
		return nil, err
	}
	if p.isForm || r.isHeader || r.mail != "" || r.address != "" || len(r.or) > 0 {
		return nil, nil
	}
	var out [][]int
	var walk func(cur any, toks []string, at []int) error
	walk = func(cur any, toks []string, at []int) error {
		for i, tok := range toks {
			if tok != "*" {
				next, ok := walkJSON(cur, []string{tok})
				if !ok {
					return nil
				}
				cur = next
				continue
			}
			arr, ok := cur.([]any)
			if !ok {
				return nil
			}
			for j, el := range arr {
				if err := walk(el, toks[i+1:], append(append([]int(nil), at...), j)); err != nil {
					return err
				}
			}
			return nil
		}
		if cur == nil {
			return nil
		}
		if len(out) == MaxItems {
			return badRequest("the body holds more than %d items", MaxItems)
		}
		out = append(out, at)
		return nil
	}
	if err := walk(p.doc, r.tokens, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// mailHeader reads the header name from block, an RFC 5322 header block
// (SendGrid's "headers" field), a whole message whose header ends at the
// first blank line, or a JSON list of [name, value] pairs (Mailgun's
// "message-headers"); the first header of that name wins, in any case.
func mailHeader(block, name string) (string, lookup) {
	if b := strings.TrimSpace(block); strings.HasPrefix(b, "[") {
		var pairs [][]any
		if err := json.Unmarshal([]byte(b), &pairs); err != nil {
			return "", absent
		}
		for _, kv := range pairs {
			if len(kv) != 2 {
				continue
			}
			key, okK := kv[0].(string)
			val, okV := kv[1].(string)
			if okK && okV && strings.EqualFold(strings.TrimSpace(key), name) {
				return strings.TrimSpace(val), found
			}
		}
		return "", absent
	}
	rd := textproto.NewReader(bufio.NewReader(strings.NewReader(block + "\r\n\r\n")))
	h, err := rd.ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return "", absent
	}
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", absent
	}
	return strings.TrimSpace(vs[0]), found
}

// Attachment is what is kept of a file in a multipart body: never its bytes.
type Attachment struct {
	Field       string `json:"field"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int64  `json:"size"`
}

// maxParts bounds the parts of a multipart body, whatever their size.
const maxParts = 1000

// parseMultipart reads a multipart/form-data body: fields as form fields,
// files as attachments whose bytes are counted and dropped.
func (p *Payload) parseMultipart(contentType string, body []byte) error {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return badRequest("the body is not valid multipart/form-data: the Content-Type header names no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	p.isForm, p.isMultipart, p.form = true, true, url.Values{}
	for n := 0; ; n++ {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badRequest("the body is not valid multipart/form-data: %v", err)
		}
		if n == maxParts {
			return badRequest("the body has more than %d multipart parts", maxParts)
		}
		name := part.FormName()
		if file := part.FileName(); file != "" {
			size, err := io.Copy(io.Discard, part)
			if err != nil {
				return badRequest("the body is not valid multipart/form-data: %v", err)
			}
			p.attachments = append(p.attachments, Attachment{Field: name, Filename: file, ContentType: part.Header.Get("Content-Type"), Size: size})
			continue
		}
		v, err := io.ReadAll(part)
		if err != nil {
			return badRequest("the body is not valid multipart/form-data: %v", err)
		}
		if name != "" {
			p.form.Add(name, string(v))
		}
	}
}

// Attachments lists the files of a multipart body.
func (p *Payload) Attachments() []Attachment { return p.attachments }

// Stored returns what to keep of body: a multipart body becomes one JSON
// document of its fields and its attachments' names, types and sizes, so no
// file is ever stored; any other body is kept as received (json false for
// a form).
func (p *Payload) Stored(body []byte) (kept []byte, isJSON bool, err error) {
	if !p.isMultipart {
		return body, p.IsJSON(), nil
	}
	attachments := p.attachments
	if attachments == nil {
		attachments = []Attachment{}
	}
	kept, err = json.Marshal(struct {
		Fields      url.Values   `json:"fields"`
		Attachments []Attachment `json:"attachments"`
	}{p.form, attachments})
	if err != nil {
		return nil, false, err
	}
	return kept, true, nil
}
