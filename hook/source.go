package hook

import (
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
)

const (
	headerPrefix = "header:"
	mailPrefix   = "mailheader:"
)

// ref is a parsed field source.
type ref struct {
	isHeader bool
	header   string   // canonical header name when isHeader
	tokens   []string // unescaped pointer tokens otherwise; none means the whole document
	// mail, when set, is the canonical name of an email header read from the
	// RFC 5322 header block found at tokens (mailheader:Message-ID@/headers).
	mail string
}

// bind replaces the k-th "*" token with at[k], the index of the batch item
// being read; tokens past len(at) stay "*", which names no array element.
// It writes r.tokens in place: parseSource makes them afresh for each ref.
func (r *ref) bind(at []int) {
	k := 0
	for i, t := range r.tokens {
		if t == "*" && k < len(at) {
			r.tokens[i] = strconv.Itoa(at[k])
			k++
		}
	}
}

// ValidateSource reports whether source is "" (not read), an RFC 6901 JSON
// pointer (with the array selectors [path=value] and, in a batch, *),
// header:Name or mailheader:Name@/pointer. The config package calls it, so
// that a typo stops the server at start, by the very rules the webhooks
// read fields with.
func ValidateSource(source string) error {
	_, err := parseSource(source)
	return err
}

// HeaderSource returns the canonical name of the request header that source
// reads, and false when source is not a valid header:Name, so that config can
// check a header against what the channel's signature covers.
func HeaderSource(source string) (string, bool) {
	r, err := parseSource(source)
	if err != nil || !r.isHeader {
		return "", false
	}
	return r.header, true
}

func parseSource(source string) (ref, error) {
	if rest, ok := strings.CutPrefix(source, mailPrefix); ok {
		name, ptr, ok := strings.Cut(rest, "@")
		bad := fmt.Errorf("%q does not name an email header inside a field (use mailheader:Name@/field, e.g. mailheader:Message-ID@/headers)", source)
		if !ok || name == "" || ptr == "" || ptr[0] != '/' {
			return ref{}, bad
		}
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return ref{}, bad
			}
		}
		r, err := parseSource(ptr)
		if err != nil {
			return ref{}, fmt.Errorf("%q: %v", source, err)
		}
		r.mail = textproto.CanonicalMIMEHeaderKey(name)
		return r, nil
	}
	if name, ok := strings.CutPrefix(source, headerPrefix); ok {
		notHeader := fmt.Errorf("%q does not name a request header (use header:Name, e.g. header:X-Request-Id)", source)
		if name == "" {
			return ref{}, notHeader
		}
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return ref{}, notHeader
			}
		}
		return ref{isHeader: true, header: textproto.CanonicalMIMEHeaderKey(name)}, nil
	}
	if source == "" {
		return ref{}, nil
	}
	if source[0] != '/' {
		return ref{}, fmt.Errorf("%q is not a JSON pointer (it must start with \"/\") or header:Name", source)
	}
	parts := strings.Split(source[1:], "/")
	for i, p := range parts {
		t, err := unescapeToken(p)
		if err != nil {
			return ref{}, fmt.Errorf("%q is not a valid JSON pointer: %v", source, err)
		}
		if strings.HasPrefix(t, "[") {
			if _, ok := parseSelector(t); !ok {
				return ref{}, fmt.Errorf("%q: %q is not an array selector (use [path=value], e.g. [field.ref=email])", source, t)
			}
		}
		parts[i] = t
	}
	return ref{tokens: parts}, nil
}

// unescapeToken decodes ~1 before ~0, as RFC 6901 requires, so that "~01"
// means the key "~1" and not "/".
func unescapeToken(tok string) (string, error) {
	if !strings.Contains(tok, "~") {
		return tok, nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '~' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(tok) || tok[i+1] != '0' && tok[i+1] != '1' {
			return "", fmt.Errorf(`"~" must be followed by 0 or 1 (~0 is "~", ~1 is "/")`)
		}
		if tok[i+1] == '0' {
			b.WriteByte('~')
		} else {
			b.WriteByte('/')
		}
		i++
	}
	return b.String(), nil
}

// isTokenChar reports whether c may appear in an HTTP field name (RFC 9110 tchar).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
