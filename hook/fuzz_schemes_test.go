package hook

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/webhook"
)

const fuzzSecret = "fuzz-secret:0123456789"

var fuzzNow = time.Unix(1767225600, 0)

func hmacOf(h func() hash.Hash, key string, parts ...string) []byte {
	m := hmac.New(h, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// sign builds the headers (and, for mailgun and twilio, the body and URL) a
// correct sender of scheme would send for body, independently of the
// verifiers, so that the fuzz target can check both directions.
func sign(scheme string, body []byte) (header http.Header, newBody []byte, u string) {
	ts := strconv.FormatInt(fuzzNow.Unix(), 10)
	h := http.Header{}
	u = "https://handoff.example.com/hooks/x"
	switch scheme {
	case SchemeStandardWebhooks:
		sig, _ := webhook.Sign("whsec_"+base64.StdEncoding.EncodeToString([]byte(fuzzSecret)), "msg_1", fuzzNow, body)
		h.Set("Svix-Id", "msg_1")
		h.Set("Svix-Timestamp", ts)
		h.Set("Svix-Signature", sig)
	case SchemeHMACSHA256:
		h.Set("X-Sig", "sha256="+base64.StdEncoding.EncodeToString(hmacOf(sha256.New, fuzzSecret, string(body))))
	case SchemeMeta:
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacOf(sha256.New, fuzzSecret, string(body))))
	case SchemeSlack:
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(hmacOf(sha256.New, fuzzSecret, "v0:"+ts+":", string(body))))
	case SchemeStripe:
		h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(hmacOf(sha256.New, fuzzSecret, ts+".", string(body)))+",v0=00")
	case SchemeToken:
		h.Set("X-Token", fuzzSecret)
	case SchemeBasic:
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(fuzzSecret)))
	case SchemeMailgun:
		form := url.Values{"text": {string(body)}, "timestamp": {ts}, "token": {"tok"}}
		form.Set("signature", hex.EncodeToString(hmacOf(sha256.New, fuzzSecret, ts, "tok")))
		body = []byte(form.Encode())
		h.Set("Content-Type", formType)
	case SchemeTwilio:
		form := url.Values{"Body": {string(body)}, "MessageSid": {"SM1"}}
		body = []byte(form.Encode())
		h.Set("Content-Type", formType)
		h.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(hmacOf(sha1.New, fuzzSecret, u, twilioParams(form))))
	}
	return h, body, u
}

// FuzzSignatures checks every scheme both ways: a request signed the way
// the provider signs verifies, whatever the body; and any header value the
// fuzzer makes up is refused with a 401 sentence (never a panic), unless it
// is the one value a correct signer would send.
func FuzzSignatures(f *testing.F) {
	for i := range Schemes {
		f.Add(uint8(i), []byte(`{"id":"evt_1"}`), "sha256=00", "1767225600")
		f.Add(uint8(i), []byte("MessageSid=SM1&Body=hi"), "t=1767225600,v1=zz,v1=", "")
		f.Add(uint8(i), []byte{}, "v0=", "-1")
	}
	f.Add(uint8(4), []byte(`{}`), "t=1,t=2,v1=00", "+1767225600")
	f.Add(uint8(5), []byte(`{}`), "t=1767225600,v1", "01767225600")
	f.Add(uint8(7), []byte(`{}`), "Basic Zm9v", "")
	f.Add(uint8(8), []byte("timestamp=1&token=2&signature=3"), "", "")
	f.Fuzz(func(t *testing.T, which uint8, body []byte, value, ts string) {
		scheme := Schemes[int(which)%len(Schemes)]
		sg := Signing{Scheme: scheme, Secrets: []string{"other:secret", fuzzSecret}, Header: "X-Token", Encoding: "base64", Prefix: "sha256="}
		if scheme == SchemeHMACSHA256 {
			sg.Header = "X-Sig"
		}
		if scheme == SchemeStandardWebhooks {
			sg.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte(fuzzSecret))}
		}
		v, err := NewVerifier(sg)
		if err != nil {
			t.Fatalf("NewVerifier(%s): %v", scheme, err)
		}
		good, goodBody, u := sign(scheme, body)
		if err := v.Verify(&Request{URL: u, Header: good, Body: goodBody, Now: fuzzNow}); err != nil {
			t.Fatalf("%s: a correctly signed request is refused: %v", scheme, err)
		}
		// Replace every header of the correct request by the fuzzer's value,
		// one at a time, and the timestamp headers by its ts.
		for name := range good {
			if name == "Content-Type" {
				continue
			}
			for _, fake := range []string{value, ts} {
				h := good.Clone()
				h.Set(name, fake)
				err := v.Verify(&Request{URL: u, Header: h, Body: goodBody, Now: fuzzNow})
				if err == nil {
					if !slices.Equal(h.Values(name), good.Values(name)) && !sameMeaning(scheme, name, fake, good.Get(name)) {
						t.Fatalf("%s: %s: %q accepted in place of %q", scheme, name, fake, good.Get(name))
					}
					continue
				}
				var he *Error
				if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || he.Msg == "" || strings.ContainsAny(he.Msg, "\n") || strings.Contains(he.Msg, fuzzSecret) {
					t.Fatalf("%s: refusal %#v is not a 401 sentence without the secret", scheme, err)
				}
			}
		}
		// One more byte of body under the correct headers is refused by
		// every scheme that signs the body.
		if bodySigned(scheme) {
			longer := append(slices.Clone(goodBody), 'x')
			if err := v.Verify(&Request{URL: u, Header: good, Body: longer, Now: fuzzNow}); err == nil {
				t.Fatalf("%s: a body with one more byte is accepted", scheme)
			}
		}
	})
}

// sameMeaning lets through the spellings a verifier accepts on purpose:
// surrounding space, hex in upper case, a timestamp header equal to the
// signed one, extra Stripe entries around the valid v1.
func sameMeaning(scheme, name, fake, good string) bool {
	f := strings.TrimSpace(fake)
	if f == good || strings.EqualFold(f, good) {
		return true
	}
	if scheme == SchemeStripe {
		for _, item := range strings.Split(f, ",") {
			if strings.Contains(good, strings.TrimSpace(item)) && strings.HasPrefix(strings.TrimSpace(item), "v1=") {
				return true
			}
		}
	}
	if scheme == SchemeStandardWebhooks && name == "Svix-Signature" {
		return strings.Contains(fake, strings.TrimPrefix(good, "v1,"))
	}
	return false
}
