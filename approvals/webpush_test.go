package approvals

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

func unb64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("base64url %q: %v", s, err)
	}
	return b
}

// decryptWebPush is the browser's side of RFC 8291, written apart from
// handoff's: the aes128gcm header, ECDH with the browser's private key,
// the HKDF steps and the record's delimiter.
func decryptWebPush(ua *ecdh.PrivateKey, authSecret, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, fmt.Errorf("body of %d bytes has no aes128gcm header", len(body))
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("keyid of %d bytes, want the 65-byte sender key", idlen)
	}
	asPub, ct := body[21:21+idlen], body[21+idlen:]
	if uint32(len(ct)) > rs {
		return nil, fmt.Errorf("a record of %d bytes in a record size of %d: one record expected", len(ct), rs)
	}
	as, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, err
	}
	shared, err := ua.ECDH(as)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...), asPub...)
	ikm, _ := hkdf.Key(sha256.New, shared, authSecret, string(info), 32)
	cek, _ := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	nonce, _ := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("AES-GCM: %w", err)
	}
	plain = bytes.TrimRight(plain, "\x00") // padding
	if len(plain) == 0 || plain[len(plain)-1] != 0x02 {
		return nil, fmt.Errorf("the record does not end with the last record's delimiter 0x02")
	}
	return plain[:len(plain)-1], nil
}

// rfc8291 is RFC 8291's Appendix A.
var rfc8291 = struct{ plaintext, asPrivate, uaPrivate, uaPublic, auth, salt, body string }{
	plaintext: "When I grow up, I want to be a watermelon",
	asPrivate: "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw",
	uaPrivate: "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94",
	uaPublic:  "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
	auth:      "BTBZMqHH6r4Tts7J_aSIgg",
	salt:      "DGv6ra1nlYgDCS1FRnbzlw",
	body:      "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
}

// TestWebPushRFC8291: handoff's encryption gives the RFC's bytes for the
// RFC's keys and salt, and the test's decryption (the stand-in's) reads
// the RFC's message: both sides are the RFC's, not merely each other's.
func TestWebPushRFC8291(t *testing.T) {
	v := rfc8291
	as, err := ecdh.P256().NewPrivateKey(unb64(t, v.asPrivate))
	if err != nil {
		t.Fatal(err)
	}
	got, err := sealWebPush(unb64(t, v.uaPublic), unb64(t, v.auth), []byte(v.plaintext), unb64(t, v.salt), as)
	if err != nil {
		t.Fatal(err)
	}
	if want := unb64(t, v.body); !bytes.Equal(got, want) {
		t.Fatalf("sealWebPush of RFC 8291's example:\n got %x\nwant %x", got, want)
	}
	ua, err := ecdh.P256().NewPrivateKey(unb64(t, v.uaPrivate))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := decryptWebPush(ua, unb64(t, v.auth), unb64(t, v.body))
	if err != nil || string(plain) != v.plaintext {
		t.Fatalf("decrypt of the RFC's message = %q, %v", plain, err)
	}
}

// testBrowser is a browser's push subscription: its P-256 key pair and
// auth secret, made as a browser makes them.
type testBrowser struct {
	key      *ecdh.PrivateKey
	auth     []byte
	endpoint string
}

func newTestBrowser(t *testing.T, endpoint string) *testBrowser {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return &testBrowser{key: k, auth: auth, endpoint: endpoint}
}

// json is PushSubscription.toJSON() of b.
func (b *testBrowser) json() []byte {
	raw, _ := json.Marshal(map[string]any{"endpoint": b.endpoint, "expirationTime": nil, "keys": map[string]string{
		"p256dh": base64.RawURLEncoding.EncodeToString(b.key.PublicKey().Bytes()), "auth": base64.RawURLEncoding.EncodeToString(b.auth)}})
	return raw
}

// pushService is a stand-in push service over real HTTPS: it records each
// push and answers with the status set for its path (201 by default).
type pushService struct {
	*httptest.Server
	mu     sync.Mutex
	status map[string]int
	got    map[string][]pushRequest
}

type pushRequest struct {
	header http.Header
	body   []byte
}

func newPushService(t *testing.T) *pushService {
	p := &pushService{status: map[string]int{}, got: map[string][]pushRequest{}}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		p.got[r.URL.Path] = append(p.got[r.URL.Path], pushRequest{header: r.Header.Clone(), body: body})
		st := p.status[r.URL.Path]
		if st == 0 {
			st = http.StatusCreated
		}
		w.WriteHeader(st)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *pushService) pushes(path string) []pushRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pushRequest(nil), p.got[path]...)
}

func (p *pushService) set(path string, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status[path] = status
}

// checkVAPID verifies r's Authorization as RFC 8292 says: "vapid t=<JWT>,
// k=<key>", the JWT ES256-signed by k, aud the push service's origin, sub
// the configured subject, exp after now and within a day; k is the key
// the page subscribes with.
func checkVAPID(t *testing.T, r pushRequest, origin, subject, pageKey string, now time.Time) {
	t.Helper()
	auth := r.header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "vapid ")
	if !ok {
		t.Fatalf("Authorization %q is not vapid", auth)
	}
	params := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		params[k] = v
	}
	if params["k"] != pageKey {
		t.Errorf("the VAPID k is not the key the page subscribes with")
	}
	parts := strings.Split(params["t"], ".")
	if len(parts) != 3 {
		t.Fatalf("the JWT has %d parts", len(parts))
	}
	var head struct{ Typ, Alg string }
	json.Unmarshal(unb64(t, parts[0]), &head)
	if head.Alg != "ES256" {
		t.Errorf("JWT alg %q, want ES256", head.Alg)
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(unb64(t, parts[1]), &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Aud != origin || claims.Sub != subject {
		t.Errorf("JWT claims aud %q sub %q, want %q %q", claims.Aud, claims.Sub, origin, subject)
	}
	if exp := time.Unix(claims.Exp, 0); !exp.After(now) || exp.After(now.Add(24*time.Hour)) {
		t.Errorf("JWT exp %s: RFC 8292 wants it after now (%s) and within 24 hours", exp, now)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), unb64(t, params["k"]))
	if err != nil {
		t.Fatalf("k is not a P-256 key: %v", err)
	}
	sig := unb64(t, parts[2])
	if len(sig) != 64 {
		t.Fatalf("ES256 signature of %d bytes, want 64", len(sig))
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		t.Error("the JWT's ES256 signature does not verify with k")
	}
	if r.header.Get("Content-Encoding") != "aes128gcm" || r.header.Get("Ttl") == "" {
		t.Errorf("headers Content-Encoding %q TTL %q", r.header.Get("Content-Encoding"), r.header.Get("Ttl"))
	}
}

// pendingNamed records a message from name on channel and saves draft text.
func (f *fixture) pendingNamed(t *testing.T, channel, key, name, text string) store.Draft {
	t.Helper()
	ev := store.Event{
		ID: ulid.Make().String(), Key: channel + ":" + key, Channel: channel, MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "ada@example.com", Name: name, Text: "hello from " + key, ReceivedAt: t0,
	}
	if _, err := leads.RecordEvent(context.Background(), f.st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	d, _, err := review.New(f.st, f.cfg).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: channel, ConversationID: ev.ConversationID,
		Text: text, Drafter: "template", CreatedAt: t0,
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWebPush: browsers of dana (acme), bea (beta), root (admin) and a
// disabled person subscribe; each corpus text's draft for acme is pushed
// to dana's and root's browsers only — encrypted for each browser (the
// stand-in decrypts it with the browser's private key) and signed with
// VAPID (the stand-in verifies the ES256 JWT) — with the customer's name,
// the draft's first words and the draft's address, and no action; the
// subscription the service answers 410 for is deleted; bea and the
// disabled person get nothing.
func TestWebPush(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	push := newPushService(t)
	const subject = "mailto:ops@handoff.test"
	f.cfg.Approvals.WebPush = &config.WebPushSurface{Subject: subject}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now, HTTP: push.Client()})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	w, ok := a.WebPush()
	if !ok {
		t.Fatal("no web push surface")
	}
	pageKey, err := w.PublicKey(ctx)
	if err != nil || len(unb64(t, pageKey)) != 65 {
		t.Fatalf("PublicKey = %q, %v", pageKey, err)
	}
	// The keys are made once and kept: a new process reads the same.
	a2, _ := New(f.st, f.cfg, Options{Now: f.clock.Now})
	if w2, _ := a2.WebPush(); w2 == nil {
		t.Fatal("no web push surface in the second process")
	} else if k2, _ := w2.PublicKey(ctx); k2 != pageKey {
		t.Fatal("a second process has another VAPID key")
	}

	browsers := map[string]*testBrowser{}
	for _, sub := range []struct{ user, path string }{
		{"dana", "/wpush/dana-laptop"}, {"dana", "/wpush/dana-old"}, {"bea", "/wpush/bea"}, {"root", "/wpush/root"}, {"gone", "/wpush/gone"},
	} {
		b := newTestBrowser(t, push.URL+sub.path)
		browsers[sub.path] = b
		if err := w.Subscribe(ctx, sub.user, b.json()); err != nil {
			t.Fatalf("Subscribe(%s): %v", sub.user, err)
		}
	}
	push.set("/wpush/dana-old", http.StatusGone)

	type sent struct {
		draft store.Draft
		name  string
	}
	var drafts []sent
	for i, tx := range corpus.Texts() {
		d := f.pendingNamed(t, "web", fmt.Sprint("m", i), tx.From, tx.Body)
		drafts = append(drafts, sent{d, tx.From})
	}
	f.pendingNamed(t, "shop", "b1", "Bob", "A draft for beta: bea's, not dana's.")
	if err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)

	origin := push.URL
	for _, path := range []string{"/wpush/dana-laptop", "/wpush/root"} {
		got := push.pushes(path)
		if path == "/wpush/root" {
			// root is an admin: acme's drafts and beta's.
			if len(got) != len(drafts)+1 {
				t.Fatalf("%s got %d pushes, want %d", path, len(got), len(drafts)+1)
			}
		} else if len(got) != len(drafts) {
			t.Fatalf("%s got %d pushes, want %d (one per acme draft)", path, len(got), len(drafts))
		}
		byURL := map[string]webPushMessage{}
		for _, r := range got {
			checkVAPID(t, r, origin, subject, pageKey, f.clock.Now())
			plain, err := decryptWebPush(browsers[path].key, browsers[path].auth, r.body)
			if err != nil {
				t.Fatalf("%s: the push does not decrypt with the browser's key: %v", path, err)
			}
			var m map[string]any
			if err := json.Unmarshal(plain, &m); err != nil {
				t.Fatalf("%s: the payload %q is not JSON", path, plain)
			}
			for k := range m {
				if k != "title" && k != "body" && k != "url" && k != "tag" {
					t.Errorf("%s: the payload has %q: a push offers nothing but its text and the card's address", path, k)
				}
			}
			var msg webPushMessage
			json.Unmarshal(plain, &msg)
			byURL[msg.URL] = msg
		}
		for _, s := range drafts {
			msg, ok := byURL["/drafts?"+url.Values{"id": {s.draft.ID}}.Encode()]
			if !ok {
				t.Fatalf("%s: no push opens draft %s", path, s.draft.ID)
			}
			if !strings.Contains(msg.Title, oneLine(s.name)) || !strings.Contains(msg.Title, "Acme") {
				t.Errorf("%s: title %q, want the customer %q and the client", path, msg.Title, s.name)
			}
			if want := firstWords(s.draft.Text, webPushWords, webPushBodyMax); msg.Body != want || msg.Body == "" {
				t.Errorf("%s: body %q, want the draft's first words %q", path, msg.Body, want)
			}
			if len([]rune(msg.Body)) > webPushBodyMax+1 {
				t.Errorf("%s: body of %d characters", path, len([]rune(msg.Body)))
			}
		}
	}
	if n := len(push.pushes("/wpush/dana-old")); n == 0 {
		t.Fatal("the subscription answered 410 was never pushed")
	}
	if n := len(push.pushes("/wpush/bea")); n != 1 {
		t.Errorf("bea (beta) got %d pushes, want 1: beta's draft only, none of acme's", n)
	}
	if n := len(push.pushes("/wpush/gone")); n != 0 {
		t.Errorf("a disabled person got %d pushes", n)
	}
	subs, err := f.st.WebPushSubscriptions("dana")
	if err != nil || len(subs) != 1 || subs[0].Endpoint != push.URL+"/wpush/dana-laptop" {
		t.Fatalf("dana's subscriptions after the 410 = %+v, %v; want the laptop's alone", subs, err)
	}
	// One push per draft: a further sweep pushes nothing again.
	before := len(push.pushes("/wpush/dana-laptop"))
	if err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	if n := len(push.pushes("/wpush/dana-laptop")); n != before {
		t.Errorf("a second sweep pushed %d more", n-before)
	}

	// A push service that is down for every browser: the announce fails,
	// so its job tries again later; once it is back the push goes out.
	push.set("/wpush/dana-laptop", http.StatusServiceUnavailable)
	push.set("/wpush/root", http.StatusTooManyRequests)
	late := f.pendingNamed(t, "web", "late", "Zoë", "Late 🐟 & <b>chips</b>")
	v := View{Draft: late, Client: "acme", ClientName: "Acme", Channel: "web", Customer: "Zoë", Text: late.Text, State: Waiting}
	if _, err := w.Post(ctx, "acme", v); err == nil {
		t.Fatal("a push no browser took returned no error: the job would not try again")
	} else if strings.Contains(err.Error(), push.URL) || strings.Contains(err.Error(), "wpush") {
		t.Errorf("the error spells out an endpoint: %v", err)
	}
	push.set("/wpush/dana-laptop", http.StatusCreated)
	if _, err := w.Post(ctx, "acme", v); err != nil {
		t.Fatalf("with one browser's service back: %v", err)
	}
}

// TestWebPushSubscribe: a subscription that is not a browser's is refused
// in one sentence and nothing is stored; unsubscribing deletes it.
func TestWebPushSubscribe(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.cfg.Approvals.WebPush = &config.WebPushSurface{Subject: "mailto:ops@handoff.test"}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := a.WebPush()
	good := newTestBrowser(t, "https://push.example/wpush/1")
	p256dh := base64.RawURLEncoding.EncodeToString(good.key.PublicKey().Bytes())
	auth := base64.RawURLEncoding.EncodeToString(good.auth)
	for _, c := range []struct{ body, want string }{
		{`not json`, "is not a browser's PushSubscription"},
		{`{"endpoint":"http://push.example/x","keys":{"p256dh":"` + p256dh + `","auth":"` + auth + `"}}`, "is not an https: address"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"AAAA","auth":"` + auth + `"}}`, "p256dh key is not a P-256 public key"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"B` + strings.Repeat("A", 86) + `","auth":"` + auth + `"}}`, "not a point of P-256"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p256dh + `","auth":"c2hvcnQ"}}`, "auth secret is not 16 bytes"},
	} {
		err := w.Subscribe(ctx, "dana", []byte(c.body))
		if err == nil || !strings.Contains(Sentence(err), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	if err := w.Subscribe(ctx, "nobody", good.json()); err == nil {
		t.Error("a subscription of no user was stored")
	}
	if n, _ := w.Subscribed("dana"); n != 0 {
		t.Fatalf("refused subscriptions stored: %d", n)
	}
	if err := w.Subscribe(ctx, "dana", good.json()); err != nil {
		t.Fatal(err)
	}
	if err := w.Subscribe(ctx, "dana", good.json()); err != nil { // the same browser again
		t.Fatal(err)
	}
	if n, _ := w.Subscribed("dana"); n != 1 {
		t.Fatalf("subscribed = %d, want 1", n)
	}
	if err := w.Unsubscribe(ctx, "dana", good.endpoint); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.Subscribed("dana"); n != 0 {
		t.Fatalf("after unsubscribe: %d", n)
	}
}

// TestWebPushRemovedPerson: a person removed and a new one made under the
// same name is another person: the old browser gets no push of the new
// one's drafts, and its subscription is deleted.
func TestWebPushRemovedPerson(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	push := newPushService(t)
	f.cfg.Approvals.WebPush = &config.WebPushSurface{Subject: "mailto:ops@handoff.test"}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now, HTTP: push.Client()})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := a.WebPush()
	old := newTestBrowser(t, push.URL+"/wpush/old-dana")
	if err := w.Subscribe(ctx, "dana", old.json()); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Update(ctx, func(tx *store.Tx) error { return tx.DeleteUser("dana") }); err != nil {
		t.Fatal(err)
	}
	again := store.User{ID: ulid.Make().String(), Name: "dana", Role: store.RoleApprover, Clients: []string{"acme"}, CreatedAt: t0, PasswordHash: []byte("x")}
	if err := f.st.CreateUser(ctx, again); err != nil {
		t.Fatal(err)
	}
	d := f.pendingNamed(t, "web", "m1", "Ada", "Hi Ada, the blue one is in stock.")
	v := View{Draft: d, Client: "acme", ClientName: "Acme", Channel: "web", Customer: "Ada", Text: d.Text, State: Waiting}
	if _, err := w.Post(ctx, "acme", v); err != nil {
		t.Fatal(err)
	}
	if n := len(push.pushes("/wpush/old-dana")); n != 0 {
		t.Fatalf("the removed person's browser got %d pushes", n)
	}
	if subs, _ := f.st.WebPushSubscriptions("dana"); len(subs) != 0 {
		t.Fatalf("the removed person's subscription is kept: %+v", subs)
	}
	// The new dana's own browser is pushed.
	mine := newTestBrowser(t, push.URL+"/wpush/new-dana")
	if err := w.Subscribe(ctx, "dana", mine.json()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Post(ctx, "acme", v); err != nil {
		t.Fatal(err)
	}
	if n := len(push.pushes("/wpush/new-dana")); n != 1 {
		t.Fatalf("the new dana's browser got %d pushes, want 1", n)
	}
}
