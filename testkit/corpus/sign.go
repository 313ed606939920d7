package corpus

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/webhook"
)

// secrets are the signing secrets of ChannelsYAML's channels, one per
// preset, in the form its scheme takes (the same as hook/testdata/vectors.json's).
var secrets = map[string]string{
	"twilio":    "12345678901234567890123456789012",
	"whatsapp":  "a1b2c3d4e5f60718293a4b5c6d7e8f90",
	"messenger": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
	"instagram": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
	"slack":     "8f742231b10e8888abcd99yyyzzz85a5",
	"telegram":  "tg-secret_Token-123",
	"sendgrid":  "sendgrid:parse-pass-1",
	"mailgun":   "key-3ax6xnjp29jd6fds4gc373sgvjxteol0",
	"postmark":  "postmark:pm-pass-1",
	"typeform":  "typeform-secret-abc",
	"generic":   "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // standard-webhooks
	Demo:        "",                                       // unsigned
}

// Secret is the signing secret of preset's channel in ChannelsYAML.
func Secret(preset string) string { return secrets[preset] }

// Channel is the name ChannelsYAML gives preset's channel ("demo" for Demo).
func Channel(preset string) string {
	if preset == Demo {
		return "demo"
	}
	return "c-" + preset
}

// ChannelsYAML is one channel per preset (Demo excluded: each test
// configures its demo channel itself), as items of a channels: list
// indented by two spaces, each signed with Secret.
func ChannelsYAML() string {
	var b strings.Builder
	for _, p := range Presets() {
		switch p {
		case Demo:
		case "generic":
			fmt.Fprintf(&b, "  - name: %s\n    preset: generic\n    signature: {scheme: standard-webhooks, secret: %q}\n"+
				"    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}\n", Channel(p), Secret(p))
		default:
			fmt.Fprintf(&b, "  - {name: %s, preset: %s, signature: {secret: %q}}\n", Channel(p), p, Secret(p))
		}
	}
	return b.String()
}

// Signed returns the headers (Content-Type among them) and the body a
// provider sends for b at now to publicURL (the URL the provider was
// given: the channel's base_url and /hooks/{channel}), signed with
// Secret(b.Preset) by the provider's scheme. Only a mailgun body changes:
// its signature is inside it. It signs the way each provider documents,
// not through hook's verifiers, so a verifier that drifted fails.
func (b Body) Signed(publicURL string, now time.Time) (http.Header, []byte) {
	h := http.Header{}
	h.Set("Content-Type", b.ContentType)
	body := b.Raw
	secret := Secret(b.Preset)
	ts := strconv.FormatInt(now.Unix(), 10)
	switch b.Preset {
	case "twilio":
		params := ""
		form, _ := url.ParseQuery(string(body))
		keys := make([]string, 0, len(form))
		for k := range form {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, v := range form[k] {
				params += k + v
			}
		}
		h.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(mac(sha1.New, secret, publicURL+params)))
	case "whatsapp", "messenger", "instagram":
		h.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, string(body)))
	case "slack":
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", "v0="+hmacHex(secret, "v0:"+ts+":"+string(body)))
	case "telegram":
		h.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	case "sendgrid", "postmark":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(secret)))
	case "mailgun":
		body = b.render(now.Unix())
	case "typeform":
		h.Set("Typeform-Signature", "sha256="+base64.StdEncoding.EncodeToString(mac(sha256.New, secret, string(body))))
	case "generic":
		id := "msg_" + strings.NewReplacer("/", "_").Replace(b.Name())
		sig, err := webhook.Sign(secret, id, now, body)
		if err != nil {
			panic(err)
		}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", sig)
	}
	return h, body
}

func mac(h func() hash.Hash, key, msg string) []byte {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func hmacHex(key, msg string) string { return hex.EncodeToString(mac(sha256.New, key, msg)) }
