package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/hook"
)

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validName reports whether s is a channel or provider name: [a-z0-9-]+,
// short enough to sit in event keys and URLs.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validEnvName reports whether s can name an environment variable.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// checkHTTPURL returns why s is not an absolute http or https URL, or nil.
// The message repeats s with any password blanked out.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%q is not a URL: %v", redactURL(s), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL (e.g. https://example.com/path)", redactURL(s))
	}
	return nil
}

// checkAddr returns why s is not a host:port listen address, or nil.
func checkAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("%q is not a host:port address (e.g. 127.0.0.1:8080 or :8080)", s)
	}
	return nil
}

// redactURL blanks out what in a URL may be a secret: the password of its
// user info, every query value, the fragment, and every path segment that
// does not read as a plain word (Slack, Discord and Telegram webhooks carry
// their token in the path). The {ref} placeholder stays. It works on the
// text so that it also cleans URLs that do not parse.
// RedactURL is s as it may be shown: its password, query values, fragment
// and any path segment that looks like a secret replaced.
func RedactURL(s string) string { return redactURL(s) }

func redactURL(s string) string {
	scheme := strings.Index(s, "://")
	if scheme < 0 {
		return s
	}
	head, rest := s[:scheme+3], s[scheme+3:]
	var frag string
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest, frag = rest[:i], "#"+redactedValue
	}
	var query string
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], "?"+redactQuery(rest[i+1:])
	}
	auth, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		auth, path = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		if colon := strings.Index(auth[:at], ":"); colon >= 0 {
			auth = auth[:colon+1] + redactedValue + auth[at:]
		}
	}
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if !plainSegment(seg) {
			segs[i] = redactedValue
		}
	}
	return head + auth + strings.Join(segs, "/") + query + frag
}

// redactQuery keeps a query's names and blanks its values.
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		name, value, hasValue := strings.Cut(p, "=")
		switch {
		case !hasValue && !plainSegment(name):
			parts[i] = redactedValue
		case hasValue && value != "" && value != "{ref}":
			parts[i] = name + "=" + redactedValue
		}
	}
	return strings.Join(parts, "&")
}

// plainSegment reports whether a path segment reads as a word (messages,
// v1, sendMessage) rather than as an id or a token: at most 20 characters,
// letters and -._~ with at most two capitals and two digits at the end.
func plainSegment(seg string) bool {
	if seg == "" || seg == "{ref}" {
		return true
	}
	if len(seg) > 20 {
		return false
	}
	digits, upper := 0, 0
	for _, c := range seg {
		switch {
		case '0' <= c && c <= '9':
			digits++
			continue
		case 'A' <= c && c <= 'Z':
			upper++
		case 'a' <= c && c <= 'z', strings.ContainsRune("-._~", c):
		default:
			return false
		}
		if digits > 0 {
			return false // a letter after a digit: an id
		}
	}
	return digits <= 2 && upper <= 2 && digits < len(seg)
}

// signedFields refuses, on a signed channel, every field read from a request
// header that the signature does not cover: whoever replays a captured
// request could change such a header at will, and with it the dedup key or
// the contact a reply goes to. Unsigned channels may read any header (they
// are warned about already). fields is the channel's fields node, walked for
// the line of each source; its values were decoded and reported by fields.
func (d *decoder) signedFields(path string, ch Channel, fields *yaml.Node) {
	fields = resolve(fields)
	if ch.Signature == nil || fields == nil || fields.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(fields.Content); i += 2 {
		key, v := resolve(fields.Content[i]).Value, resolve(fields.Content[i+1])
		switch key {
		case "message_id", "conversation_id", "contact", "name", "text", "subject":
		default:
			continue // an unknown key, reported as such
		}
		p := joinPath(joinPath(path, "fields"), key)
		if v.Kind == yaml.SequenceNode {
			for j, item := range v.Content {
				d.signedSource(indexPath(p, j), resolve(item), ch.Signature.Scheme)
			}
			continue
		}
		d.signedSource(p, v, ch.Signature.Scheme)
	}
}

func (d *decoder) signedSource(path string, n *yaml.Node, scheme string) {
	if n.Kind != yaml.ScalarNode {
		return
	}
	if err := unsignedHeader(scheme, n.Value); err != nil {
		d.fail(path, n, "%v", err)
	}
}

// unsignedHeader returns why a channel signed by scheme must not read source,
// or nil when source is not a header or is one the scheme signs.
func unsignedHeader(scheme, source string) error {
	name, ok := hook.HeaderSource(source)
	if !ok || hook.SignsHeader(scheme, name) {
		return nil
	}
	switch scheme {
	case hook.SchemeHMACSHA256:
		return fmt.Errorf("%s is not covered by the hmac-sha256 signature, which signs only the body; read it from the body or use standard-webhooks", source)
	case hook.SchemeStandardWebhooks:
		return fmt.Errorf("%s is not covered by the standard-webhooks signature, which signs only the body and the webhook-id and webhook-timestamp headers; read it from the body or from one of those headers", source)
	case hook.SchemeSlack:
		return fmt.Errorf("%s is not covered by the slack signature, which signs only the body and X-Slack-Request-Timestamp; read it from the body", source)
	}
	return fmt.Errorf("%s is not covered by the %s signature, which signs no header; read it from the body", source, scheme)
}
