package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestEventTimeline: the timeline of an event (its id with a slash and a
// space, its body a corpus message: pretty or compact, markup, emoji,
// RTL) names it, its one draft job and the draft, which greets the sender
// by the name the body gives.
func TestEventTimeline(t *testing.T) {
	e := newTestEnv(t, nil)
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	var path string
	for i, b := range []corpus.Body{
		corpus.MessageAs("fish", "pretty2", "a/b c", "", "+15550001234"),
		corpus.MessageAs("emoji", "compact", "a/b c 2", "", "+15550001235"),
		corpus.MessageAs("arabic", "python", "a/b c 3", "", "+15550001236"),
	} {
		code, ans := hookCorpus(t, e, "demo", b)
		if code != http.StatusAccepted {
			t.Fatalf("%s: got %d %v", b.Name(), code, ans)
		}
		key := "demo:" + b.Want.MessageID
		p := "/api/v1/events/" + url.PathEscape(key)
		if i == 0 {
			path = p
		}
		var tl map[string]any
		testkit.Eventually(t, 10*time.Second, func() bool {
			code, tl = e.do(t, http.MethodGet, p, "", nil, auth)
			if code != http.StatusOK || tl["draft"] == nil {
				return false
			}
			jobs, _ := tl["jobs"].([]any)
			return len(jobs) == 1 && jobs[0].(map[string]any)["state"] == "completed"
		}, "the draft job to complete")
		ev := tl["event"].(map[string]any)
		if ev["key"] != key || ev["correlation_id"] != ans["correlation_id"] || ev["text"] != b.Want.Text || ev["name"] != b.Want.Name {
			t.Errorf("%s: event %v, want key %q, correlation %v, text %q and name %q", b.Name(), ev, key, ans["correlation_id"], b.Want.Text, b.Want.Name)
		}
		jobs := tl["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("got %d jobs, want 1", len(jobs))
		}
		job := jobs[0].(map[string]any)
		attempts := job["attempts"].([]any)
		if job["kind"] != "draft" || job["state"] != "completed" || len(attempts) != 1 {
			t.Errorf("%s: job %v, want one completed draft attempt", b.Name(), job)
		}
		draft := tl["draft"].(map[string]any)
		execID := attempts[0].(map[string]any)["execution_id"]
		if draft["status"] != "pending_approval" || draft["execution_id"] != execID || draft["prompt_version"] != "v1" || !strings.Contains(draft["text"].(string), b.Want.Name) {
			t.Errorf("%s: draft %v, want pending_approval by execution %v, greeting %q", b.Name(), draft, execID, b.Want.Name)
		}
	}

	tests := []struct {
		name   string
		path   string
		header http.Header
		status int
		want   string
	}{
		{"no token", path, nil, 401, "Authorization"},
		{"wrong token", path, http.Header{"Authorization": {"Bearer nope"}}, 401, "not valid"},
		{"basic auth", path, http.Header{"Authorization": {"Basic eDp5"}}, 401, "Bearer"},
		{"unknown event", "/api/v1/events/demo:none", auth, 404, `"demo:none"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ans := e.do(t, http.MethodGet, tt.path, "", nil, tt.header)
			msg, _ := ans["error"].(string)
			if code != tt.status || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %v, want %d with %q", code, ans, tt.status, tt.want)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	e := newTestEnv(t, nil)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, ans := e.do(t, http.MethodGet, p, "", nil, nil); code != http.StatusOK {
			t.Errorf("%s: got %d %v", p, code, ans)
		}
	}
	// A store that cannot commit: /readyz says so, /healthz (the process) does not.
	closed, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	srv, err := New(Deps{Config: e.cfg, Store: closed, Jobs: e.runner, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if rec := serveOnce(srv, http.MethodGet, "/readyz", "", ""); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot commit") {
		t.Errorf("/readyz on a closed store: %d %s, want 503 naming the problem", rec.Code, rec.Body)
	}
	if rec := serveOnce(srv, http.MethodGet, "/healthz", "", ""); rec.Code != http.StatusOK {
		t.Errorf("/healthz on a closed store: %d, want 200", rec.Code)
	}
}

func TestNoTokenConfigured(t *testing.T) {
	e := newTestEnv(t, nil)
	srv, err := New(Deps{Config: e.cfg, Store: e.st, Jobs: e.runner, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// The token the other servers accept: with none configured, it is refused.
	rec := serveOnce(srv, http.MethodGet, "/api/v1/events/demo:x", "", testToken)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("with no HANDOFF_API_TOKEN set, a bearer token got %d, want 401", rec.Code)
	}
	if rec := serveOnce(e.srv, http.MethodGet, "/api/v1/events/demo:x", "", testToken); rec.Code != http.StatusNotFound {
		t.Errorf("control: the same token on a server that has it got %d, want 404 (authorized, no such event)", rec.Code)
	}
}

// TestEventTimelineUTF8: every answer is valid UTF-8, also for an event
// recorded before JSON bodies had to be UTF-8, whose raw body holds other
// bytes; a body that was UTF-8 is answered as it was received (compacted,
// as every json.RawMessage of an answer is).
func TestEventTimelineUTF8(t *testing.T) {
	e := newTestEnv(t, nil)
	old := store.Event{
		ID: ulid.Make().String(), Key: "demo:old-1", Channel: "demo", MessageID: "old-1",
		CorrelationID: ulid.Make().String(), ConversationID: "old-1", ReceivedAt: time.Now().UTC(),
		Text: "caf\uFFFD", Body: json.RawMessage("{\"id\":\"old-1\",\"text\":\"caf\xe9\",\"\xff\xfe\":1}"),
	}
	if _, err := leads.RecordEvent(t.Context(), e.st, old, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: old.Key, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key      string
		wantBody string
		invalid  bool
	}{
		{"demo:old-1", "{\"id\":\"old-1\",\"text\":\"caf\uFFFD\",\"\uFFFD\":1}", true},
	}
	// Fresh bodies, UTF-8 as received: raw, or \u-escaped (Python's, PHP's
	// \/ too), pretty or compact, with markup, emoji, RTL and combining
	// marks. Each is answered as the same bytes, compacted with < > &
	// escaped as every json.RawMessage is written (store.CanonicalJSON):
	// no escape of the sender's is decoded, no character replaced.
	for _, b := range []corpus.Body{
		corpus.MessageAs("emoji", "python", "new-1", "", ""),
		corpus.MessageAs("combining", "pretty2", "new-2", "", ""),
		corpus.MessageAs("hebrew", "php", "new-3", "", ""),
		corpus.MessageAs("fish", "compact", "new-4", "", ""),
	} {
		if code, ans := hookCorpus(t, e, "demo", b); code != http.StatusAccepted {
			t.Fatalf("%s: got %d %v", b.Name(), code, ans)
		}
		tests = append(tests, struct {
			key      string
			wantBody string
			invalid  bool
		}{"demo:" + b.Want.MessageID, string(store.CanonicalJSON(b.Raw)), false})
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, e.url+"/api/v1/events/"+url.PathEscape(tt.key), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || !utf8.Valid(raw) || !json.Valid(raw) {
				t.Fatalf("got %d, valid UTF-8 %v, valid JSON %v: %q", resp.StatusCode, utf8.Valid(raw), json.Valid(raw), raw)
			}
			var got struct {
				Event struct {
					Key             string          `json:"key"`
					Body            json.RawMessage `json:"body"`
					BodyInvalidUTF8 bool            `json:"body_invalid_utf8"`
				} `json:"event"`
				Jobs []json.RawMessage `json:"jobs"`
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			if err := dec.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got.Event.Key != tt.key || string(got.Event.Body) != tt.wantBody || got.Event.BodyInvalidUTF8 != tt.invalid || len(got.Jobs) != 1 {
				t.Errorf("event %s with body %s (invalid UTF-8: %v) and %d jobs, want %s with body %s (%v) and 1 job",
					got.Event.Key, got.Event.Body, got.Event.BodyInvalidUTF8, len(got.Jobs), tt.key, tt.wantBody, tt.invalid)
			}
		})
	}
}
