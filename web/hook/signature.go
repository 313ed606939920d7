package hook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Verifier checks one inbound request's signature; now is passed in so that
// tolerance checks are testable without a real clock.
type Verifier interface {
	Verify(header http.Header, body []byte, now time.Time) error
}

const whsecPrefix = "whsec_"

// DefaultTolerance is how far a Standard Webhooks timestamp may stray from
// the clock: the scheme's recommended five minutes. The config package uses
// it as the default of a channel's tolerance.
const DefaultTolerance = 5 * time.Minute

// standardWebhooks verifies https://www.standardwebhooks.com signatures.
type standardWebhooks struct {
	key       []byte
	tolerance time.Duration
}

// NewStandardWebhooks returns a Standard Webhooks verifier; a non-positive
// tolerance means the scheme's recommended five minutes.
func NewStandardWebhooks(secret string, tolerance time.Duration) (Verifier, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return nil, fmt.Errorf("hook: %w", err)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	return &standardWebhooks{key: key, tolerance: tolerance}, nil
}

// ValidateSecret returns why secret is not a Standard Webhooks secret
// (base64, padded or not, after an optional "whsec_" prefix), or nil. The
// config package calls it, so that a bad secret stops the server at start,
// by the very rule that signs and verifies with it.
func ValidateSecret(secret string) error {
	_, err := decodeSecret(secret)
	return err
}

// decodeSecret never quotes the secret in its errors: they end up in logs.
// The errors name no package, so that config can put them after a key.
func decodeSecret(secret string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimSpace(secret), whsecPrefix)
	if s == "" {
		return nil, errors.New(`the secret is empty after its "whsec_" prefix`)
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// Some dashboards show the secret without its padding.
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(key) == 0 {
		return nil, errors.New(`the secret is not a Standard Webhooks secret ("whsec_" followed by base64, or plain base64)`)
	}
	return key, nil
}

// Verify accepts the request when any v1 entry matches, because senders list
// signatures under the old and new secret while rotating it.
func (sw *standardWebhooks) Verify(header http.Header, body []byte, now time.Time) error {
	id := header.Get("webhook-id")
	if id == "" {
		return unauthorized("the webhook-id header is missing")
	}
	ts := header.Get("webhook-timestamp")
	if ts == "" {
		return unauthorized("the webhook-timestamp header is missing")
	}
	sigs := header.Values("webhook-signature")
	if len(sigs) == 0 {
		return unauthorized("the webhook-signature header is missing")
	}
	// Only the canonical decimal form is accepted, so the signed text is the
	// same whether a sender signs the header as sent or re-formats the number.
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(sec, 10) != ts {
		return unauthorized("the webhook-timestamp header is not a unix time")
	}
	// Checked before the signature so that a replayed old request is refused
	// even though its signature is genuine.
	if d := now.Sub(time.Unix(sec, 0)); d > sw.tolerance || d < -sw.tolerance {
		return unauthorized("the webhook timestamp is outside the %v tolerance", sw.tolerance)
	}
	want := standardMAC(sw.key, id, ts, body)
	sawV1 := false
	for _, h := range sigs {
		for _, entry := range strings.Fields(h) {
			sig, ok := strings.CutPrefix(entry, "v1,")
			if !ok {
				continue // other schemes (v1a, v2) are not ours to judge
			}
			sawV1 = true
			// Strict refuses non-canonical padding bits, so only the exact
			// string a signer produces is accepted.
			got, err := base64.StdEncoding.Strict().DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	if !sawV1 {
		return unauthorized("the webhook-signature header has no v1 signature")
	}
	return unauthorized("the signature does not match")
}

// StandardWebhooksSigns reports whether a Standard Webhooks signature covers
// the request header name (any case): the signed content is id.timestamp.body,
// so webhook-id and webhook-timestamp are, and webhook-signature itself is not.
func StandardWebhooksSigns(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Webhook-Id", "Webhook-Timestamp":
		return true
	}
	return false
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignStandardWebhooks returns the webhook-signature value for an outbound
// call; the caller must send webhook-timestamp as ts.Unix() in decimal.
func SignStandardWebhooks(secret string, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", fmt.Errorf("hook: %w", err)
	}
	mac := standardMAC(key, msgID, strconv.FormatInt(ts.Unix(), 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac), nil
}

// hmacSHA256 verifies a hex HMAC-SHA256 of the raw body in one header.
type hmacSHA256 struct {
	secret []byte
	header string
}

// NewHMACSHA256 returns a verifier for the common "hex HMAC of the body"
// scheme (GitHub and many form providers); it has no replay protection.
func NewHMACSHA256(secret []byte, header string) Verifier {
	return &hmacSHA256{secret: append([]byte(nil), secret...), header: http.CanonicalHeaderKey(header)}
}

// Verify ignores now: this scheme signs no timestamp.
func (h *hmacSHA256) Verify(header http.Header, body []byte, _ time.Time) error {
	v := strings.TrimSpace(header.Get(h.header))
	if v == "" {
		return unauthorized("the %s header is missing", h.header)
	}
	if len(v) > len("sha256=") && strings.EqualFold(v[:len("sha256=")], "sha256=") {
		v = v[len("sha256="):]
	}
	got, err := hex.DecodeString(v)
	if err != nil || len(got) != sha256.Size {
		return unauthorized("the %s header is not a hex HMAC-SHA256", h.header)
	}
	m := hmac.New(sha256.New, h.secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return unauthorized("the signature does not match")
	}
	return nil
}
