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

// MessageID composes the provider message id from sources, joined with ':' so
// that providers whose ids are only unique per tenant still get one dedup key.
func MessageID(p *Payload, sources []string) (string, error) {
	if len(sources) == 0 {
		// A configuration mistake, not the client's: not an *Error.
		return "", errors.New("hook: no message id source configured")
	}
	parts := make([]string, 0, len(sources))
	n := len(sources) - 1 // the separators
	for _, src := range sources {
		v, res, err := p.resolve(src)
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
		}
		n += len(v)
		if n > MaxIDLen {
			return "", badRequest("the message id is longer than %d bytes", MaxIDLen)
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, ":"), nil
}
