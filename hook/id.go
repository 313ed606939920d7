package hook

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen is the longest provider message id accepted, in bytes, so that an
// event key stays a reasonable database key and URL segment.
const MaxIDLen = 256

// partEscaper escapes the separator, and the escape character itself, inside
// one part of a composite id. A single pass, so "%3A" in a part becomes
// "%253A" and never reads back as ':'.
var partEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// CheckKeyField refuses a value that names a lead, the contact or the
// conversation id (read from source), holding control characters: CR, LF
// or NUL in it would split a log line or an email header built from it,
// or cut a key short, as for the message id. An empty value passes.
func CheckKeyField(field, source, v string) error {
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return badRequest("the %s field %s contains control characters", field, source)
	}
	return nil
}

// MessageID composes the provider message id from sources. One source gives
// its value unchanged. Several, for providers whose ids are only unique per
// tenant, are joined with ':' after escaping each part ('%' as %25, ':' as
// %3A), so that no two different lists of parts give one id: ("acme:eu", "42")
// and ("acme", "eu:42") would otherwise both be "acme:eu:42", and the second
// message would be answered as a duplicate of the first and lost. MaxIDLen
// applies to the composed id.
func MessageID(p *Payload, sources []string) (string, error) {
	return MessageIDAt(p, sources, nil)
}

// MessageIDAt is MessageID for one item of a batch (see Payload.FieldAt).
func MessageIDAt(p *Payload, sources []string, at []int) (string, error) {
	if len(sources) == 0 {
		// A configuration mistake, not the client's: not an *Error.
		return "", errors.New("hook: no message id source configured")
	}
	composite := len(sources) > 1
	var id strings.Builder
	for i, src := range sources {
		v, res, err := p.resolveAt(src, at)
		if err != nil {
			return "", err
		}
		switch {
		case res == absent:
			return "", badRequest("the message id field %s is missing", src)
		case res == notScalar:
			return "", badRequest("the message id field %s is not a string or number", src)
		case v == "":
			return "", badRequest("the message id field %s is empty", src)
		case !utf8.ValidString(v):
			// The id ends up in JSON responses and URLs, where invalid UTF-8
			// would be rewritten and no longer name the stored event.
			return "", badRequest("the message id field %s is not valid UTF-8", src)
		case strings.IndexFunc(v, unicode.IsControl) >= 0:
			return "", badRequest("the message id field %s contains control characters", src)
		case p.replacedSurrogate(src, at, v):
			return "", badRequest(`the message id field %s holds an escaped lone UTF-16 surrogate (\ud800 to \udfff without its pair), which is not a character`, src)
		}
		if i > 0 {
			id.WriteByte(':')
		}
		if composite {
			v = partEscaper.Replace(v)
		}
		id.WriteString(v)
		if id.Len() > MaxIDLen {
			if composite {
				return "", badRequest("the message id is longer than %d bytes once its parts are joined with ':' (with ':' and '%%' inside a part written as %%3A and %%25)", MaxIDLen)
			}
			return "", badRequest("the message id is longer than %d bytes", MaxIDLen)
		}
	}
	return id.String(), nil
}
