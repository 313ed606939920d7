package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/handoff/handoff/provider/kinds"
)

func init() { register(kinds.Twilio, newTwilio) }

// twilioAPI is Twilio's public REST API.
const twilioAPI = "https://api.twilio.com"

// Twilio sends an SMS (or WhatsApp via Twilio) through the Messages
// resource: a form with To, From, Body and StatusCallback, basic auth with
// the account SID and auth token, the id at "sid".
type Twilio struct {
	apiKind
	url      string
	auth     string // Authorization header; never formatted
	from     string
	callback string
}

// apiKind is what every HTTP API kind shares.
type apiKind struct {
	name  string
	w     *wire
	rate  float64
	burst int
	// window is the clock of the reply window (Deps.Window).
	window func() time.Time
}

func newAPIKind(cfg kinds.Provider, d Deps) apiKind {
	k := apiKind{name: cfg.Name, w: newWire(cfg.Name, cfg.Timeout, d.Now, cfg.Rate, cfg.Burst), rate: cfg.Rate, burst: cfg.Burst, window: d.Window}
	if k.window == nil {
		k.window = k.w.now
	}
	return k
}

// caps: no key, no lookup; receipts where the provider sends them.
func (k apiKind) caps(receipts bool) Capabilities {
	return Capabilities{Timeout: k.w.timeout, Receipts: receipts, Rate: k.rate, Burst: k.burst}
}

// Hold holds a send to the provider's rate.
func (k apiKind) Hold(ref string, now time.Time) time.Duration { return k.w.Hold(ref, now) }

// Lookup: none of these APIs finds a message by our reference.
func (apiKind) Lookup(context.Context, string, string) (string, bool, error) {
	return "", false, ErrNoLookup
}

func base(cfg kinds.Provider, public string) string {
	if cfg.APIBase != "" {
		return cfg.APIBase
	}
	return public
}

func newTwilio(cfg kinds.Provider, d Deps) (Provider, error) {
	if cfg.AccountSID == "" || cfg.AuthToken == "" || cfg.From == "" {
		return nil, errors.New("twilio: account_sid, auth_token_env and from are required")
	}
	t := &Twilio{
		apiKind:  newAPIKind(cfg, d),
		url:      base(cfg, twilioAPI) + "/2010-04-01/Accounts/" + url.PathEscape(cfg.AccountSID) + "/Messages.json",
		auth:     "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.AccountSID+":"+cfg.AuthToken)),
		from:     cfg.From,
		callback: cfg.StatusCallback,
	}
	return t, nil
}

// Capabilities: receipts only; an unknown outcome waits for one.
func (t *Twilio) Capabilities() Capabilities { return t.caps(true) }

// StatusCallbackURL is the callback URL for ref: the configured hook URL
// with ref=<outbox id> added, so a callback names our reference.
func StatusCallbackURL(hook, ref string) string {
	u, err := url.Parse(hook)
	if err != nil {
		return hook
	}
	q := u.Query()
	q.Set("ref", ref)
	u.RawQuery = q.Encode()
	return u.String()
}

// twilioRateLimited are Twilio error codes that mean "not accepted, try
// later": 20429 Too Many Requests, 14107 SMS send rate limit exceeded,
// 30022 (US A2P 10DLC) rate limit exceeded.
var twilioRateLimited = map[int]bool{20429: true, 14107: true, 30022: true}

// Send creates one Message.
func (t *Twilio) Send(ctx context.Context, m Message) (string, error) {
	form := url.Values{"To": {m.To}, "From": {t.from}, "Body": {m.Text}}
	if t.callback != "" {
		form.Set("StatusCallback", StatusCallbackURL(t.callback, m.Ref))
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/x-www-form-urlencoded")
	hdr.Set("Accept", "application/json")
	hdr.Set("Authorization", t.auth)
	a, err := t.w.post(ctx, t.url, hdr, []byte(form.Encode()))
	if err != nil {
		return "", err
	}
	var ans struct {
		Sid     string `json:"sid"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(a.Body, &ans)
	why := reason(coded(ans.Code, ans.Message), a)
	switch c := a.Status; {
	case c == http.StatusCreated || c == http.StatusOK:
		// Twilio created the message: sent, even if the id was lost on
		// the way (the status callback will still name our reference).
		return ans.Sid, nil
	case c == http.StatusTooManyRequests || twilioRateLimited[ans.Code]:
		// Twilio's rate-limit answer: the message was not queued.
		return "", t.w.refused("later", a, t.w.retryAfter(a), why)
	case c >= 500:
		return "", t.w.refused("unknown", a, t.w.retryAfter(a), why)
	case c >= 400:
		// 400 (21211 invalid To, 21610 unsubscribed, 21408 no permission),
		// 401 (20003 bad credentials), 404: refused, nothing queued.
		return "", t.w.refused("permanent", a, 0, why)
	}
	return "", t.w.refused("unknown", a, 0, why)
}
