package hook

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
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

// The signature schemes a channel can name.
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeHMACSHA256       = "hmac-sha256"
	SchemeTwilio           = "twilio"
	SchemeMeta             = "meta"
	SchemeSlack            = "slack"
	SchemeStripe           = "stripe"
	SchemeToken            = "token"
	SchemeBasic            = "basic"
	SchemeMailgun          = "mailgun"
)

// Schemes lists every scheme, in the order the documentation gives them.
var Schemes = []string{SchemeStandardWebhooks, SchemeHMACSHA256, SchemeTwilio, SchemeMeta, SchemeSlack, SchemeStripe, SchemeToken, SchemeBasic, SchemeMailgun}

// Request is what a verifier may look at: the public URL the sender
// called (Twilio signs it), the headers, the raw body and the clock.
type Request struct {
	URL    string // base_url (or the request's own origin) + path + query
	Header http.Header
	Body   []byte
	Now    time.Time
}

// Verifier checks one inbound request's signature. Every error it returns
// is a 401 *Error whose sentence never quotes a secret.
type Verifier interface {
	Verify(r *Request) error
}

// OnceVerifier is a Verifier whose signature carries a value the sender
// signs once and never for another request (Mailgun's token): a request
// whose signature is right may still be a replay, which only a record of
// the values already spent can tell.
type OnceVerifier interface {
	Verifier
	VerifyOnce(r *Request) (Once, error)
}

// Once is a verified request's one-time value: SignedAt is the time signed
// with it, and Keep how long after SignedAt the signature's tolerance still
// accepts it, hence how long it must be remembered.
type Once struct {
	Value    string
	SignedAt time.Time
	Keep     time.Duration
}

// Signing is a channel's configured signature.
type Signing struct {
	Scheme    string
	Secrets   []string      // any of them verifies, for rotation; at least one
	Header    string        // hmac-sha256 and token: the header to read
	Encoding  string        // hmac-sha256: "hex" (default) or "base64"
	Prefix    string        // hmac-sha256: a prefix the header value carries, e.g. "sha256="
	Tolerance time.Duration // standard-webhooks, slack, stripe, mailgun: how far the timestamp may stray; 0: five minutes
}

// SigningError is a setting of a Signing that no verifier can be built
// from: Key names it ("scheme", "header", "encoding" or "secret"), Msg is
// a sentence that can follow the key, and never quotes a secret.
type SigningError struct{ Key, Msg string }

func (e *SigningError) Error() string { return "hook: signature " + e.Key + ": " + e.Msg }

// Check applies every rule NewVerifier builds by, in one place, so that
// config refuses at start exactly what the webhooks could not verify
// with: a known scheme, the header the scheme reads, the encoding, at
// least one secret, none empty, each of the scheme's form. The error is a
// *SigningError.
func (s Signing) Check() error {
	bad := func(key, format string, args ...any) error {
		return &SigningError{Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if !slices.Contains(Schemes, s.Scheme) {
		return bad("scheme", "%q is not a signature scheme", s.Scheme)
	}
	switch s.Scheme {
	case SchemeHMACSHA256:
		if s.Header == "" {
			return bad("header", "missing; hmac-sha256 needs the name of the header that carries the signature")
		}
		if s.Encoding != "" && s.Encoding != "hex" && s.Encoding != "base64" {
			return bad("encoding", "%q is neither hex nor base64", s.Encoding)
		}
	case SchemeToken:
		if s.Header == "" {
			return bad("header", "missing; token needs the name of the header that carries the shared token")
		}
	}
	if len(s.Secrets) == 0 {
		return bad("secret", "missing; a signature needs at least one secret")
	}
	for _, secret := range s.Secrets {
		switch {
		case secret == "":
			return bad("secret", "is empty")
		case s.Scheme == SchemeStandardWebhooks:
			if err := webhook.ValidateSecret(secret); err != nil {
				return bad("secret", "%v", err)
			}
		case s.Scheme == SchemeBasic && !strings.Contains(secret, ":"):
			return bad("secret", `a basic secret is "user:password" (the credentials the sender puts in its URL)`)
		}
	}
	return nil
}

// NewVerifier builds the verifier of s, or says why it cannot (Check).
func NewVerifier(s Signing) (Verifier, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	tol := s.Tolerance
	if tol <= 0 {
		tol = webhook.DefaultTolerance
	}
	keys := make([][]byte, len(s.Secrets))
	for i, secret := range s.Secrets {
		keys[i] = []byte(secret)
	}
	switch s.Scheme {
	case SchemeStandardWebhooks:
		v, err := webhook.NewMultiVerifier(s.Secrets, tol)
		if err != nil {
			return nil, err
		}
		return standardWebhooks{v: v}, nil
	case SchemeHMACSHA256:
		enc := s.Encoding
		if enc == "" {
			enc = "hex"
		}
		return &bodyHMAC{keys: keys, header: http.CanonicalHeaderKey(s.Header), encoding: enc, prefix: s.Prefix, legacyPrefix: s.Prefix == "" && enc == "hex"}, nil
	case SchemeMeta:
		return &bodyHMAC{keys: keys, header: "X-Hub-Signature-256", encoding: "hex", prefix: "sha256="}, nil
	case SchemeTwilio:
		return &twilio{keys: keys}, nil
	case SchemeSlack:
		return &slack{keys: keys, tolerance: tol}, nil
	case SchemeStripe:
		return &stripe{keys: keys, tolerance: tol}, nil
	case SchemeToken:
		return &token{keys: keys, header: http.CanonicalHeaderKey(s.Header)}, nil
	case SchemeBasic:
		return &basic{keys: keys}, nil
	case SchemeMailgun:
		return &mailgun{keys: keys, tolerance: tol}, nil
	}
	return nil, fmt.Errorf("hook: unknown signature scheme %q", s.Scheme)
}

// SignsHeader reports whether a request header (any case) is covered by
// scheme's signature, so that config can refuse a field read from a header a
// replayed request could change at will.
func SignsHeader(scheme, name string) bool {
	switch scheme {
	case SchemeStandardWebhooks:
		return webhook.Signs(name)
	case SchemeSlack:
		return http.CanonicalHeaderKey(name) == "X-Slack-Request-Timestamp"
	}
	return false
}

// SignsBody reports whether scheme's signature covers the request's body,
// so that config can refuse auto_approve where one captured credential
// (a Mailgun signature, a password, a shared token) would let anyone
// choose the message, hence the reply sent without a person.
func SignsBody(scheme string) bool {
	switch scheme {
	case SchemeMailgun, SchemeBasic, SchemeToken:
		return false
	}
	return true
}

// NeedsTolerance reports whether scheme signs a timestamp, so that a
// tolerance means something.
func NeedsTolerance(scheme string) bool {
	switch scheme {
	case SchemeStandardWebhooks, SchemeSlack, SchemeStripe, SchemeMailgun:
		return true
	}
	return false
}

// equalAny compares got with each want in constant time for equal lengths;
// the lengths are fixed by the algorithm, not secret.
func equalAny(got []byte, wants [][]byte) bool {
	ok := false
	for _, w := range wants {
		if hmac.Equal(got, w) {
			ok = true
		}
	}
	return ok
}

func macs(keys [][]byte, h func() hash.Hash, parts ...[]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		m := hmac.New(h, k)
		for _, p := range parts {
			m.Write(p)
		}
		out[i] = m.Sum(nil)
	}
	return out
}

// checkTime is webhook's timestamp rule (webhook.CheckTimestamp), its
// refusal answered as a 401.
func checkTime(ts string, now time.Time, tol time.Duration, what string) error {
	if err := webhook.CheckTimestamp(ts, what, now, tol); err != nil {
		return unauthorized("%s", err.Error())
	}
	return nil
}

var errNoMatch = unauthorized("the signature does not match")

// standardWebhooks answers webhook's refusals as 401s.
type standardWebhooks struct{ v *webhook.Verifier }

// NewStandardWebhooks returns a Standard Webhooks verifier (webhook-* or
// svix-* headers); a non-positive tolerance means five minutes.
func NewStandardWebhooks(secret string, tolerance time.Duration) (Verifier, error) {
	return NewVerifier(Signing{Scheme: SchemeStandardWebhooks, Secrets: []string{secret}, Tolerance: tolerance})
}

// Verify passes webhook's sentence on to the sender.
func (sw standardWebhooks) Verify(r *Request) error {
	err := sw.v.Verify(r.Header, r.Body, r.Now)
	var ve *webhook.VerifyError
	if errors.As(err, &ve) {
		return unauthorized("%s", ve.Reason)
	}
	return err
}

// bodyHMAC verifies an HMAC-SHA256 of the raw body in one header, hex or
// base64, after an optional prefix: GitHub and Meta (sha256=<hex>),
// Typeform (sha256=<base64>), Shopify (<base64>). It has no replay
// protection; the dedup key makes a replay a duplicate.
type bodyHMAC struct {
	keys     [][]byte
	header   string
	encoding string
	prefix   string
	// legacyPrefix: no prefix configured on a hex channel, so an optional
	// "sha256=" is accepted, as before prefixes could be configured.
	legacyPrefix bool
}

// NewHMACSHA256 returns a verifier for the hex HMAC-SHA256 of the body in
// header, with an optional "sha256=" prefix.
func NewHMACSHA256(secret []byte, header string) Verifier {
	return &bodyHMAC{keys: [][]byte{slices.Clone(secret)}, header: http.CanonicalHeaderKey(header), encoding: "hex", legacyPrefix: true}
}

func (h *bodyHMAC) Verify(r *Request) error {
	v := strings.TrimSpace(r.Header.Get(h.header))
	if v == "" {
		return unauthorized("the %s header is missing", h.header)
	}
	switch {
	case h.prefix != "":
		if len(v) < len(h.prefix) || !strings.EqualFold(v[:len(h.prefix)], h.prefix) {
			return unauthorized("the %s header does not start with %q", h.header, h.prefix)
		}
		v = v[len(h.prefix):]
	case h.legacyPrefix && len(v) > len("sha256=") && strings.EqualFold(v[:len("sha256=")], "sha256="):
		v = v[len("sha256="):]
	}
	var got []byte
	var err error
	if h.encoding == "base64" {
		got, err = base64.StdEncoding.DecodeString(v)
	} else {
		got, err = hex.DecodeString(v)
	}
	if err != nil || len(got) != sha256.Size {
		return unauthorized("the %s header is not a %s HMAC-SHA256", h.header, h.encoding)
	}
	if !equalAny(got, macs(h.keys, sha256.New, r.Body)) {
		return errNoMatch
	}
	return nil
}

// twilio verifies X-Twilio-Signature: the base64 HMAC-SHA1 (or SHA-256
// when X-Twilio-Webhooks-Signature-Settings says algorithm=HMAC_SHA256) of
// the full URL followed, for a form body, by every parameter name and value
// in name order. A JSON body is covered by the bodySHA256 query parameter,
// which is part of the signed URL. The URL is tried with and without the
// scheme's default port, as Twilio's own libraries do.
type twilio struct{ keys [][]byte }

func (tw *twilio) Verify(r *Request) error {
	sig := strings.TrimSpace(r.Header.Get("X-Twilio-Signature"))
	if sig == "" {
		return unauthorized("the X-Twilio-Signature header is missing")
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return unauthorized("the X-Twilio-Signature header is not base64")
	}
	h, size := sha1.New, sha1.Size
	if strings.Contains(strings.ToUpper(r.Header.Get("X-Twilio-Webhooks-Signature-Settings")), "ALGORITHM=HMAC_SHA256") {
		h, size = sha256.New, sha256.Size
	}
	if len(got) != size {
		return unauthorized("the X-Twilio-Signature header is not an HMAC of the expected size")
	}
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" {
		return unauthorized("the request URL cannot be rebuilt to check the Twilio signature")
	}
	var params string
	if bodyHash := u.Query().Get("bodySHA256"); bodyHash != "" {
		sum := sha256.Sum256(r.Body)
		if subtle.ConstantTimeCompare([]byte(strings.ToLower(bodyHash)), []byte(hex.EncodeToString(sum[:]))) != 1 {
			return unauthorized("the bodySHA256 query parameter does not match the body")
		}
	} else if mt, _ := mediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return unauthorized("the body is not valid form data, so its Twilio signature cannot be checked")
		}
		params = twilioParams(form)
	} else if len(r.Body) > 0 {
		return unauthorized("a Twilio request with a body that is not a form must carry bodySHA256 in its URL")
	}
	for _, candidate := range portVariants(r.URL, u) {
		if equalAny(got, macs(tw.keys, h, []byte(candidate), []byte(params))) {
			return nil
		}
	}
	return errNoMatch
}

// twilioParams concatenates name and value of every parameter, names
// sorted, a repeated name's distinct values sorted, as Twilio signs them.
func twilioParams(form url.Values) string {
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		vs := slices.Clone(form[k])
		slices.Sort(vs)
		vs = slices.Compact(vs)
		for _, v := range vs {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return b.String()
}

// portVariants returns raw as given, and with the default port of its
// scheme added or removed.
func portVariants(raw string, u *url.URL) []string {
	out := []string{raw}
	prefix := u.Scheme + "://"
	if u.User != nil {
		prefix += u.User.String() + "@"
	}
	def := map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
	if def == "" {
		return out
	}
	rest := raw[strings.Index(raw, "://")+3:]
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[i:]
	} else {
		rest = ""
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if u.Port() == "" {
		out = append(out, prefix+host+":"+def+rest)
	} else if u.Port() == def {
		out = append(out, prefix+host+rest)
	}
	return out
}

// slack verifies X-Slack-Signature: v0=<hex HMAC-SHA256 of
// "v0:<X-Slack-Request-Timestamp>:<body>">.
type slack struct {
	keys      [][]byte
	tolerance time.Duration
}

func (s *slack) Verify(r *Request) error {
	sig := strings.TrimSpace(r.Header.Get("X-Slack-Signature"))
	if sig == "" {
		return unauthorized("the X-Slack-Signature header is missing")
	}
	ts := strings.TrimSpace(r.Header.Get("X-Slack-Request-Timestamp"))
	if ts == "" {
		return unauthorized("the X-Slack-Request-Timestamp header is missing")
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return unauthorized("the X-Slack-Signature header is not a v0 signature")
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return unauthorized("the X-Slack-Signature header is not a hex HMAC-SHA256")
	}
	if err := checkTime(ts, r.Now, s.tolerance, "X-Slack-Request-Timestamp"); err != nil {
		return err
	}
	if !equalAny(got, macs(s.keys, sha256.New, []byte("v0:"+ts+":"), r.Body)) {
		return errNoMatch
	}
	return nil
}

// stripe verifies Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">, with as many v1 entries as the sender has secrets.
type stripe struct {
	keys      [][]byte
	tolerance time.Duration
}

// parseStripeHeader splits a Stripe-Signature value into its timestamp
// and its v1 signatures; other schemes (v0) are skipped.
func parseStripeHeader(v string) (ts string, sigs [][]byte, err error) {
	for _, item := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return "", nil, unauthorized("the Stripe-Signature header is not a list of key=value pairs")
		}
		switch k {
		case "t":
			if ts != "" {
				return "", nil, unauthorized("the Stripe-Signature header has more than one timestamp")
			}
			ts = val
		case "v1":
			b, err := hex.DecodeString(val)
			if err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	switch {
	case ts == "":
		return "", nil, unauthorized("the Stripe-Signature header has no timestamp (t=)")
	case len(sigs) == 0:
		return "", nil, unauthorized("the Stripe-Signature header has no v1 signature")
	}
	return ts, sigs, nil
}

func (s *stripe) Verify(r *Request) error {
	v := strings.TrimSpace(r.Header.Get("Stripe-Signature"))
	if v == "" {
		return unauthorized("the Stripe-Signature header is missing")
	}
	ts, sigs, err := parseStripeHeader(v)
	if err != nil {
		return err
	}
	if err := checkTime(ts, r.Now, s.tolerance, "Stripe-Signature timestamp"); err != nil {
		return err
	}
	wants := macs(s.keys, sha256.New, []byte(ts+"."), r.Body)
	ok := false
	for _, sig := range sigs {
		if equalAny(sig, wants) {
			ok = true
		}
	}
	if !ok {
		return errNoMatch
	}
	return nil
}

// token compares a header with the secret, as Telegram's
// X-Telegram-Bot-Api-Secret-Token carries the secret_token given to
// setWebhook. Digests are compared so that not even the length leaks.
type token struct {
	keys   [][]byte
	header string
}

func (t *token) Verify(r *Request) error {
	vs := r.Header.Values(t.header)
	if len(vs) == 0 || vs[0] == "" {
		return unauthorized("the %s header is missing", t.header)
	}
	if !equalDigest([]byte(vs[0]), t.keys) {
		return unauthorized("the %s header does not match", t.header)
	}
	return nil
}

func equalDigest(got []byte, keys [][]byte) bool {
	g := sha256.Sum256(got)
	ok := false
	for _, k := range keys {
		w := sha256.Sum256(k)
		if subtle.ConstantTimeCompare(g[:], w[:]) == 1 {
			ok = true
		}
	}
	return ok
}

// basic checks HTTP basic authentication (Postmark, or any sender whose URL
// can carry user:password@); each secret is "user:password".
type basic struct{ keys [][]byte }

func (b *basic) Verify(r *Request) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return unauthorized("the Authorization header is missing")
	}
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return unauthorized("the Authorization header is not Basic credentials")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return unauthorized("the Authorization header is not Basic credentials")
	}
	if !equalDigest(raw, b.keys) {
		return unauthorized("the user name or password does not match")
	}
	return nil
}

// mailgun verifies the signature Mailgun puts inside the body: the hex
// HMAC-SHA256, with the webhook signing key, of timestamp followed by token.
// Routes send them as form fields; event webhooks as a JSON "signature"
// object. The timestamp is held to the tolerance, as Mailgun's docs ask,
// so a captured request cannot be replayed later.
type mailgun struct {
	keys      [][]byte
	tolerance time.Duration
}

func (m *mailgun) Verify(r *Request) error {
	_, err := m.VerifyOnce(r)
	return err
}

// VerifyOnce verifies r and returns its token, which Mailgun signs once:
// the receiver refuses a token it has seen before, as Mailgun's docs ask,
// since the signature covers the timestamp and token but not the message.
func (m *mailgun) VerifyOnce(r *Request) (Once, error) {
	p, err := Parse(r.Header.Get("Content-Type"), r.Body, nil)
	if err != nil {
		return Once{}, unauthorized("the body cannot be read, so its Mailgun signature cannot be checked")
	}
	prefix := ""
	if p.IsJSON() {
		prefix = "/signature"
	}
	read := func(name string) string {
		v, _, _ := p.Field(prefix + "/" + name)
		return v
	}
	ts, tok, sig := read("timestamp"), read("token"), read("signature")
	if ts == "" || tok == "" || sig == "" {
		return Once{}, unauthorized("the Mailgun signature fields (timestamp, token, signature) are missing")
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return Once{}, unauthorized("the Mailgun signature is not a hex HMAC-SHA256")
	}
	if err := checkTime(ts, r.Now, m.tolerance, "Mailgun timestamp"); err != nil {
		return Once{}, err
	}
	if !equalAny(got, macs(m.keys, sha256.New, []byte(ts), []byte(tok))) {
		return Once{}, errNoMatch
	}
	sec, _ := strconv.ParseInt(ts, 10, 64) // checkTime parsed it
	return Once{Value: tok, SignedAt: time.Unix(sec, 0).UTC(), Keep: m.tolerance}, nil
}
