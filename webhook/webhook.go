// Package webhook signs and verifies Standard Webhooks
// (https://www.standardwebhooks.com): the webhook-id, webhook-timestamp and
// webhook-signature headers, "whsec_" secrets and v1 signatures. Inbound
// verification (package hook) and outbound signing (the http provider) use
// the same code, so what handoff sends is exactly what it accepts. It knows
// nothing else of handoff.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const whsecPrefix = "whsec_"

// DefaultTolerance is how far a timestamp may stray from the clock: the
// scheme's recommended five minutes. The config package uses it as the
// default of a channel's tolerance.
const DefaultTolerance = 5 * time.Minute

// VerifyError says why a request was refused, in one sentence that may be
// shown to its sender: it never quotes the secret.
type VerifyError struct {
	Reason string
}

// Error returns the sentence alone.
func (e *VerifyError) Error() string { return e.Reason }

func refuse(format string, args ...any) *VerifyError {
	return &VerifyError{Reason: fmt.Sprintf(format, args...)}
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

// Verifier checks requests signed with any of its secrets.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
}

// NewVerifier returns a verifier for secret; a non-positive tolerance means
// DefaultTolerance.
func NewVerifier(secret string, tolerance time.Duration) (*Verifier, error) {
	return NewMultiVerifier([]string{secret}, tolerance)
}

// NewMultiVerifier returns a verifier that accepts a signature made with any
// of secrets, so that a receiver can rotate its secret without the sender
// signing twice: list the new secret beside the old until every sender has
// moved. A non-positive tolerance means DefaultTolerance.
func NewMultiVerifier(secrets []string, tolerance time.Duration) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook: no secret")
	}
	v := &Verifier{tolerance: tolerance}
	if v.tolerance <= 0 {
		v.tolerance = DefaultTolerance
	}
	for i, secret := range secrets {
		key, err := decodeSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("webhook: secret %d: %w", i+1, err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// headerNames are the three headers of one naming: the standard's, and
// Svix's, which signs the very same way under its own names.
type headerNames struct{ id, timestamp, signature string }

var (
	standardNames = headerNames{"webhook-id", "webhook-timestamp", "webhook-signature"}
	svixNames     = headerNames{"svix-id", "svix-timestamp", "svix-signature"}
)

// Verify accepts the request when any v1 entry matches, because senders list
// signatures under the old and new secret while rotating it. Every error is
// a *VerifyError; now is passed in so that the tolerance is testable without
// a real clock.
//
// The svix-id, svix-timestamp and svix-signature headers are read when no
// webhook-id header is present: Svix-powered senders sign exactly the same
// content under those names.
func (v *Verifier) Verify(header http.Header, body []byte, now time.Time) error {
	names := standardNames
	if header.Get(standardNames.id) == "" && header.Get(svixNames.id) != "" {
		names = svixNames
	}
	id := header.Get(names.id)
	if id == "" {
		return refuse("the webhook-id header is missing")
	}
	ts := header.Get(names.timestamp)
	if ts == "" {
		return refuse("the %s header is missing", names.timestamp)
	}
	sigs := header.Values(names.signature)
	if len(sigs) == 0 {
		return refuse("the %s header is missing", names.signature)
	}
	if err := CheckTimestamp(ts, names.timestamp+" header", now, v.tolerance); err != nil {
		return err
	}
	wants := make([][]byte, len(v.keys))
	for i, key := range v.keys {
		wants[i] = mac(key, id, ts, body)
	}
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
			if err != nil {
				continue
			}
			for _, want := range wants {
				if hmac.Equal(got, want) {
					return nil
				}
			}
		}
	}
	if !sawV1 {
		return refuse("the %s header has no v1 signature", names.signature)
	}
	return refuse("the signature does not match")
}

// CheckTimestamp is the timestamp rule of every scheme that signs a time
// (Standard Webhooks, and in hook Slack, Stripe and Mailgun): ts must be a
// unix time in seconds, in canonical decimal, so the signed text is the
// same whether a sender signs it as sent or re-formats the number; and it
// must lie within tol of now. Schemes check it before the signature, so
// that a replayed old request is refused though its signature is genuine.
// The refusal is a *VerifyError naming the timestamp as what.
func CheckTimestamp(ts, what string, now time.Time, tol time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(sec, 10) != ts {
		return refuse("the %s is not a unix time", what)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return refuse("the %s is outside the %v tolerance", what, tol)
	}
	return nil
}

// Signs reports whether a signature covers the request header name (any
// case): the signed content is id.timestamp.body, so webhook-id and
// webhook-timestamp are (and their Svix names), and webhook-signature
// itself is not.
func Signs(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Webhook-Id", "Webhook-Timestamp", "Svix-Id", "Svix-Timestamp":
		return true
	}
	return false
}

// Sign returns the webhook-signature value for an outbound call; the caller
// must send id as webhook-id and ts.Unix() in decimal as webhook-timestamp.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, strconv.FormatInt(ts.Unix(), 10), body)), nil
}

func mac(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Header is the header of an outbound JSON call signed with secret: its
// Content-Type, webhook-id id, webhook-timestamp ts (Unix seconds) and
// webhook-signature (Sign). Every signed call handoff makes (the http
// provider, the crm webhook, outbound events) carries it.
func Header(secret, id string, ts time.Time, body []byte) (http.Header, error) {
	sig, err := Sign(secret, id, ts, body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(standardNames.id, id)
	h.Set(standardNames.timestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(standardNames.signature, sig)
	return h, nil
}
