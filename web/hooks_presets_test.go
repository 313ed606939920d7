package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// presetVector is one request of hook/testdata/vectors.json, signed by the
// provider's own SDK (hook/testdata/vectors/gen.js made them).
type presetVector struct {
	Name    string            `json:"name"`
	Preset  string            `json:"preset"`
	Scheme  string            `json:"scheme"`
	Kind    string            `json:"kind"`
	Channel string            `json:"channel"`
	Path    string            `json:"path"`
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Now     int64             `json:"now"`
}

func loadPresetVectors(t *testing.T) []presetVector {
	t.Helper()
	raw, err := os.ReadFile("../hook/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []presetVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f.Vectors
}

// presetsYAML configures one channel per vector channel, each with the
// vector's secret listed second after a retired one: every valid request
// below also proves rotation.
const presetsYAML = `
base_url: https://handoff.example.com
channels:
  - {name: sms, preset: twilio, signature: {secrets: [retired-token-000000000000000000, "12345678901234567890123456789012"]}}
  - {name: sms-json, preset: twilio, signature: {secret: "12345678901234567890123456789012"}}
  - name: wa
    preset: whatsapp
    verify_token: vt-123
    signature: {secrets_env: [OLD_APP_SECRET, APP_SECRET]}
  - {name: fb, preset: messenger, signature: {secret: a1b2c3d4e5f60718293a4b5c6d7e8f90}}
  - {name: ig, preset: instagram, signature: {secret: a1b2c3d4e5f60718293a4b5c6d7e8f90}}
  - {name: slack, preset: slack, signature: {secrets: [old-slack-secret, 8f742231b10e8888abcd99yyyzzz85a5]}}
  - {name: tg, preset: telegram, signature: {secrets: [old-token, tg-secret_Token-123]}}
  - {name: mail, preset: sendgrid, signature: {secrets: ["sendgrid:old", "sendgrid:parse-pass-1"]}}
  - {name: mg, preset: mailgun, signature: {secrets: [key-old, key-3ax6xnjp29jd6fds4gc373sgvjxteol0]}}
  - {name: pm, preset: postmark, signature: {secret: "postmark:pm-pass-1"}}
  - {name: form, preset: typeform, signature: {secrets: [old-typeform, typeform-secret-abc]}}
  - name: stripe
    signature: {scheme: stripe, secrets: [whsec_old, whsec_test_stripe_secret_abc123]}
    fields: {message_id: /id, contact: /data/object/email, name: /data/object/name, text: /type}
  - name: svix
    signature: {scheme: standard-webhooks, secrets: [whsec_b2xkLXNlY3JldA==, whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]}
    fields: {message_id: /id}
  - name: sw
    signature: {scheme: standard-webhooks, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}
    fields: {message_id: /id}
  - name: gh
    signature: {scheme: hmac-sha256, header: X-Hub-Signature-256, prefix: "sha256=", secret: "It's a Secret to Everybody"}
    fields: {message_id: /issue/id, contact: /issue/user/login, name: "", text: /issue/body}
  - name: shop
    signature: {scheme: hmac-sha256, header: X-Shopify-Hmac-Sha256, encoding: base64, secret: shpss_0123456789abcdef}
    fields: {message_id: /id, contact: /email, name: /customer/first_name, text: /note}
`

// wantEvent is what one message must be stored as.
type wantEvent struct{ key, conversation, contact, name, text string }

// presetWants lists, per vector, the events it must store; a vector that
// is not listed must store none (a notification or a handshake).
var presetWants = map[string][]wantEvent{
	"twilio sms":           {{"sms:SM1f0e8ae6ade43cb3c0ce4525424e404f", "+15558675310", "+15558675310", "", "Hi, do you have the blue one in stock?"}},
	"twilio whatsapp":      {{"sms:SM2a0e8ae6ade43cb3c0ce4525424e4050", "whatsapp:+5511999990000", "whatsapp:+5511999990000", "Ana Souza", "Olá, ainda está disponível?"}},
	"twilio json callback": {{"sms-json:SM7d7d7d7d7d7d7d7d7d7d7d7d7d7d7d7d", "+15558675310", "+15558675310", "", "JSON hello"}},
	"whatsapp message":     {{"wa:wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=", "16505551234", "16505551234", "Sheena Nelson", "Does it come in another color?"}},
	"whatsapp batch": {
		{"wa:wamid.BATCH0001", "16505551234", "16505551234", "Sheena Nelson", "First question"},
		{"wa:wamid.BATCH0002", "16505551234", "16505551234", "Sheena Nelson", "And a second one"},
	},
	"messenger message":      {{"fb:m_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqMvK8ma6AC8fplwlqLP_5cgXIbu7I3rBN0P", "6789012345", "6789012345", "", "Is this still for sale?"}},
	"instagram message":      {{"ig:aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAwMDAwMDAwOjM0MDI4MjM2Njg0MTcxMDMwMTI0NDI1OTY1MTU5ODQ0OTI5NDQyMjozMTk3NTk5NjkxNDI5MjgyMjQ2MDk1OTM1MjM3MDI0MjA0OAZDZD", "5566778899", "5566778899", "", "Hi! Do you ship to Canada?"}},
	"slack message":          {{"slack:Ev08MFMKH6", "D024BE91L", "U2147483697", "", "Hello, can someone call me back?"}},
	"telegram message":       {{"tg:10000", "1111111", "1111111", "Ivan", "Привет! What are your hours?"}},
	"sendgrid inbound parse": {{"mail:<CAB9-sendgrid-0001@mail.example.com>", "jane@example.com", "jane@example.com", "Jane Doe", "Hello, could you send me a quote for 40 chairs?"}},
	"mailgun route":          {{"mg:<20260101000000.1.ABCDEF@mg.example.com>", "bob@example.com", "bob@example.com", "Bob Smith", "Yes, please go ahead."}},
	"postmark inbound":       {{"pm:73e6d360-66eb-11e1-8e72-a8904824019b", "support@postmarkapp.com", "support@postmarkapp.com", "Postmarkapp Support", "This is the reply text"}},
	"typeform response":      {{"form:a3a12ec67a1365927098a606107fac15", "laura@example.com", "laura@example.com", "Laura Lopez", "I would like a demo next week."}},
	"stripe event":           {{"stripe:evt_1QaBcD2eZvKYlo2C0123abcd", "a@example.com", "a@example.com", "Ada", "customer.created"}},
	"svix":                   {{"svix:lead_svix_1", "svix@example.com", "svix@example.com", "Sam", "From a Svix sender"}},
	"standard webhooks":      {{"sw:lead_sw_1", "sw@example.com", "sw@example.com", "Sue", "From a Standard Webhooks sender"}},
	"github":                 {{"gh:1347", "octocat", "octocat", "", "It breaks"}},
	"shopify":                {{"shop:820982911946154500", "jon@example.com", "jon@example.com", "Jon", "Please call me"}},
}

// presetReceipts is how many delivery receipts a notification vector names.
var presetReceipts = map[string]int{"twilio status callback": 1, "whatsapp statuses": 2, "mailgun delivered event": 1}

// presetReceiptKeys are the receipts those vectors must store: channel,
// provider message id, status.
var presetReceiptKeys = map[string][][3]string{
	"twilio status callback":  {{"sms", "SM9c1a2b3c4d5e6f708192a3b4c5d6e7f8", "delivered"}},
	"whatsapp statuses":       {{"wa", "wamid.OURSEND0001", "delivered"}, {"wa", "wamid.OURSEND0002", "read"}},
	"mailgun delivered event": {{"mg", "20260101.OURSEND@mg.example.com", "delivered"}},
}

type presetEnv struct {
	*testEnv
	offset atomic.Int64 // seconds added to the vectors' clock
}

func newPresetEnv(t *testing.T) *presetEnv {
	t.Helper()
	vectors := loadPresetVectors(t)
	cfg, err := config.Parse([]byte(presetsYAML), func(name string) string {
		return map[string]string{"APP_SECRET": "a1b2c3d4e5f60718293a4b5c6d7e8f90", "OLD_APP_SECRET": "retired-app-secret"}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	pe := &presetEnv{}
	at := time.Unix(vectors[0].Now, 0)
	pe.testEnv, _ = newEnv(t, cfg, envOptions{now: func() time.Time { return at.Add(time.Duration(pe.offset.Load()) * time.Second) }})
	return pe
}

type hookReply struct {
	code  int
	ctype string
	raw   []byte
}

func (e *presetEnv) send(t *testing.T, method, path string, header map[string]string, body string) hookReply {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return hookReply{code: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: raw}
}

func (e *presetEnv) events(t *testing.T) int {
	t.Helper()
	st, err := e.st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Events
}

// TestPresetVectors sends every SDK-signed vector through the whole server:
// the valid request is stored as its provider's fields say (or counted as
// a notification, or answered as a handshake) and answered the way the
// provider expects; sent again it is a duplicate; a tampered or unsigned
// copy, and a stale one where the scheme signs a time, is a 401 with one
// sentence, and nothing is stored.
func TestPresetVectors(t *testing.T) {
	e := newPresetEnv(t)
	for _, v := range loadPresetVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			before := e.events(t)
			r := e.send(t, http.MethodPost, v.Path, v.Headers, v.Body)
			wants := presetWants[v.Name]
			checkProviderAnswer(t, v, r, len(wants))
			if got := e.events(t) - before; got != len(wants) {
				t.Fatalf("stored %d events, want %d", got, len(wants))
			}
			for _, w := range wants {
				ev, err := e.st.EventByKey(w.key)
				if err != nil {
					t.Fatalf("event %s: %v", w.key, err)
				}
				got := wantEvent{ev.Key, ev.ConversationID, ev.Contact, ev.Name, ev.Text}
				if got != w {
					t.Errorf("stored %+v, want %+v", got, w)
				}
				if strings.Contains(string(ev.Body)+ev.BodyText, "%PDF") || strings.Contains(string(ev.Body)+ev.BodyText, "PNG fake") {
					t.Errorf("an attachment's bytes were stored: %s%s", ev.Body, ev.BodyText)
				}
				if v.Preset == "sendgrid" && !strings.Contains(string(ev.Body), `{"field":"attachment1","filename":"floorplan.pdf","content_type":"application/pdf","size":48}`) {
					t.Errorf("the stored body does not record the attachment by name, type and size: %s", ev.Body)
				}
			}
			if v.Kind == "handshake" {
				var a map[string]string
				if err := json.Unmarshal(r.raw, &a); err != nil || a["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
					t.Errorf("url_verification answer = %s, want the challenge", r.raw)
				}
			}
			for _, k := range presetReceiptKeys[v.Name] {
				var rc store.Receipt
				err := e.st.View(func(tx *store.Tx) (err error) { rc, err = tx.Receipt(k[0], k[1]); return err })
				if err != nil || rc.Status != k[2] {
					t.Errorf("receipt %s:%s = %+v, %v; want status %s", k[0], k[1], rc, err, k[2])
				}
			}
			if v.Kind == "notification" && v.Preset != "twilio" {
				a := decodeBatch(t, v, r)
				if a.Status != "ignored" || a.Receipts != presetReceipts[v.Name] || a.Notifications+a.Receipts == 0 {
					t.Errorf("notification answer = %+v, want ignored with %d receipts", a, presetReceipts[v.Name])
				}
			}

			// The same request again: a duplicate, nothing new stored.
			if len(wants) > 0 {
				r := e.send(t, http.MethodPost, v.Path, v.Headers, v.Body)
				if r.code/100 != 2 {
					t.Fatalf("resent: %d %s", r.code, r.raw)
				}
				if v.Preset != "twilio" {
					if a := decodeBatch(t, v, r); a.Status != "duplicate" {
						t.Errorf("resent: status %q, want duplicate (%s)", a.Status, r.raw)
					}
				}
			}

			count := e.events(t)
			refused := func(what string, r hookReply) {
				t.Helper()
				var a map[string]string
				if r.code != http.StatusUnauthorized || json.Unmarshal(r.raw, &a) != nil || a["error"] == "" || strings.Contains(a["error"], "\n") {
					t.Errorf("%s: got %d %s, want 401 with one sentence", what, r.code, r.raw)
				}
				if strings.Contains(string(r.raw), v.Secret) {
					t.Errorf("%s: the answer quotes the secret", what)
				}
			}
			switch v.Scheme {
			case "token", "basic", "mailgun":
				// These sign no body: drop the credential instead.
				h := cloneHeaders(v.Headers)
				delete(h, "X-Telegram-Bot-Api-Secret-Token")
				delete(h, "Authorization")
				body := v.Body
				if v.Scheme == "mailgun" {
					body = strings.Replace(body, `"signature":"`, `"signature":"0`, 1)
					body = strings.Replace(body, "name=\"signature\"\r\n\r\n", "name=\"signature\"\r\n\r\n0", 1)
				}
				refused("without its credential", e.send(t, http.MethodPost, v.Path, h, body))
			default:
				refused("tampered", e.send(t, http.MethodPost, v.Path, v.Headers, strings.Replace(v.Body, `"`, `" `, 1)+tamperTail(v)))
			}
			switch v.Scheme {
			case "slack", "stripe", "standard-webhooks":
				e.offset.Store(int64((6 * time.Minute).Seconds()))
				refused("stale", e.send(t, http.MethodPost, v.Path, v.Headers, v.Body))
				e.offset.Store(0)
			}
			if got := e.events(t); got != count {
				t.Errorf("a refused request stored %d events", got-count)
			}
		})
	}
}

// tamperTail changes a form body, whose first byte has no quote.
func tamperTail(v presetVector) string {
	if strings.Contains(v.Body, `"`) {
		return ""
	}
	return "&Injected=1"
}

func cloneHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
}

// checkProviderAnswer checks the status and shape each provider expects.
func checkProviderAnswer(t *testing.T, v presetVector, r hookReply, messages int) {
	t.Helper()
	switch {
	case v.Preset == "twilio":
		if r.code != http.StatusOK || !strings.HasPrefix(r.ctype, "text/xml") || !bytes.Contains(r.raw, []byte("<Response></Response>")) {
			t.Fatalf("got %d %s %s, want 200 with an empty TwiML <Response>", r.code, r.ctype, r.raw)
		}
	case v.Preset == "whatsapp", v.Preset == "messenger", v.Preset == "instagram", v.Preset == "slack",
		v.Preset == "mailgun", v.Preset == "postmark", v.Preset == "sendgrid":
		if r.code != http.StatusOK {
			t.Fatalf("got %d %s, want 200", r.code, r.raw)
		}
	case messages > 0:
		if r.code != http.StatusAccepted {
			t.Fatalf("got %d %s, want 202", r.code, r.raw)
		}
	default:
		if r.code != http.StatusOK {
			t.Fatalf("got %d %s, want 200", r.code, r.raw)
		}
	}
	if v.Preset != "twilio" && messages > 0 {
		a := decodeBatch(t, v, r)
		if len(a.Events) != messages || a.Status != "accepted" {
			t.Errorf("answer %s lists %d events with status %q, want %d accepted", r.raw, len(a.Events), a.Status, messages)
		}
	}
}

// decodeBatch reads either answer shape into a batchAnswer.
func decodeBatch(t *testing.T, v presetVector, r hookReply) batchAnswer {
	t.Helper()
	var a batchAnswer
	if err := json.Unmarshal(r.raw, &a); err != nil {
		t.Fatalf("answer %s: %v", r.raw, err)
	}
	if a.Events == nil && a.Status != "ignored" {
		var one hookAnswer
		if err := json.Unmarshal(r.raw, &one); err != nil {
			t.Fatal(err)
		}
		a.Events = []hookAnswer{one}
	}
	return a
}

// TestMetaHandshake: Meta's GET is answered with the challenge only when
// the verify token matches; other channels take only POST.
func TestMetaHandshake(t *testing.T) {
	e := newPresetEnv(t)
	tests := []struct {
		name, path string
		code       int
		body       string
	}{
		{"match", "/hooks/wa?hub.mode=subscribe&hub.verify_token=vt-123&hub.challenge=1158201444", 200, "1158201444"},
		{"wrong token", "/hooks/wa?hub.mode=subscribe&hub.verify_token=vt-124&hub.challenge=1158201444", 403, ""},
		{"no token", "/hooks/wa?hub.mode=subscribe&hub.challenge=1158201444", 403, ""},
		{"wrong mode", "/hooks/wa?hub.mode=unsubscribe&hub.verify_token=vt-123&hub.challenge=1", 403, ""},
		{"markup challenge", "/hooks/wa?hub.mode=subscribe&hub.verify_token=vt-123&hub.challenge=%3Cscript%3E%20x", 400, ""},
		{"no challenge", "/hooks/wa?hub.mode=subscribe&hub.verify_token=vt-123", 400, ""},
		{"not a meta channel", "/hooks/slack?hub.mode=subscribe&hub.verify_token=vt-123&hub.challenge=1", 405, ""},
		{"unknown channel", "/hooks/nope", 404, ""},
	}
	before := e.events(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.send(t, http.MethodGet, tt.path, nil, "")
			if r.code != tt.code {
				t.Fatalf("got %d %s, want %d", r.code, r.raw, tt.code)
			}
			if tt.body != "" && (string(r.raw) != tt.body || !strings.HasPrefix(r.ctype, "text/plain")) {
				t.Errorf("got %q (%s), want %q as text/plain", r.raw, r.ctype, tt.body)
			}
		})
	}
	if got := e.events(t); got != before {
		t.Errorf("the handshakes stored %d events", got-before)
	}
}

// TestWhatsAppBatchIsOneTransaction: a batch whose second message has no
// id stores neither, and names the message that is wrong.
func TestWhatsAppBatchIsAllOrNothing(t *testing.T) {
	e := newPresetEnv(t)
	body := `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messages":[` +
		`{"from":"1","id":"wamid.OK1","type":"text","text":{"body":"a"}},{"from":"1","id":"","type":"text","text":{"body":"b"}}]}}]}]}`
	r := e.send(t, http.MethodPost, "/hooks/wa", map[string]string{"Content-Type": "application/json", "X-Hub-Signature-256": "sha256=" + hmacHex("a1b2c3d4e5f60718293a4b5c6d7e8f90", body)}, body)
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.raw), "message 2 of the batch") {
		t.Fatalf("got %d %s, want 400 naming message 2", r.code, r.raw)
	}
	if _, err := e.st.EventByKey("wa:wamid.OK1"); err == nil {
		t.Error("the valid first message was stored although its batch was refused")
	}
}

// TestBatchStorm: twelve copies of two overlapping signed WhatsApp batches
// ({A,B} and {B,C}), released together, store A, B and C once each, and
// across every answer each is accepted exactly once.
func TestBatchStorm(t *testing.T) {
	e := newPresetEnv(t)
	batch := func(ids ...string) string {
		var msgs []string
		for _, id := range ids {
			msgs = append(msgs, `{"from":"16505551234","id":"`+id+`","type":"text","text":{"body":"x"}}`)
		}
		return `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messages":[` + strings.Join(msgs, ",") + `]}}]}]}`
	}
	bodies := []string{batch("wamid.A", "wamid.B"), batch("wamid.B", "wamid.C")}
	const copies = 12
	answers := make([]batchAnswer, 2*copies)
	testkit.Together(2*copies, func(i int) {
		body := bodies[i%2]
		r := e.send(t, http.MethodPost, "/hooks/wa", map[string]string{"Content-Type": "application/json", "X-Hub-Signature-256": "sha256=" + hmacHex("a1b2c3d4e5f60718293a4b5c6d7e8f90", body)}, body)
		if r.code != http.StatusOK {
			t.Errorf("got %d %s", r.code, r.raw)
			return
		}
		if err := json.Unmarshal(r.raw, &answers[i]); err != nil {
			t.Error(err)
		}
	})
	accepted := map[string]int{}
	corr := map[string]map[string]bool{}
	for _, a := range answers {
		if len(a.Events) != 2 {
			t.Fatalf("answer lists %d events, want 2: %+v", len(a.Events), a)
		}
		for _, ev := range a.Events {
			if ev.Status == "accepted" {
				accepted[ev.EventKey]++
			}
			if corr[ev.EventKey] == nil {
				corr[ev.EventKey] = map[string]bool{}
			}
			corr[ev.EventKey][ev.CorrelationID] = true
		}
	}
	for _, key := range []string{"wa:wamid.A", "wa:wamid.B", "wa:wamid.C"} {
		if accepted[key] != 1 || len(corr[key]) != 1 {
			t.Errorf("%s: accepted %d times with %d correlation ids, want 1 and 1", key, accepted[key], len(corr[key]))
		}
	}
	if got := e.events(t); got != 3 {
		t.Errorf("stored %d events, want 3", got)
	}
}
