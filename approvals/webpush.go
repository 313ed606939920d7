package approvals

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// Web Push (approvals.webpush): an approver opts in on the queue page (the
// browser's PushManager.subscribe with the install's VAPID public key; the
// service worker is /sw.js), the subscription is stored per person
// (store/webpush.go), and a new draft of a client the person may see is
// pushed to each of their browsers: a title and a body with the customer's
// name and the first words of the draft, and the draft's address, which
// the notification opens. The push offers no action that decides — a push
// is a nudge; deciding stays on the page, behind its session and CSRF.
//
// The payload is encrypted for the browser as RFC 8291 says (aes128gcm:
// an ephemeral P-256 key agreed with the subscription's p256dh, its auth
// secret, HKDF-SHA-256, AES-128-GCM in one record), and the request
// carries a VAPID JWT (RFC 8292, ES256, aud the push service's origin)
// signed with the install's key pair, made once and kept in the store
// (its private key is never rendered or logged). A push service that
// answers 404 or 410 has forgotten the subscription: it is deleted. The
// announce job pushes once per draft: a failure of one browser is logged
// and not retried (a push is a nudge), unless no browser took the push and
// one failure was the service's (429, 5xx, the network): then the job
// tries again later.

func init() { register(ViaWebPush, openWebPush) }

// ViaWebPush is the Web Push surface's name. It announces only: no
// decision is ever made via webpush.
const ViaWebPush = "webpush"

// Web Push's bounds.
const (
	webPushTTL       = 4 * time.Hour // how long a push service keeps a push for an offline browser
	webPushJWTLife   = 12 * time.Hour
	webPushRecord    = 4096
	webPushWords     = 12  // the first words of the draft in the body
	webPushBodyMax   = 140 // characters
	webPushPerPerson = 20  // browsers one person may subscribe
	webPushEndpoint  = 2048
)

// WebPush is the Web Push surface: web's queue page subscribes people
// through it.
type WebPush struct {
	a   *Approvals
	cfg *config.WebPushSurface

	mu   sync.Mutex
	keys *vapidKey // loaded (or made) on first use
}

type vapidKey struct {
	priv *ecdsa.PrivateKey
	pub  []byte // uncompressed, 65 bytes
}

func openWebPush(a *Approvals) (Surface, bool, error) {
	c := a.cfg.Approvals.WebPush
	if c == nil {
		return nil, false, nil
	}
	return &WebPush{a: a, cfg: c}, true, nil
}

// WebPush is the configured Web Push surface; false without one.
func (a *Approvals) WebPush() (*WebPush, bool) {
	s, ok := a.Surface(ViaWebPush)
	if !ok {
		return nil, false
	}
	w, ok := s.(*WebPush)
	return w, ok
}

func (w *WebPush) Name() string { return ViaWebPush }

// Chat is the client itself: a push goes to every browser of each person
// allowed on it.
func (w *WebPush) Chat(client string) (string, bool) { return client, true }

// vapid loads the install's VAPID key pair, making it the first time.
func (w *WebPush) vapid(ctx context.Context) (*vapidKey, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys != nil {
		return w.keys, nil
	}
	k, err := w.a.st.VAPIDKeys(ctx, func() (store.VAPIDKeys, error) {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return store.VAPIDKeys{}, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return store.VAPIDKeys{}, err
		}
		pub, err := priv.PublicKey.ECDH()
		if err != nil {
			return store.VAPIDKeys{}, err
		}
		return store.VAPIDKeys{Private: der, Public: pub.Bytes(), CreatedAt: w.a.Now()}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("web push: the VAPID keys: %w", err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(k.Private)
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if err != nil || !ok || priv.Curve != elliptic.P256() {
		return nil, errors.New("web push: the stored VAPID private key is not a P-256 key")
	}
	w.keys = &vapidKey{priv: priv, pub: k.Public}
	return w.keys, nil
}

// PublicKey is the VAPID public key as the browser's
// applicationServerKey takes it (base64url, uncompressed point).
func (w *WebPush) PublicKey(ctx context.Context) (string, error) {
	k, err := w.vapid(ctx)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(k.pub), nil
}

// browserSubscription is PushSubscription.toJSON().
type browserSubscription struct {
	Endpoint       string   `json:"endpoint"`
	ExpirationTime *float64 `json:"expirationTime"`
	Keys           struct {
		P256DH string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// b64url decodes base64url with or without its padding (browsers send it
// without).
func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(s), "="))
}

// Subscribe stores the subscription raw (PushSubscription.toJSON()) of
// person; bad input is a *Refusal of one sentence.
func (w *WebPush) Subscribe(ctx context.Context, person string, raw []byte) error {
	var b browserSubscription
	if err := json.Unmarshal(raw, &b); err != nil {
		return refuse("The subscription is not a browser's PushSubscription (JSON with endpoint and keys).")
	}
	u, err := url.Parse(b.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || len(b.Endpoint) > webPushEndpoint {
		return refuse("The subscription's endpoint is not an https: address of a push service.")
	}
	if p, err := b64url(b.Keys.P256DH); err != nil || len(p) != 65 {
		return refuse("The subscription's p256dh key is not a P-256 public key in base64url.")
	} else if _, err := ecdh.P256().NewPublicKey(p); err != nil {
		return refuse("The subscription's p256dh key is not a point of P-256.")
	}
	if a, err := b64url(b.Keys.Auth); err != nil || len(a) != 16 {
		return refuse("The subscription's auth secret is not 16 bytes in base64url.")
	}
	now := w.a.Now()
	s := store.WebPushSubscription{User: person, Endpoint: b.Endpoint, P256DH: b.Keys.P256DH, Auth: b.Keys.Auth, CreatedAt: now}
	if b.ExpirationTime != nil && *b.ExpirationTime > 0 {
		s.Expires = time.UnixMilli(int64(*b.ExpirationTime)).UTC()
	}
	return w.a.st.Update(ctx, func(tx *store.Tx) error {
		u, err := tx.User(person)
		if err != nil {
			return refuse("Handoff user %q does not exist.", person)
		}
		s.UserID = u.ID
		mine, err := tx.WebPushSubscriptions(person)
		if err != nil {
			return err
		}
		again := false
		for _, m := range mine {
			again = again || m.Endpoint == s.Endpoint
		}
		if !again && len(mine) >= webPushPerPerson {
			return refuse("You have %d browsers with notifications on; turn them off in one first.", len(mine))
		}
		return tx.PutWebPushSubscription(s)
	})
}

// Unsubscribe deletes person's subscription at endpoint (none: no error).
func (w *WebPush) Unsubscribe(ctx context.Context, person, endpoint string) error {
	return w.a.st.Update(ctx, func(tx *store.Tx) error { return tx.DeleteWebPushSubscription(person, endpoint) })
}

// Subscribed reports how many browsers person has subscribed.
func (w *WebPush) Subscribed(person string) (int, error) {
	subs, err := w.a.st.WebPushSubscriptions(person)
	return len(subs), err
}

// webPushMessage is the push's payload, as the service worker reads it.
type webPushMessage struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	URL   string `json:"url"` // the draft's card, on the dashboard's origin
	Tag   string `json:"tag"` // the draft: a second push of it replaces the first
}

// Post pushes v to every browser of each active person allowed on v's
// client; the ref is "" (a push is not changed once sent).
func (w *WebPush) Post(ctx context.Context, client string, v View) (string, error) {
	keys, err := w.vapid(ctx)
	if err != nil {
		return "", err
	}
	subs, err := w.a.st.WebPushSubscriptions("")
	if err != nil {
		return "", err
	}
	if len(subs) == 0 {
		return "", nil
	}
	users, err := w.a.st.Users()
	if err != nil {
		return "", err
	}
	byName := map[string]store.User{}
	for _, u := range users {
		byName[u.Name] = u
	}
	client = v.ClientName
	if client == "" {
		client = v.Client
	}
	payload, err := json.Marshal(webPushMessage{
		Title: clip("New draft: "+oneLine(v.Customer)+" — "+client, 100),
		Body:  firstWords(v.Text, webPushWords, webPushBodyMax),
		URL:   "/drafts?" + url.Values{"id": {v.Draft.ID}}.Encode(),
		Tag:   "draft-" + v.Draft.ID,
	})
	if err != nil {
		return "", err
	}
	sent, transient := 0, 0
	var lastErr error
	for _, s := range subs {
		u, ok := byName[s.User]
		if ok && s.UserID != "" && u.ID != s.UserID {
			// Subscribed by a person since removed; this one only shares
			// the name: the old browser is forgotten, never pushed.
			if err := w.Unsubscribe(context.WithoutCancel(ctx), s.User, s.Endpoint); err != nil {
				w.a.log.Warn("approvals: web push: delete a removed person's subscription", slog.String("user", s.User), slog.Any("err", err))
			}
			continue
		}
		if !ok || u.Disabled || !Allowed(w.a.cfg, u, v.Channel) {
			continue
		}
		status, err := w.send(ctx, keys, s, payload)
		switch {
		case err == nil && status/100 == 2:
			sent++
		case status == http.StatusNotFound || status == http.StatusGone:
			// The browser unsubscribed, or the service forgot it: gone.
			if err := w.Unsubscribe(context.WithoutCancel(ctx), s.User, s.Endpoint); err != nil {
				w.a.log.Warn("approvals: web push: delete a subscription gone at its push service", slog.String("user", s.User), slog.Any("err", err))
			} else {
				w.a.log.Info("approvals: web push: a subscription its push service no longer has was deleted", slog.String("user", s.User), slog.Int("status", status))
			}
		case err != nil || status == http.StatusTooManyRequests || status >= 500:
			transient++
			lastErr = err
			if err == nil {
				lastErr = fmt.Errorf("HTTP %d", status)
			}
			w.a.log.Warn("approvals: web push: the push service did not take a push", slog.String("user", s.User), slog.Int("status", status), slog.Any("err", err))
		default:
			w.a.log.Warn("approvals: web push: the push service refused a push", slog.String("user", s.User), slog.Int("status", status))
		}
	}
	if sent == 0 && transient > 0 {
		return "", fmt.Errorf("web push: no browser took the push of draft %s: %w", v.Draft.ID, lastErr)
	}
	return "", nil
}

// send encrypts payload for s and posts it to s's push service; the status
// is the service's answer (0 when none came).
func (w *WebPush) send(ctx context.Context, keys *vapidKey, s store.WebPushSubscription, payload []byte) (int, error) {
	p256dh, err1 := b64url(s.P256DH)
	auth, err2 := b64url(s.Auth)
	if err1 != nil || err2 != nil {
		return 0, errors.New("the stored subscription's keys are not base64url")
	}
	body, err := encryptWebPush(p256dh, auth, payload)
	if err != nil {
		return 0, err
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		return 0, errors.New("the stored endpoint is not a URL")
	}
	jwt, err := vapidJWT(keys.priv, u.Scheme+"://"+u.Host, w.cfg.Subject, w.a.Now().Add(webPushJWTLife))
	if err != nil {
		return 0, err
	}
	h := http.Header{
		"Content-Type":     {"application/octet-stream"},
		"Content-Encoding": {"aes128gcm"},
		"Ttl":              {strconv.Itoa(int(webPushTTL / time.Second))},
		"Urgency":          {"high"},
		"Authorization":    {"vapid t=" + jwt + ", k=" + base64.RawURLEncoding.EncodeToString(keys.pub)},
	}
	resp, err := w.a.post(ctx, s.Endpoint, h, body)
	if err != nil {
		return 0, err // its message never spells the endpoint out (post)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// encryptWebPush is RFC 8291's message encryption: one aes128gcm record
// (RFC 8188) whose header carries the salt, the record size and the
// ephemeral public key.
func encryptWebPush(uaPublic, authSecret, plaintext []byte) ([]byte, error) {
	if len(plaintext)+1+16 > webPushRecord {
		return nil, errors.New("web push: the payload is larger than one record")
	}
	as, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	return sealWebPush(uaPublic, authSecret, plaintext, salt, as)
}

// sealWebPush is encryptWebPush with the salt and the ephemeral key given
// (RFC 8291's Appendix A fixes both).
func sealWebPush(uaPublic, authSecret, plaintext, salt []byte, as *ecdh.PrivateKey) ([]byte, error) {
	ua, err := ecdh.P256().NewPublicKey(uaPublic)
	if err != nil {
		return nil, fmt.Errorf("web push: the subscription's p256dh: %w", err)
	}
	shared, err := as.ECDH(ua)
	if err != nil {
		return nil, err
	}
	asPublic := as.PublicKey().Bytes()
	cek, nonce, err := webPushKeys(shared, authSecret, salt, uaPublic, asPublic)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 16+4+1+len(asPublic)+len(plaintext)+17)
	out = append(out, salt...)
	out = binary.BigEndian.AppendUint32(out, webPushRecord)
	out = append(out, byte(len(asPublic)))
	out = append(out, asPublic...)
	record := append(append([]byte(nil), plaintext...), 0x02) // the last record's delimiter, no padding
	return gcm.Seal(out, nonce, record, nil), nil
}

// webPushKeys derives the content encryption key and the nonce (RFC 8291
// section 3.4, RFC 8188 section 2.2).
func webPushKeys(shared, authSecret, salt, uaPublic, asPublic []byte) (cek, nonce []byte, err error) {
	info := append(append([]byte("WebPush: info\x00"), uaPublic...), asPublic...)
	ikm, err := hkdf.Key(sha256.New, shared, authSecret, string(info), 32)
	if err != nil {
		return nil, nil, err
	}
	if cek, err = hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16); err != nil {
		return nil, nil, err
	}
	nonce, err = hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	return cek, nonce, err
}

// vapidJWT is RFC 8292's token: ES256 over {"aud","exp","sub"}.
func vapidJWT(priv *ecdsa.PrivateKey, aud, sub string, exp time.Time) (string, error) {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	claims, err := json.Marshal(map[string]any{"aud": aud, "exp": exp.Unix(), "sub": sub})
	if err != nil {
		return "", err
	}
	signing := head + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, priv, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}

// firstWords is the first n words of s, at most max characters, with an
// ellipsis when something was left out.
func firstWords(s string, n, max int) string {
	words := strings.FieldsFunc(s, unicode.IsSpace)
	cut := len(words) > n
	if cut {
		words = words[:n]
	}
	out := strings.Join(words, " ")
	if r := []rune(out); len(r) > max {
		out, cut = string(r[:max]), true
	}
	if cut {
		out += "…"
	}
	return out
}
