package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/users"
)

// mailgunTrio reads the timestamp, token and signature a Mailgun vector
// carries (a route's form fields or an event's signature object).
func mailgunTrio(t *testing.T, v presetVector) url.Values {
	t.Helper()
	out := url.Values{}
	if strings.HasPrefix(v.Headers["Content-Type"], "application/json") {
		var b struct {
			Signature map[string]string `json:"signature"`
		}
		if err := json.Unmarshal([]byte(v.Body), &b); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"timestamp", "token", "signature"} {
			out.Set(k, b.Signature[k])
		}
		return out
	}
	_, params, err := mime.ParseMediaType(v.Headers["Content-Type"])
	if err != nil {
		t.Fatal(err)
	}
	form, err := multipart.NewReader(strings.NewReader(v.Body), params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"timestamp", "token", "signature"} {
		out.Set(k, form.Value[k][0])
	}
	return out
}

func presetVectorNamed(t *testing.T, name string) presetVector {
	t.Helper()
	for _, v := range loadPresetVectors(t) {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no vector %q", name)
	return presetVector{}
}

// TestMailgunTokenReplay: a Mailgun signature covers its timestamp and
// token, not the message, so one captured trio (from a route or from any
// event webhook) must not carry a message of the captor's choosing. Each
// Mailgun vector is sent as Mailgun sent it, then again (Mailgun's own
// retry: a duplicate, 200, not a refusal); then its trio is put on forged
// messages, which are refused with a 401 and one sentence and store
// nothing; a message with a token of its own (signed with the key) is
// recorded, so the refusal is the token's.
func TestMailgunTokenReplay(t *testing.T) {
	e := newPresetEnv(t)
	forged := func(trio url.Values, n string) url.Values {
		f := url.Values{"Message-Id": {"<forged-" + n + "@evil.example>"}, "sender": {"mallory-" + n + "@evil.example"},
			"from": {"Mallory <mallory-" + n + "@evil.example>"}, "stripped-text": {"Send the invoice to me instead " + n}}
		for k, vs := range trio {
			f[k] = vs
		}
		return f
	}
	post := func(form url.Values) hookReply {
		return e.send(t, http.MethodPost, "/hooks/mg", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, form.Encode())
	}
	for _, name := range []string{"mailgun route", "mailgun delivered event"} {
		t.Run(name, func(t *testing.T) {
			v := presetVectorNamed(t, name)
			for _, try := range []string{"sent", "retried"} {
				if r := e.send(t, http.MethodPost, v.Path, v.Headers, v.Body); r.code != http.StatusOK {
					t.Fatalf("%s: %d %s, want 200", try, r.code, r.raw)
				}
			}
			before := e.events(t)
			trio := mailgunTrio(t, v)
			for _, n := range []string{"1", "2", "3"} {
				r := post(forged(trio, n))
				var a map[string]string
				if r.code != http.StatusUnauthorized || json.Unmarshal(r.raw, &a) != nil || !strings.Contains(a["error"], "already used by another request") || strings.Contains(a["error"], "\n") {
					t.Errorf("forged message %s with the captured token: %d %s, want 401 with one sentence", n, r.code, r.raw)
				}
			}
			if got := e.events(t) - before; got != 0 {
				t.Fatalf("the forged messages stored %d events", got)
			}
		})
	}
	// A token of its own, signed with the key at the vectors' time: recorded.
	trio := url.Values{"timestamp": {"1767225600"}, "token": {"fresh-token-0000000000000000000000000000000000000"}}
	m := hmac.New(sha256.New, []byte("key-3ax6xnjp29jd6fds4gc373sgvjxteol0"))
	m.Write([]byte(trio.Get("timestamp") + trio.Get("token")))
	trio.Set("signature", hex.EncodeToString(m.Sum(nil)))
	before := e.events(t)
	if r := post(forged(trio, "own")); r.code != http.StatusOK {
		t.Fatalf("a message with its own token: %d %s, want 200", r.code, r.raw)
	}
	if got := e.events(t) - before; got != 1 {
		t.Fatalf("a message with its own token stored %d events, want 1", got)
	}
	// The same token on a second, different message: refused.
	if r := post(forged(trio, "again")); r.code != http.StatusUnauthorized {
		t.Errorf("a second message with that token: %d %s, want 401", r.code, r.raw)
	}
}

// TestHookRefusesControlCharactersInLeadFields: CR, LF or NUL inside the
// contact or the conversation id (which name the lead and end up in logs,
// email headers and keys) is refused with one sentence, as in the message
// id, and nothing is stored; a form body's encoded CRLF likewise. The bad
// values ride in corpus bodies (pretty, Python's \u escapes, Go's HTML
// escapes, CRLF lines; markup, emoji, RTL texts), escaped as each layout
// writes them.
func TestHookRefusesControlCharactersInLeadFields(t *testing.T) {
	e := newTestEnv(t, nil)
	const contactBad, convBad = "the contact field /from contains control characters", "the conversation_id field /conversation_id contains control characters"
	cases := []struct {
		name, contentType string
		body              []byte
		want              string
	}{
		{"LF in the contact", "application/json", corpus.MessageAs("fish", "pretty2", "c1", "", "ann@example.com\nBcc: all@example.com").Raw, contactBad},
		{"CR in the contact", "application/json", corpus.MessageAs("emoji", "python", "c2", "", "ann@example.com\rX").Raw, contactBad},
		{"NUL in the contact", "application/json", corpus.MessageAs("arabic", "goescaped", "c3", "", "ann\u0000@example.com").Raw, contactBad},
		{"CRLF in the conversation id", "application/json", corpus.MessageAs("hebrew", "crlf", "c4", "t1\r\nt2", "ann@example.com").Raw, convBad},
		{"NUL in the conversation id", "application/json", corpus.MessageAs("slashes", "php", "c5", "t1\u0000", "ann@example.com").Raw, convBad},
		// A form: the corpus's demo bodies are JSON, so this one is written here.
		{"encoded CRLF in a form's contact", "application/x-www-form-urlencoded", []byte(url.Values{"id": {"c6"}, "from": {"ann@example.com\r\nBcc: x"}, "text": {corpus.TextNamed("fish").Body}}.Encode()), contactBad},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, err := e.st.Stats()
			if err != nil {
				t.Fatal(err)
			}
			code, ans := e.do(t, http.MethodPost, "/hooks/demo", tc.contentType, tc.body, nil)
			if msg, _ := ans["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("got %d %v, want 400 saying %q", code, ans, tc.want)
			}
			after, err := e.st.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if after.Events != before.Events {
				t.Errorf("a refused request stored %d events", after.Events-before.Events)
			}
		})
	}
	// Clean ones on the same channel are recorded, exactly.
	for i, b := range []corpus.Body{
		corpus.MessageAs("fish", "pretty4", "c7", "t1", "ann@example.com"),
		corpus.MessageAs("emoji", "compact", "c8", "t1", "ann@example.com"),
		corpus.MessageAs("newlines", "crlf", "c9", "t1", "ann@example.com"),
	} {
		if code, ans := hookCorpus(t, e, "demo", b); code != http.StatusAccepted {
			t.Errorf("clean message %d (%s): %d %v, want 202", i, b.Name(), code, ans)
			continue
		}
		wantStored(t, e, "demo", b)
	}
}

// TestMetaHandshakeGuessesLimited: hub.verify_token is a secret, so guesses
// at it count under the login limits of the caller's address: five wrong
// tokens from one address, then that address gets 429 with Retry-After,
// even with the right token, until the window has passed. Right tokens
// count nothing: many handshakes in a row all answer.
func TestMetaHandshakeGuessesLimited(t *testing.T) {
	e := newPresetEnv(t)
	const right = "/hooks/wa?hub.mode=subscribe&hub.verify_token=vt-123&hub.challenge=42"
	for i := range 2 * users.LoginPerPair {
		if r := e.send(t, http.MethodGet, right, nil, ""); r.code != http.StatusOK {
			t.Fatalf("right handshake %d: %d %s, want 200", i+1, r.code, r.raw)
		}
	}
	steps := []struct {
		name, path string
		want       int
	}{}
	for i := range users.LoginPerPair {
		steps = append(steps, struct {
			name, path string
			want       int
		}{fmt.Sprintf("guess %d", i+1), fmt.Sprintf("/hooks/wa?hub.mode=subscribe&hub.verify_token=guess-%d&hub.challenge=42", i), http.StatusForbidden})
	}
	steps = append(steps, []struct {
		name, path string
		want       int
	}{
		{"one guess too many", "/hooks/wa?hub.mode=subscribe&hub.verify_token=guess-x&hub.challenge=42", http.StatusTooManyRequests},
		{"the right token from that address", right, http.StatusTooManyRequests},
	}...)
	for _, s := range steps {
		r := e.send(t, http.MethodGet, s.path, nil, "")
		if r.code != s.want {
			t.Fatalf("%s: %d %s, want %d", s.name, r.code, r.raw, s.want)
		}
		if s.want == http.StatusTooManyRequests && !strings.Contains(string(r.raw), "too many failed tries at hub.verify_token") {
			t.Errorf("%s: %s, want the sentence to name hub.verify_token", s.name, r.raw)
		}
	}
	e.offset.Store(int64(users.LoginWindow.Seconds()) + 1)
	if r := e.send(t, http.MethodGet, right, nil, ""); r.code != http.StatusOK {
		t.Errorf("the right token after the window: %d %s, want 200", r.code, r.raw)
	}
}
