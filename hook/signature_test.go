package hook

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/handoff/handoff/webhook"
)

// TestStandardWebhooksAnswers401 checks the adapter only: the scheme itself
// is tested in package webhook. Every refusal is a 401 *Error carrying
// webhook's sentence, so the sender learns why.
func TestStandardWebhooksAnswers401(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const body = `{"id":"evt_1"}`
	at := time.Unix(1614265330, 0)
	sig, err := webhook.Sign(secret, "msg_1", at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	signed := func(id, sig string) http.Header {
		return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(at.Unix(), 10)}, "Webhook-Signature": {sig}}
	}
	tests := []struct {
		name   string
		header http.Header
		now    time.Time
		errMsg string // empty: verification must pass
	}{
		{name: "valid", header: signed("msg_1", sig), now: at},
		{name: "tampered id", header: signed("msg_2", sig), now: at, errMsg: "the signature does not match"},
		{name: "stale", header: signed("msg_1", sig), now: at.Add(time.Hour), errMsg: "the webhook-timestamp header is outside the 5m0s tolerance"},
		{name: "no headers", header: http.Header{}, now: at, errMsg: "the webhook-id header is missing"},
	}
	v, err := NewStandardWebhooks(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Verify(&Request{Header: tt.header, Body: []byte(body), Now: tt.now})
			if tt.errMsg == "" {
				if err != nil {
					t.Errorf("Verify = %v, want nil", err)
				}
				return
			}
			wantError(t, err, http.StatusUnauthorized, tt.errMsg)
		})
	}
	if _, err := NewStandardWebhooks("whsec_not base64!", 0); err == nil {
		t.Error("NewStandardWebhooks accepted a secret that is not base64")
	}
}

// The example from GitHub's "Validating webhook deliveries" documentation.
const (
	ghSecret = "It's a Secret to Everybody"
	ghBody   = "Hello, World!"
	ghHex    = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestHMACSHA256(t *testing.T) {
	tests := []struct {
		name   string
		value  string // "" leaves the header out
		body   string
		errMsg string
	}{
		{name: "valid", value: ghHex},
		{name: "sha256= prefix", value: "sha256=" + ghHex},
		{name: "upper-case prefix", value: "SHA256=" + ghHex},
		{name: "upper-case hex", value: "sha256=" + "757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17"},
		{name: "surrounding space", value: " " + ghHex + " "},
		{name: "wrong", value: "sha256=" + "857107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", errMsg: "the signature does not match"},
		{name: "tampered body", value: ghHex, body: "Hello, World?", errMsg: "the signature does not match"},
		{name: "missing header", errMsg: "the X-Hub-Signature-256 header is missing"},
		{name: "prefix only", value: "sha256=", errMsg: "is not a hex HMAC-SHA256"},
		{name: "non-hex", value: "sha256=" + "zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", errMsg: "the X-Hub-Signature-256 header is not a hex HMAC-SHA256"},
		{name: "too short", value: ghHex[:62], errMsg: "is not a hex HMAC-SHA256"},
		{name: "sha1 prefix", value: "sha1=" + ghHex, errMsg: "is not a hex HMAC-SHA256"},
	}
	v := NewHMACSHA256([]byte(ghSecret), "x-hub-signature-256")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.value != "" {
				h.Set("X-Hub-Signature-256", tt.value)
			}
			body := tt.body
			if body == "" {
				body = ghBody
			}
			err := v.Verify(&Request{Header: h, Body: []byte(body)})
			if tt.errMsg == "" {
				if err != nil {
					t.Errorf("Verify = %v, want nil", err)
				}
				return
			}
			wantError(t, err, http.StatusUnauthorized, tt.errMsg)
		})
	}
}

func TestHMACSHA256CopiesSecret(t *testing.T) {
	secret := []byte(ghSecret)
	v := NewHMACSHA256(secret, "X-Signature")
	secret[0] = 'X'
	h := http.Header{"X-Signature": {ghHex}}
	if err := v.Verify(&Request{Header: h, Body: []byte(ghBody)}); err != nil {
		t.Errorf("Verify after the caller reused its secret slice = %v, want nil", err)
	}
}

// TestSigningCheck: each rule names the setting at fault, and NewVerifier
// refuses by the same rules config checks at start.
func TestSigningCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Signing
		key  string
	}{
		{"unknown scheme", Signing{Scheme: "hmac-sha1", Secrets: []string{"x"}}, "scheme"},
		{"hmac without header", Signing{Scheme: SchemeHMACSHA256, Secrets: []string{"x"}}, "header"},
		{"hmac with a bad encoding", Signing{Scheme: SchemeHMACSHA256, Header: "X-Sig", Encoding: "b32", Secrets: []string{"x"}}, "encoding"},
		{"token without header", Signing{Scheme: SchemeToken, Secrets: []string{"x"}}, "header"},
		{"no secret", Signing{Scheme: SchemeSlack}, "secret"},
		{"empty secret", Signing{Scheme: SchemeSlack, Secrets: []string{"x", ""}}, "secret"},
		{"basic without a colon", Signing{Scheme: SchemeBasic, Secrets: []string{"user:pw", "nocolon"}}, "secret"},
		{"standard-webhooks not base64", Signing{Scheme: SchemeStandardWebhooks, Secrets: []string{"whsec_!!"}}, "secret"},
		{"fine", Signing{Scheme: SchemeMailgun, Secrets: []string{"key-1"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Check()
			_, verr := NewVerifier(tc.s)
			var se *SigningError
			switch {
			case tc.key == "" && (err != nil || verr != nil):
				t.Fatalf("Check = %v, NewVerifier = %v; want both nil", err, verr)
			case tc.key != "" && (!errors.As(err, &se) || se.Key != tc.key || se.Msg == ""):
				t.Fatalf("Check = %#v, want a *SigningError on %s", err, tc.key)
			case tc.key != "" && (verr == nil || verr.Error() != err.Error()):
				t.Fatalf("NewVerifier = %v, want Check's %v", verr, err)
			}
		})
	}
}
