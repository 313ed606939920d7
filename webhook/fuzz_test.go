package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzStandardWebhooksHeader checks that no forged signature, timestamp or id
// header is accepted: a request verifies only if one of its v1 entries is
// exactly the signature of id.timestamp.body under the secret.
func FuzzStandardWebhooksHeader(f *testing.F) {
	ts := "1614265330"
	f.Add(swID, ts, swSig, []byte(swBody))
	f.Add(swID, ts, "v1,Zm9v "+swSig, []byte(swBody))
	f.Add(swID, ts, "v2,"+swSig[3:]+" v1a,abc", []byte(swBody))
	f.Add(swID, ts, swSig, []byte(`{"test": 2432232315}`))
	f.Add(swID, "1614265630", swSig, []byte(swBody))
	f.Add(swID, "+1614265330", swSig, []byte(swBody))
	f.Add(swID, "-1", "v1,", []byte(""))
	f.Add("", "", "", []byte(nil))
	f.Add(swID, ts, swSig[:len(swSig)-2]+"F=", []byte(swBody))
	f.Add(swID, ts, "v1,"+strings.Repeat("A", 44), []byte(swBody))
	key, err := decodeSecret(swSecret)
	if err != nil {
		f.Fatal(err)
	}
	v, err := NewVerifier(swSecret, 5*time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(swTS, 0)
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", timestamp)
		h.Set("webhook-signature", signature)
		err := v.Verify(h, body, now)
		if err != nil {
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Reason == "" {
				t.Fatalf("Verify error = %v (%T), want a *VerifyError with a reason", err, err)
			}
			if strings.Contains(ve.Reason, strings.TrimPrefix(swSecret, "whsec_")) {
				t.Fatalf("Verify error %q quotes the secret", ve.Reason)
			}
			return
		}
		// Computed here independently of the package's signing code.
		m := hmac.New(sha256.New, key)
		m.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		for _, entry := range strings.Fields(h.Get("webhook-signature")) {
			if entry == want {
				return
			}
		}
		t.Fatalf("Verify accepted id %q, timestamp %q, signature %q, body %q: no entry is %q", id, timestamp, signature, body, want)
	})
}
