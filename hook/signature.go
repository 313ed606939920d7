package hook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/handoff/handoff/webhook"
)

// Verifier checks one inbound request's signature; now is passed in so that
// tolerance checks are testable without a real clock. Every error it returns
// is a 401 *Error.
type Verifier interface {
	Verify(header http.Header, body []byte, now time.Time) error
}

// standardWebhooks answers webhook's refusals as 401s.
type standardWebhooks struct{ v *webhook.Verifier }

// NewStandardWebhooks returns a Standard Webhooks verifier; a non-positive
// tolerance means the scheme's recommended five minutes.
func NewStandardWebhooks(secret string, tolerance time.Duration) (Verifier, error) {
	v, err := webhook.NewVerifier(secret, tolerance)
	if err != nil {
		return nil, err
	}
	return standardWebhooks{v: v}, nil
}

// Verify passes webhook's sentence on to the sender.
func (sw standardWebhooks) Verify(header http.Header, body []byte, now time.Time) error {
	err := sw.v.Verify(header, body, now)
	var ve *webhook.VerifyError
	if errors.As(err, &ve) {
		return unauthorized("%s", ve.Reason)
	}
	return err
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
