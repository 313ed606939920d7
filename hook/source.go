package hook

import (
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
)

const (
	headerPrefix      = "header:"
	mailPrefix        = "mailheader:"
	mailAddressPrefix = "mailaddress:"
	mailNamePrefix    = "mailname:"
	// orSeparator joins alternatives: "/a | /b" reads /a, or /b when /a
	// is absent or empty. A JSON pointer cannot name a key holding " | ".
	orSeparator = " | "
)

// ref is a parsed field source.
type ref struct {
	isHeader bool
	header   string   // canonical header name when isHeader
	tokens   []string // unescaped pointer tokens otherwise; none means the whole document
	// mail, when set, is the canonical name of an email header read from the
	// RFC 5322 header block found at tokens (mailheader:Message-ID@/headers).
	mail string
	// address, when set, reads the value found as an RFC 5322 address
	// (net/mail): "address" keeps its address, "name" its display name
	// (mailaddress:/from, mailname:/from).
	address string
	// or, when set, are the alternatives of "/a | /b", tried in order: the
	// first that finds a non-empty value gives it. The ref has nothing else.
	or []ref
}

// bind replaces the k-th "*" token with at[k], the index of the batch item
// being read; tokens past len(at) stay "*", which names no array element.
// It writes r.tokens in place: parseSource makes them afresh for each ref.
func (r *ref) bind(at []int) {
	for i := range r.or {
		r.or[i].bind(at)
	}
	k := 0
	for i, t := range r.tokens {
		if t == "*" && k < len(at) {
			r.tokens[i] = strconv.Itoa(at[k])
			k++
		}
	}
}

// ValidateSource reports whether source is "" (not read), an RFC 6901 JSON
// pointer (with the array selectors [path=value] and [path=@/pointer], and,
// in a batch, *), header:Name, mailheader:Name@/pointer,
// mailaddress:<source> or mailname:<source>, or alternatives of these
// joined by " | ". The config package calls it, so that a typo stops the
// server at start, by the very rules the webhooks read fields with.
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

// addressPrefixes are the address sources' prefixes and the part of the
// address each keeps.
var addressPrefixes = [][2]string{{mailAddressPrefix, "address"}, {mailNamePrefix, "name"}}

func parseSource(source string) (ref, error) {
	if strings.Contains(source, orSeparator) {
		var r ref
		for _, alt := range strings.Split(source, orSeparator) {
			if alt == "" {
				return ref{}, fmt.Errorf("%q has an empty alternative (write \"/a | /b\")", source)
			}
			a, err := parseSource(alt)
			if err != nil {
				return ref{}, err
			}
			if a.isHeader {
				// config checks a header source against what the signature
				// covers (HeaderSource), one header per source.
				return ref{}, fmt.Errorf("%q: a request header cannot be an alternative; read it on its own (header:Name)", source)
			}
			r.or = append(r.or, a)
		}
		return r, nil
	}
	for _, ap := range addressPrefixes {
		prefix, part := ap[0], ap[1]
		if rest, ok := strings.CutPrefix(source, prefix); ok {
			if rest == "" {
				return ref{}, fmt.Errorf("%q names no field to read an email address from (e.g. %s/from)", source, prefix)
			}
			r, err := parseSource(rest)
			if err != nil {
				return ref{}, fmt.Errorf("%q: %v", source, err)
			}
			if r.address != "" {
				return ref{}, fmt.Errorf("%q reads an address twice", source)
			}
			r.address = part
			return r, nil
		}
	}
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
	parts := joinItemSelectors(strings.Split(source[1:], "/"))
	for i, p := range parts {
		if path, inner, ok := itemSelector(p); ok {
			// [path=@/pointer]: kept as written, the pointer read per item.
			if _, err := parseSource(inner); err != nil || strings.HasPrefix(inner, "@") {
				return ref{}, fmt.Errorf("%q: %q does not compare with a JSON pointer (use [path=@/pointer], e.g. [wa_id=@/messages/*/from])", source, p)
			}
			if _, ok := parseSelector("[" + path + "=x]"); !ok {
				return ref{}, fmt.Errorf("%q: %q is not an array selector (use [path=value], e.g. [field.ref=email])", source, p)
			}
			continue
		}
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

// joinItemSelectors puts back together a selector whose value is a JSON
// pointer ([wa_id=@/entry/*/changes/*/value/messages/*/from]), which
// splitting the source at "/" cut apart. A token opening "[…=@" is glued
// to the tokens after it up to the one that ends with "]"; without one,
// the tokens stay as they were (and are refused as a selector).
func joinItemSelectors(parts []string) []string {
	var out []string
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if _, v, ok := strings.Cut(p, "="); ok && strings.HasPrefix(p, "[") && v == "@" {
			for j := i + 1; j < len(parts); j++ {
				if strings.HasSuffix(parts[j], "]") {
					p = strings.Join(parts[i:j+1], "/")
					i = j
					break
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// itemSelector reads a token [path=@/pointer]: the path and the pointer
// whose value, read for the same batch item, the path's value must equal.
func itemSelector(tok string) (path, pointer string, ok bool) {
	if len(tok) < 2 || tok[0] != '[' || tok[len(tok)-1] != ']' {
		return "", "", false
	}
	path, v, ok := strings.Cut(tok[1:len(tok)-1], "=")
	if !ok || !strings.HasPrefix(v, "@/") {
		return "", "", false
	}
	return path, v[1:], true
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
