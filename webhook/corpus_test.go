package webhook_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/webhook"
)

// TestRoundTripCorpus: every body of the corpus (each preset's layouts and
// texts, pretty and compact, escaped or raw UTF-8, forms and multipart,
// and the providers' verbatim examples) signed by Sign verifies, and no
// longer does once one byte of it changes. (A package test of its own:
// corpus imports webhook.)
func TestRoundTripCorpus(t *testing.T) {
	secret := corpus.Secret("generic")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	v, err := webhook.NewVerifier(secret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bodies := corpus.All()
	if len(bodies) < 100 {
		t.Fatalf("the corpus has %d bodies", len(bodies))
	}
	for i, b := range bodies {
		id := "msg_corpus_" + strconv.Itoa(i)
		if i%2 == 0 {
			id = "outbox:conv-" + strconv.Itoa(i) + ":draft-1" // as outbound signs a reply: colons in the id
		}
		sig, err := webhook.Sign(secret, id, now, b.Raw)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("webhook-signature", sig)
		if err := v.Verify(h, b.Raw, now.Add(30*time.Second)); err != nil {
			t.Errorf("%s: Verify(signed) = %v, want nil", b.Name(), err)
		}
		changed := bytes.Clone(b.Raw)
		changed[len(changed)/2] ^= 0x01
		if err := v.Verify(h, changed, now); err == nil {
			t.Errorf("%s: Verify(signed, a byte changed) = nil, want an error", b.Name())
		}
	}
}
