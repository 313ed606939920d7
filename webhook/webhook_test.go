package webhook

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example from the Standard Webhooks specification and its reference libraries.
const (
	swSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTS     = 1614265330
	swBody   = `{"test": 2432232314}`
	swSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// swOtherSecret signs well-formed v1 signatures that must not pass for swSecret.
	swOtherSecret = "whsec_" + "c2Vjb25kIHNlY3JldCBmb3IgdGVzdHM=" // base64("second secret for tests")
)

func swHeader(id, ts, sig string) http.Header {
	h := http.Header{}
	if id != "" {
		h.Set("webhook-id", id)
	}
	if ts != "" {
		h.Set("webhook-timestamp", ts)
	}
	if sig != "" {
		h.Set("webhook-signature", sig)
	}
	return h
}

func TestSignSpecExample(t *testing.T) {
	got, err := Sign(swSecret, swID, time.Unix(swTS, 0), []byte(swBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != swSig {
		t.Errorf("Sign(spec example) = %q, want %q", got, swSig)
	}
}

func TestVerify(t *testing.T) {
	ts := strconv.Itoa(swTS)
	at := time.Unix(swTS, 0)
	otherSig, err := Sign(swOtherSecret, swID, at, []byte(swBody))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		secret string
		header http.Header
		body   string
		now    time.Time
		errMsg string // empty: verification must pass
	}{
		{name: "valid", header: swHeader(swID, ts, swSig)},
		{name: "valid, bare base64 secret", secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", header: swHeader(swID, ts, swSig)},
		{name: "valid at the edge of the past tolerance", header: swHeader(swID, ts, swSig), now: at.Add(5 * time.Minute)},
		{name: "valid at the edge of the future tolerance", header: swHeader(swID, ts, swSig), now: at.Add(-5 * time.Minute)},
		{name: "one valid among invalid ones", header: swHeader(swID, ts, "v1,Zm9v "+otherSig+" "+swSig+" v1,notbase64!")},
		{name: "valid after a v2 entry", header: swHeader(swID, ts, "v2,"+swSig[3:]+" "+swSig)},
		{name: "valid in a repeated header", header: http.Header{
			"Webhook-Id":        {swID},
			"Webhook-Timestamp": {ts},
			"Webhook-Signature": {otherSig, swSig},
		}},

		{name: "wrong secret", secret: swOtherSecret, header: swHeader(swID, ts, swSig), errMsg: "the signature does not match"},
		{name: "tampered body", header: swHeader(swID, ts, swSig), body: `{"test": 2432232315}`, errMsg: "the signature does not match"},
		{name: "tampered id", header: swHeader("msg_other", ts, swSig), errMsg: "the signature does not match"},
		{name: "all invalid", header: swHeader(swID, ts, otherSig+" v1,Zm9v v1,"), errMsg: "the signature does not match"},
		{name: "non-canonical base64", header: swHeader(swID, ts, swSig[:len(swSig)-2]+"F="), errMsg: "the signature does not match"},
		{name: "only v2 entries", header: swHeader(swID, ts, "v2,"+swSig[3:]), errMsg: "the webhook-signature header has no v1 signature"},
		{name: "signature without a version", header: swHeader(swID, ts, swSig[3:]), errMsg: "the webhook-signature header has no v1 signature"},
		{name: "stale", header: swHeader(swID, ts, swSig), now: at.Add(5*time.Minute + time.Second), errMsg: "the webhook-timestamp header is outside the 5m0s tolerance"},
		{name: "future", header: swHeader(swID, ts, swSig), now: at.Add(-5*time.Minute - time.Second), errMsg: "the webhook-timestamp header is outside the 5m0s tolerance"},
		{name: "far future", header: swHeader(swID, "9223372036854775807", swSig), errMsg: "outside the 5m0s tolerance"},
		{name: "missing id", header: swHeader("", ts, swSig), errMsg: "the webhook-id header is missing"},
		{name: "missing timestamp", header: swHeader(swID, "", swSig), errMsg: "the webhook-timestamp header is missing"},
		{name: "missing signature", header: swHeader(swID, ts, ""), errMsg: "the webhook-signature header is missing"},
		{name: "no headers", header: http.Header{}, errMsg: "the webhook-id header is missing"},
		{name: "timestamp in milliseconds text", header: swHeader(swID, "2021-02-21T15:02:10Z", swSig), errMsg: "the webhook-timestamp header is not a unix time"},
		{name: "timestamp with a plus sign", header: swHeader(swID, "+"+ts, swSig), errMsg: "the webhook-timestamp header is not a unix time"},
		{name: "timestamp with a leading zero", header: swHeader(swID, "0"+ts, swSig), errMsg: "the webhook-timestamp header is not a unix time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := tt.secret
			if secret == "" {
				secret = swSecret
			}
			body := tt.body
			if body == "" {
				body = swBody
			}
			now := tt.now
			if now.IsZero() {
				now = at
			}
			v, err := NewVerifier(secret, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(tt.header, []byte(body), now)
			if tt.errMsg == "" {
				if err != nil {
					t.Errorf("Verify = %v, want nil", err)
				}
				return
			}
			wantRefused(t, err, tt.errMsg)
		})
	}
}

func TestVerifyTolerance(t *testing.T) {
	at := time.Unix(swTS, 0)
	h := swHeader(swID, strconv.Itoa(swTS), swSig)
	tests := []struct {
		name      string
		tolerance time.Duration
		now       time.Time
		errMsg    string
	}{
		{"zero means five minutes, inside", 0, at.Add(4 * time.Minute), ""},
		{"zero means five minutes, outside", 0, at.Add(6 * time.Minute), "outside the 5m0s tolerance"},
		{"wider tolerance", time.Hour, at.Add(59 * time.Minute), ""},
		{"narrower tolerance", 10 * time.Second, at.Add(11 * time.Second), "outside the 10s tolerance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVerifier(swSecret, tt.tolerance)
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(h, []byte(swBody), tt.now)
			if tt.errMsg == "" {
				if err != nil {
					t.Errorf("Verify = %v, want nil", err)
				}
				return
			}
			wantRefused(t, err, tt.errMsg)
		})
	}
}

func TestSecret(t *testing.T) {
	tests := []struct {
		name   string
		secret string
		ok     bool
	}{
		{"whsec form", swSecret, true},
		{"bare base64", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"unpadded base64", "whsec_" + "c2Vjb25kIHNlY3JldCBmb3IgdGVzdHM", true},
		{"empty", "", false},
		{"prefix only", "whsec_", false},
		{"not base64", "whsec_not base64!", false},
		{"url alphabet", "whsec_-_-_", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVerifier(tt.secret, time.Minute)
			_, signErr := Sign(tt.secret, swID, time.Unix(swTS, 0), nil)
			if tt.ok {
				if err != nil || v == nil || signErr != nil {
					t.Errorf("NewVerifier = %v, %v; Sign error %v; want a verifier", v, err, signErr)
				}
				return
			}
			if err == nil || signErr == nil {
				t.Fatalf("NewVerifier error = %v, Sign error = %v; want both to refuse the secret", err, signErr)
			}
			if body := strings.TrimPrefix(tt.secret, "whsec_"); body != "" && strings.Contains(err.Error(), body) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

// TestValidateSecret holds the rule config checks secrets with at start.
func TestValidateSecret(t *testing.T) {
	tests := []struct {
		secret string
		ok     bool
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"  whsec_c2VjcmV0\n", true}, // pasted with its surroundings
		{"whsec_c2VjcmV0", true},
		{"whsec_c2VjcmV0LQ", true}, // unpadded
		{"", false},
		{"whsec_", false},
		{"whsec_not base64!", false},
		{"plain words", false},
	}
	for _, tt := range tests {
		t.Run(tt.secret, func(t *testing.T) {
			err := ValidateSecret(tt.secret)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateSecret(%q) = %v; want ok %v", tt.secret, err, tt.ok)
			}
			if err != nil && len(tt.secret) > len("whsec_") && strings.Contains(err.Error(), strings.TrimPrefix(tt.secret, "whsec_")) {
				t.Errorf("error repeats the secret: %v", err)
			}
			// The verifier and the signer must agree with it.
			_, verr := NewVerifier(tt.secret, 0)
			_, serr := Sign(tt.secret, swID, time.Unix(swTS, 0), nil)
			if (verr == nil) != tt.ok || (serr == nil) != tt.ok {
				t.Errorf("NewVerifier error %v, Sign error %v; want ok %v like ValidateSecret", verr, serr, tt.ok)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, id, body string
	}{
		// Exact on purpose: the edge cases. Real-shaped bodies: TestRoundTripCorpus.
		{"empty body", "msg_1", ""},
		{"binary body", "msg_2", "\x00\xff\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := Sign(swSecret, tt.id, now, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewVerifier(swSecret, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			h := swHeader(tt.id, strconv.FormatInt(now.Unix(), 10), sig)
			if err := v.Verify(h, []byte(tt.body), now.Add(30*time.Second)); err != nil {
				t.Errorf("Verify(signed) = %v, want nil", err)
			}
			if err := v.Verify(h, []byte(tt.body+"x"), now); err == nil {
				t.Errorf("Verify(signed, body changed) = nil, want an error")
			}
		})
	}
}

func wantRefused(t *testing.T, err error, reason string) {
	t.Helper()
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v (%T), want *VerifyError", err, err)
	}
	if !strings.Contains(ve.Reason, reason) {
		t.Errorf("reason = %q, want it to contain %q", ve.Reason, reason)
	}
	if ve.Error() != ve.Reason {
		t.Errorf("Error() = %q, want the reason %q", ve.Error(), ve.Reason)
	}
}

func TestSigns(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"webhook-id", true},
		{"Webhook-Timestamp", true},
		{"WEBHOOK-ID", true},
		{"webhook-signature", false},
		{"x-request-id", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := Signs(tt.name); got != tt.want {
			t.Errorf("Signs(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSvixNamesAndRotation: the same signature under svix-* names verifies;
// a verifier with several secrets accepts a signature by any of them and
// nothing else.
func TestSvixNamesAndRotation(t *testing.T) {
	at := time.Unix(swTS, 0)
	svix := http.Header{}
	svix.Set("svix-id", swID)
	svix.Set("svix-timestamp", strconv.Itoa(swTS))
	svix.Set("svix-signature", swSig)
	const other = "whsec_b3RoZXItc2VjcmV0LWZvci1yb3RhdGlvbg=="
	tests := []struct {
		name    string
		secrets []string
		header  http.Header
		ok      bool
		errMsg  string
	}{
		{name: "svix names", secrets: []string{swSecret}, header: svix, ok: true},
		{name: "rotated, old second", secrets: []string{other, swSecret}, header: swHeader(swID, strconv.Itoa(swTS), swSig), ok: true},
		{name: "rotated, svix", secrets: []string{other, swSecret}, header: svix, ok: true},
		{name: "only the other secret", secrets: []string{other}, header: svix, errMsg: "the signature does not match"},
		{name: "svix without a timestamp", secrets: []string{swSecret}, header: http.Header{"Svix-Id": {swID}, "Svix-Signature": {swSig}}, errMsg: "the svix-timestamp header is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewMultiVerifier(tt.secrets, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(tt.header, []byte(swBody), at)
			if tt.ok != (err == nil) || (!tt.ok && (err == nil || !strings.Contains(err.Error(), tt.errMsg))) {
				t.Errorf("Verify = %v, want ok %v / %q", err, tt.ok, tt.errMsg)
			}
		})
	}
	if _, err := NewMultiVerifier(nil, 0); err == nil {
		t.Error("NewMultiVerifier accepted no secret")
	}
	if _, err := NewMultiVerifier([]string{swSecret, "whsec_!!"}, 0); err == nil || strings.Contains(err.Error(), "!!") {
		t.Errorf("NewMultiVerifier with a bad second secret = %v, want an error that does not quote it", err)
	}
	for _, name := range []string{"svix-id", "Svix-Timestamp"} {
		if !Signs(name) {
			t.Errorf("Signs(%q) = false", name)
		}
	}
	if Signs("svix-signature") {
		t.Error("Signs(svix-signature) = true")
	}
}
