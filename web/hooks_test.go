package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/webhook"
)

const (
	testStdSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testHMACSecret = "hmac-secret-for-tests"
)

// testConfig is the demo plus a signed channel of each scheme, a form
// channel shaped like Twilio's, and a channel with a composite id from a
// header and a body field.
func testConfig() *config.Config {
	cfg := config.Default()
	signed := cfg.Channels[0]
	signed.Name = "signed"
	signed.Signature = &config.Signature{Scheme: "standard-webhooks", Secret: testStdSecret, Tolerance: 5 * time.Minute}
	mac := cfg.Channels[0]
	mac.Name = "mac"
	mac.Signature = &config.Signature{Scheme: "hmac-sha256", Secret: testHMACSecret, Header: "X-Signature"}
	sms := cfg.Channels[0]
	sms.Name = "sms"
	sms.Fields = config.Fields{MessageID: []string{"/MessageSid"}, Contact: "/From", Text: "/Body"}
	comp := cfg.Channels[0]
	comp.Name = "comp"
	comp.Fields.MessageID = []string{"header:X-Tenant", "/lead_id"}
	small := cfg.Channels[0]
	small.Name = "small"
	small.MaxBody = 64
	cfg.Channels = append(cfg.Channels, signed, mac, sms, comp, small)
	return cfg
}

// TestDuplicateStorm sends 400 concurrent requests over 50 ids, 8 each and
// interleaved, all released at once: exactly one accepted per id, every
// duplicate names its id's first correlation id, and 50 events and 50 draft
// jobs are stored. Each id's body is a corpus message of its own (layouts
// and texts mixed, the retries byte for byte the first), stored exactly.
func TestDuplicateStorm(t *testing.T) {
	e := newTestEnv(t, nil)
	const ids, copies = 50, 8
	type answer struct {
		id, status, corr string
		code             int
	}
	answers := make(chan answer, ids*copies)
	start := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ids * copies}}
	bodies := map[string]corpus.Body{}
	for n := range ids {
		id := fmt.Sprintf("storm-%02d", n)
		bodies[id] = corpus.Message(n, id, "", fmt.Sprintf("+15550000%02d", n))
	}
	for i := range ids * copies {
		id := fmt.Sprintf("storm-%02d", i%ids) // interleaved: 0..49, 0..49, ...
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			b := bodies[id]
			resp, err := client.Post(e.url+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var a hookAnswer
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				t.Error(err)
				return
			}
			answers <- answer{id: id, status: a.Status, corr: a.CorrelationID, code: resp.StatusCode}
		}()
	}
	close(start)
	wg.Wait()
	close(answers)

	accepted := map[string]string{}
	var dups []answer
	for a := range answers {
		switch {
		case a.code == http.StatusAccepted && a.status == "accepted":
			if prev, ok := accepted[a.id]; ok {
				t.Errorf("%s accepted twice (%s and %s)", a.id, prev, a.corr)
			}
			accepted[a.id] = a.corr
		case a.code == http.StatusOK && a.status == "duplicate":
			dups = append(dups, a)
		default:
			t.Errorf("%s: got %d %q", a.id, a.code, a.status)
		}
	}
	if len(accepted) != ids || len(dups) != ids*(copies-1) {
		t.Fatalf("got %d accepted and %d duplicates, want %d and %d", len(accepted), len(dups), ids, ids*(copies-1))
	}
	for _, d := range dups {
		if d.corr != accepted[d.id] {
			t.Errorf("duplicate of %s carries correlation id %s, want the first one's %s", d.id, d.corr, accepted[d.id])
		}
	}
	stats, err := e.st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Events != ids || stats.Jobs != ids {
		t.Errorf("stored %d events and %d jobs, want %d of each", stats.Events, stats.Jobs, ids)
	}
	for id, corr := range accepted {
		ev, err := e.st.EventByKey("demo:" + id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.CorrelationID != corr || ev.Duplicates != copies-1 {
			t.Errorf("%s: stored correlation %s with %d duplicates, want %s with %d", id, ev.CorrelationID, ev.Duplicates, corr, copies-1)
		}
		if b := bodies[id]; ev.Text != b.Want.Text || ev.Name != b.Want.Name || string(ev.Body) != string(b.Raw) {
			t.Errorf("%s (%s): stored text %q, name %q, body equal %v; want %q, %q and the body sent", id, b.Name(), ev.Text, ev.Name, string(ev.Body) == string(b.Raw), b.Want.Text, b.Want.Name)
		}
	}
}

func signStd(t *testing.T, msgID string, ts time.Time, body string) http.Header {
	t.Helper()
	sig, err := webhook.Sign(testStdSecret, msgID, ts, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{
		"Webhook-Id":        {msgID},
		"Webhook-Timestamp": {fmt.Sprint(ts.Unix())},
		"Webhook-Signature": {sig},
	}
}

// TestHookAccepts covers the ways a message id can be found. The rows
// about finding the id send exactly the bytes they are about; the signed
// ones sign corpus bodies (pretty, CRLF, escaped; markup, emoji, RTL).
func TestHookAccepts(t *testing.T) {
	e := newTestEnv(t, testConfig())
	std := corpus.MessageAs("fish", "pretty2", "sig-1", "", "+15550001111")
	mac := corpus.MessageAs("emoji", "crlf", "sig-1", "", "+15550001111")
	std2 := corpus.MessageAs("arabic", "python", "sig-3", "", "+15550001112")
	mac2 := corpus.MessageAs("long", "php", "sig-3", "", "+15550001112")
	sniffed := corpus.MessageAs("combining", "crlf", "a-3", "", "")
	signed := map[string]corpus.Body{"signed:sig-1": std, "mac:sig-1": mac, "signed:sig-3": std2, "mac:sig-3": mac2, "demo:a-3": sniffed}
	tests := []struct {
		name, path, ctype, body string
		header                  http.Header
		wantKey                 string
	}{
		{"json", "/hooks/demo", "application/json", `{"id":"  a-1 ","from":"x"}`, nil, "demo:a-1"},
		{"numeric id", "/hooks/demo", "application/json", `{"id":12345678901234567890}`, nil, "demo:12345678901234567890"},
		{"json without content type", "/hooks/demo", "", `{"id":"a-2"}`, nil, "demo:a-2"},
		{"pretty json with CRLF lines without content type", "/hooks/demo", "", string(sniffed.Raw), nil, "demo:a-3"},
		{"twilio form", "/hooks/sms", "application/x-www-form-urlencoded", url.Values{"MessageSid": {"SM123"}, "From": {"+15551234567"}, "Body": {"Hi"}}.Encode(), nil, "sms:SM123"},
		{"composite", "/hooks/comp", "application/json", `{"lead_id":42}`, http.Header{"X-Tenant": {"acme"}}, "comp:acme:42"},
		{"standard webhooks", "/hooks/signed", "application/json", string(std.Raw), signStd(t, "msg_1", time.Now(), string(std.Raw)), "signed:sig-1"},
		{"hmac", "/hooks/mac", "application/json", string(mac.Raw), http.Header{"X-Signature": {hmacHex(testHMACSecret, string(mac.Raw))}}, "mac:sig-1"},
		{"standard webhooks, Python's escapes", "/hooks/signed", "application/json", string(std2.Raw), signStd(t, "msg_3", time.Now(), string(std2.Raw)), "signed:sig-3"},
		{"hmac, PHP's escapes", "/hooks/mac", "application/json", string(mac2.Raw), http.Header{"X-Signature": {hmacHex(testHMACSecret, string(mac2.Raw))}}, "mac:sig-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ans := e.do(t, http.MethodPost, tt.path, tt.ctype, []byte(tt.body), tt.header)
			if code != http.StatusAccepted || ans["event_key"] != tt.wantKey {
				t.Fatalf("got %d %v, want 202 with event_key %s", code, ans, tt.wantKey)
			}
			ev, err := e.st.EventByKey(tt.wantKey)
			if err != nil {
				t.Fatal(err)
			}
			if ev.CorrelationID != ans["correlation_id"] {
				t.Errorf("stored correlation %s, answered %v", ev.CorrelationID, ans["correlation_id"])
			}
			if b, ok := signed[tt.wantKey]; ok && (ev.Text != b.Want.Text || ev.Name != b.Want.Name || ev.ConversationID != b.Want.Conversation || string(ev.Body) != string(b.Raw)) {
				t.Errorf("%s: stored text %q, name %q, conversation %q, body equal %v; want %+v and the body sent", b.Name(), ev.Text, ev.Name, ev.ConversationID, string(ev.Body) == string(b.Raw), b.Want)
			}
		})
	}
	ev, err := e.st.EventByKey("sms:SM123")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Contact != "+15551234567" || ev.Text != "Hi" || ev.ConversationID != "+15551234567" {
		t.Errorf("form fields: contact %q text %q conversation %q", ev.Contact, ev.Text, ev.ConversationID)
	}
}

// TestHookRejects is the table of bad inputs: each gets its status and a
// sentence naming the problem, and nothing is stored.
func TestHookRejects(t *testing.T) {
	e := newTestEnv(t, testConfig())
	// Something stored before, which no bad request may change.
	if code, _ := hookCorpus(t, e, "demo", corpus.MessageAs("emoji", "pretty2", "keep", "", "")); code != http.StatusAccepted {
		t.Fatalf("setup: got %d", code)
	}
	before, err := e.st.EventByKey("demo:keep")
	if err != nil {
		t.Fatal(err)
	}
	good := string(corpus.MessageAs("hebrew", "pretty4", "sig-2", "", "").Raw) // a real body, refused for its signature alone
	stale := time.Now().Add(-10 * time.Minute)
	tests := []struct {
		name, path, ctype, body string
		header                  http.Header
		status                  int
		want                    string // words the error sentence must contain
	}{
		// The bodies not taken from the corpus are exact on purpose: each is
		// the one malformation (or size) its row names, and nothing else.
		{"unknown channel", "/hooks/nope", "application/json", `{"id":"x"}`, nil, 404, `no channel named "nope"`},
		{"xml body", "/hooks/demo", "application/xml", `<id>1</id>`, nil, 400, "neither JSON, form-encoded nor multipart"},
		{"broken json", "/hooks/demo", "application/json", `{"id":`, nil, 400, "JSON"},
		{"empty body", "/hooks/demo", "application/json", ``, nil, 400, "the body is empty"},
		{"missing id", "/hooks/demo", "application/json", `{"text":"hi"}`, nil, 400, "missing"},
		{"id is an object", "/hooks/demo", "application/json", `{"id":{"a":1}}`, nil, 400, "not a string or number"},
		{"id is a bool", "/hooks/demo", "application/json", `{"id":true}`, nil, 400, "not a string or number"},
		{"id is blank", "/hooks/demo", "application/json", `{"id":"   "}`, nil, 400, "empty"},
		{"id too long", "/hooks/demo", "application/json", fmt.Sprintf(`{"id":%q}`, strings.Repeat("x", 257)), nil, 400, "256"},
		{"form without id", "/hooks/sms", "application/x-www-form-urlencoded", "From=%2B1555&Body=hi", nil, 400, "missing"},
		{"composite part missing", "/hooks/comp", "application/json", `{"lead_id":42}`, nil, 400, "missing"},
		{"body over the limit", "/hooks/small", "application/json", `{"id":"x","text":"` + strings.Repeat("y", 100) + `"}`, nil, 413, "limit"},
		{"signature missing", "/hooks/signed", "application/json", good, nil, 401, "missing"},
		{"signature wrong", "/hooks/signed", "application/json", good, signStd(t, "msg_2", time.Now(), `{"id":"other"}`), 401, "does not match"},
		{"signature stale", "/hooks/signed", "application/json", good, signStd(t, "msg_3", stale, good), 401, "tolerance"},
		{"hmac missing", "/hooks/mac", "application/json", good, nil, 401, "missing"},
		{"hmac wrong", "/hooks/mac", "application/json", good, http.Header{"X-Signature": {hmacHex("wrong", good)}}, 401, "does not match"},
		// encoding/json would read both ids as "u-\uFFFD": one of the two messages would be lost as a duplicate.
		{"invalid UTF-8 id", "/hooks/demo", "application/json", "{\"id\":\"u-\xff\"}", nil, 400, "the body is not valid JSON: it is not valid UTF-8"},
		{"other invalid UTF-8 id", "/hooks/demo", "application/json", "{\"id\":\"u-\xfe\"}", nil, 400, "the body is not valid JSON: it is not valid UTF-8"},
		{"invalid UTF-8 contact", "/hooks/demo", "application/json", "{\"id\":\"u-1\",\"from\":\"+1555\xc0\"}", nil, 400, "not valid UTF-8"},
		{"invalid UTF-8 text, sniffed", "/hooks/demo", "", "{\"id\":\"u-2\",\"text\":\"caf\xe9\"}", nil, 400, "not valid UTF-8"},
		{"lone surrogate id", "/hooks/demo", "application/json", `{"id":"u-\ud800"}`, nil, 400, "lone UTF-16 surrogate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ans := e.do(t, http.MethodPost, tt.path, tt.ctype, []byte(tt.body), tt.header)
			msg, _ := ans["error"].(string)
			if code != tt.status || msg == "" || !strings.Contains(msg, tt.want) {
				t.Fatalf("got %d %v, want %d with an error containing %q", code, ans, tt.status, tt.want)
			}
		})
	}
	stats, err := e.st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Events != 1 || stats.Jobs != 1 {
		t.Errorf("after bad requests: %d events and %d jobs stored, want only the first (1 and 1)", stats.Events, stats.Jobs)
	}
	after, err := e.st.EventByKey("demo:keep")
	if err != nil {
		t.Fatal(err)
	}
	if after.CorrelationID != before.CorrelationID || after.Duplicates != before.Duplicates {
		t.Errorf("the stored event changed: %+v -> %+v", before, after)
	}
}

// TestHookUnavailable: a store that cannot commit answers 503 and says so.
func TestHookUnavailable(t *testing.T) {
	e := newTestEnv(t, nil)
	ctx := t.Context()
	if err := e.runner.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	closed, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	srv, err := New(Deps{Config: e.cfg, Store: closed, Jobs: e.runner, Logger: discardLogger(), APIToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []corpus.Body{corpus.MessageAs("fish", "pretty4", "x", "", ""), corpus.MessageAs("emoji", "python", "y", "", "")} {
		rec := serveOnce(srv, http.MethodPost, "/hooks/demo", string(b.Raw), "")
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "could not be stored") {
			t.Fatalf("%s: got %d %s, want 503 naming the problem", b.Name(), rec.Code, rec.Body)
		}
	}
}

// TestHookCompositeIDsDoNotCollide: parts of a composite id are escaped, so
// ("acme:eu", "42") and ("acme", "eu:42") are two events, while a
// single-source id is kept as it is.
func TestHookCompositeIDsDoNotCollide(t *testing.T) {
	cfg := testConfig()
	tl := cfg.Channels[0]
	tl.Name = "tl"
	tl.Fields.MessageID = []string{"/tenant", "/lead"}
	cfg.Channels = append(cfg.Channels, tl)
	e := newTestEnv(t, cfg)
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	tests := []struct {
		name, path, body string
		status           int
		wantKey          string
	}{
		// Exact: these bodies are the id's parts and nothing else, the point of the rows.
		{"colon in the tenant", "/hooks/tl", `{"tenant":"acme:eu","lead":"42"}`, 202, "tl:acme%3Aeu:42"},
		{"colon in the lead", "/hooks/tl", `{"tenant":"acme","lead":"eu:42"}`, 202, "tl:acme:eu%3A42"},
		{"the first again", "/hooks/tl", `{"tenant":"acme:eu","lead":"42"}`, 200, "tl:acme%3Aeu:42"},
		{"percent in a part", "/hooks/tl", `{"tenant":"100%","lead":"a%3Ab"}`, 202, "tl:100%25:a%253Ab"},
		{"single source keeps its colons", "/hooks/demo", string(corpus.MessageAs("slashes", "pretty2", "acme:eu:42", "", "").Raw), 202, "demo:acme:eu:42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ans := e.do(t, http.MethodPost, tt.path, "application/json", []byte(tt.body), nil)
			if code != tt.status || ans["event_key"] != tt.wantKey {
				t.Fatalf("got %d %v, want %d with event_key %s", code, ans, tt.status, tt.wantKey)
			}
			// The key, escapes and all, names the event in the API.
			code, tl := e.do(t, http.MethodGet, "/api/v1/events/"+url.PathEscape(tt.wantKey), "", nil, auth)
			ev, _ := tl["event"].(map[string]any)
			if code != http.StatusOK || ev["key"] != tt.wantKey || ev["correlation_id"] != ans["correlation_id"] {
				t.Errorf("GET the event: got %d %v, want event %s with correlation %v", code, ev, tt.wantKey, ans["correlation_id"])
			}
		})
	}
	stats, err := e.st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Events != 4 {
		t.Errorf("stored %d events, want 4", stats.Events)
	}
}
