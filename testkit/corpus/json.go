package corpus

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The templates are ordered trees, so that every layout writes the keys in
// the provider's order, as a real sender does; encoding/json would sort a
// map's keys and has one layout only.
type (
	obj   []field // a JSON object, keys in order
	field struct {
		k string
		v any // string, num, bool, nil, obj or arr
	}
	arr []any
	num string // a number literal, written as it is
)

// escaping is how a sender writes a string's characters.
type escaping int

const (
	escMinimal escaping = iota // JavaScript's JSON.stringify: only '"', '\\' and control characters
	escHTML                    // Go's encoding/json: also <, >, & as \u003c…, and U+2028/U+2029
	escASCII                   // Python's json.dumps (ensure_ascii): every non-ASCII character as \uXXXX, surrogate pairs
	escPHP                     // PHP's json_encode: \uXXXX as Python, and "/" as "\/"
)

// style is one layout of a JSON document.
type style struct {
	indent       string // "" writes it on one line
	newline      string // between lines when indented
	comma, colon string // the separators on one line ("," ":" or ", " ": ")
	esc          escaping
	trailer      string // after the document (a newline some senders end with)
}

func (s style) encode(v any) []byte {
	var b strings.Builder
	s.value(&b, v, 0)
	b.WriteString(s.trailer)
	return []byte(b.String())
}

func (s style) value(b *strings.Builder, v any, depth int) {
	switch v := v.(type) {
	case string:
		s.str(b, v)
	case num:
		b.WriteString(string(v))
	case bool:
		fmt.Fprint(b, v)
	case nil:
		b.WriteString("null")
	case obj:
		if len(v) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, f := range v {
			s.sep(b, i, depth+1)
			s.str(b, f.k)
			if s.indent != "" {
				b.WriteString(": ")
			} else {
				b.WriteString(s.colon)
			}
			s.value(b, f.v, depth+1)
		}
		s.close(b, depth)
		b.WriteByte('}')
	case arr:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, x := range v {
			s.sep(b, i, depth+1)
			s.value(b, x, depth+1)
		}
		s.close(b, depth)
		b.WriteByte(']')
	default:
		panic(fmt.Sprintf("corpus: a template holds a %T", v))
	}
}

// sep writes what comes before item i of a container at depth.
func (s style) sep(b *strings.Builder, i, depth int) {
	if i > 0 {
		if s.indent != "" {
			b.WriteByte(',')
		} else {
			b.WriteString(s.comma)
		}
	}
	if s.indent != "" {
		b.WriteString(s.newline)
		b.WriteString(strings.Repeat(s.indent, depth))
	}
}

func (s style) close(b *strings.Builder, depth int) {
	if s.indent != "" {
		b.WriteString(s.newline)
		b.WriteString(strings.Repeat(s.indent, depth))
	}
}

func (s style) str(b *strings.Builder, v string) {
	b.WriteByte('"')
	for _, r := range v {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == '/' && s.esc == escPHP:
			b.WriteString(`\/`)
		case (r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029') && s.esc == escHTML:
			fmt.Fprintf(b, `\u%04x`, r)
		case r >= utf8.RuneSelf && (s.esc == escASCII || s.esc == escPHP):
			if r > 0xFFFF {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
