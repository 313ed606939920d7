package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// whLead is a lead as GET /api/v1/handoffs and the event timeline show it.
type whLead struct {
	Key          string `json:"key"`
	Status       string `json:"status"`
	Cycle        int    `json:"cycle"`
	Owner        string `json:"owner"`
	Contact      string `json:"contact"`
	LastEventKey string `json:"last_event_key"`
	Since        string `json:"since"`
	History      []struct {
		Cycle    int    `json:"cycle"`
		Status   string `json:"status"`
		At       string `json:"at"`
		EventKey string `json:"event_key"`
	} `json:"history"`
}

func (l whLead) statuses() []string {
	out := []string{}
	for _, tr := range l.History {
		out = append(out, tr.Status)
	}
	return out
}

// whGet sends GET base+path with the API token and returns the status and body.
func whGet(t *testing.T, base, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, raw
}

// whList is GET /api/v1/handoffs<query>, which must answer 200; it returns the lead keys in order.
func whList(t *testing.T, base, query string) ([]string, []whLead) {
	t.Helper()
	code, raw := whGet(t, base, "/api/v1/handoffs"+query)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/handoffs%s = %d %s, want 200", query, code, raw)
	}
	var ans struct {
		Handoffs []whLead `json:"handoffs"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		t.Fatalf("GET /api/v1/handoffs%s: %v in %s", query, err, raw)
	}
	if ans.Handoffs == nil {
		t.Errorf("GET /api/v1/handoffs%s: handoffs is %s, want a list (never null)", query, raw)
	}
	keys := []string{}
	for _, h := range ans.Handoffs {
		keys = append(keys, h.Key)
	}
	return keys, ans.Handoffs
}

// whTimeline is what the event timeline says of the event's lead and jobs.
type whTimeline struct {
	Jobs []struct {
		State string `json:"state"`
	} `json:"jobs"`
	Draft *struct {
		Status string `json:"status"`
	} `json:"draft"`
	Handoff *whLead `json:"handoff"`
}

func whEvent(t *testing.T, base, key string) (int, whTimeline) {
	t.Helper()
	code, raw := whGet(t, base, "/api/v1/events/"+url.PathEscape(key))
	var tl whTimeline
	if code == http.StatusOK {
		if err := json.Unmarshal(raw, &tl); err != nil {
			t.Fatalf("event %s: %v in %s", key, err, raw)
		}
	}
	return code, tl
}

// whPost delivers one demo-channel webhook, which must be accepted.
func whPost(t *testing.T, base string, b corpus.Body) {
	t.Helper()
	resp, err := http.Post(base+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo %s = %d %s, want 202", b.Name(), resp.StatusCode, raw)
	}
}

// whWaitDrafted waits until the event's draft job completed.
func whWaitDrafted(t *testing.T, base, key string) {
	t.Helper()
	var code int
	var tl whTimeline
	drafted := false
	defer func() { // runs as Eventually's failure ends the test
		if !drafted {
			t.Logf("event %s last read: %d %+v", key, code, tl)
		}
	}()
	testkit.Eventually(t, 10*time.Second, func() bool {
		code, tl = whEvent(t, base, key)
		return code == http.StatusOK && len(tl.Jobs) == 1 && tl.Jobs[0].State == "completed" && tl.Draft != nil
	}, "event "+key+" to be drafted")
	drafted = true
}

// whServer serves the env's store through a second server with its own
// config and clock.
func whServer(t *testing.T, e *testEnv, cfg *config.Config, now func() time.Time) string {
	t.Helper()
	srv, err := New(Deps{Config: cfg, Store: e.st, Jobs: e.runner, Logger: discardLogger(), APIToken: testToken, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close) // before the env's cleanup closes the store
	return hs.URL
}

// whSetup makes three leads through the real webhook and drafting: two
// stay received (no contact to identify them) and one is owned by sales.
// Their bodies are corpus messages (pretty, Python's escapes, CRLF lines;
// markup, emoji, Hebrew) with no conversation id, so that the lead is the
// message id's, or the contact's.
func whSetup(t *testing.T) (*testEnv, time.Time) {
	t.Helper()
	e := newTestEnv(t, nil)
	for _, b := range []corpus.Body{
		withoutMembers(t, corpus.MessageAs("fish", "pretty2", "r1", "", ""), "from", "conversation_id"),
		withoutMembers(t, corpus.MessageAs("emoji", "python", "r2", "", ""), "from", "conversation_id"),
		withoutMembers(t, corpus.MessageAs("hebrew", "crlf", "o1", "", "+15550001234"), "conversation_id"),
	} {
		whPost(t, e.url, b)
		whWaitDrafted(t, e.url, "demo:"+b.Want.MessageID)
		wantStored(t, e, "demo", b)
	}
	return e, time.Now()
}

func TestListHandoffs(t *testing.T) {
	e, done := whSetup(t)
	const owned = "demo:+15550001234" // the conversation defaults to the contact

	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"every lead", "", []string{"demo:r1", "demo:r2", owned}},
		{"received, longest waiting first", "?status=received", []string{"demo:r1", "demo:r2"}},
		{"owned", "?status=owned", []string{owned}},
		{"matched: none", "?status=matched", []string{}},
		{"replied: none", "?status=replied", []string{}},
		{"limit", "?status=received&limit=1", []string{"demo:r1"}},
		{"stuck=false is no filter", "?stuck=false", []string{"demo:r1", "demo:r2", owned}},
		{"stuck now: none (10m received, 4h owned)", "?stuck=true", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, leads := whList(t, e.url, tt.query)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GET /api/v1/handoffs%s = %v, want %v", tt.query, got, tt.want)
			}
			for _, l := range leads {
				if l.Key == owned && (l.Status != "owned" || l.Owner != "sales" || l.Cycle != 1 ||
					!reflect.DeepEqual(l.statuses(), []string{"received", "matched", "owned"})) {
					t.Errorf("owned lead = %+v, want owned by sales after received, matched, owned", l)
				}
				if strings.HasPrefix(l.Key, "demo:r") && (l.Status != "received" || len(l.History) != 1) {
					t.Errorf("lead %s = %s with %d transitions, want received with 1", l.Key, l.Status, len(l.History))
				}
			}
		})
	}

	// Stuck is judged on the server's clock against the configured limits.
	later := func(d time.Duration) func() time.Time { return func() time.Time { return done.Add(d) } }
	oneNano := *e.cfg
	oneNano.Stuck = config.Stuck{Received: time.Nanosecond, Matched: time.Nanosecond, Owned: time.Hour}
	stuckTests := []struct {
		name  string
		cfg   *config.Config
		now   func() time.Time
		query string
		want  []string
	}{
		{"an hour later: the received leads", e.cfg, later(time.Hour), "?stuck=true", []string{"demo:r1", "demo:r2"}},
		{"an hour later, owned only: none", e.cfg, later(time.Hour), "?stuck=true&status=owned", []string{}},
		{"five hours later: all", e.cfg, later(5 * time.Hour), "?stuck=true", []string{"demo:r1", "demo:r2", owned}},
		{"five hours later, owned", e.cfg, later(5 * time.Hour), "?stuck=true&status=owned", []string{owned}},
		{"five hours later, limit 2", e.cfg, later(5 * time.Hour), "?stuck=true&limit=2", []string{"demo:r1", "demo:r2"}},
		{"stuck.received 1ns, now", &oneNano, nil, "?stuck=true", []string{"demo:r1", "demo:r2"}},
		{"stuck.received 1ns, received", &oneNano, nil, "?stuck=TRUE&status=received", []string{"demo:r1", "demo:r2"}},
	}
	for _, tt := range stuckTests {
		t.Run(tt.name, func(t *testing.T) {
			base := whServer(t, e, tt.cfg, tt.now)
			got, _ := whList(t, base, tt.query)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GET /api/v1/handoffs%s = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}

func TestListHandoffsBadInput(t *testing.T) {
	e := newTestEnv(t, nil)
	tests := []struct {
		query string
		code  int
		want  string // in the error sentence
	}{
		{"?status=bogus", http.StatusBadRequest, `"bogus"`},
		{"?status=RECEIVED", http.StatusBadRequest, `"RECEIVED"`},
		{"?stuck=maybe", http.StatusBadRequest, `"maybe"`},
		{"?limit=0", http.StatusBadRequest, "limit"},
		{"?limit=-1", http.StatusBadRequest, "limit"},
		{"?limit=1001", http.StatusBadRequest, "limit"},
		{"?limit=ten", http.StatusBadRequest, `"ten"`},
		{"?stuck=true&status=replied", http.StatusBadRequest, "replied"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, raw := whGet(t, e.url, "/api/v1/handoffs"+tt.query)
			var ans struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(raw, &ans); err != nil {
				t.Fatalf("answer %s is not JSON: %v", raw, err)
			}
			if code != tt.code || !strings.Contains(ans.Error, tt.want) {
				t.Errorf("GET /api/v1/handoffs%s = %d %q, want %d naming %s", tt.query, code, ans.Error, tt.code, tt.want)
			}
		})
	}
	// Without a token, nothing is listed.
	resp, err := http.Get(e.url + "/api/v1/handoffs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/handoffs without a token = %d, want 401", resp.StatusCode)
	}
}

func TestEventTimelineShowsHandoff(t *testing.T) {
	e, _ := whSetup(t)
	tests := []struct {
		key      string
		lead     string
		status   string
		owner    string
		statuses []string
	}{
		{"demo:o1", "demo:+15550001234", "owned", "sales", []string{"received", "matched", "owned"}},
		{"demo:r1", "demo:r1", "received", "", []string{"received"}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			code, tl := whEvent(t, e.url, tt.key)
			if code != http.StatusOK {
				t.Fatalf("GET event %s = %d", tt.key, code)
			}
			h := tl.Handoff
			if h == nil {
				t.Fatalf("timeline of %s has no handoff", tt.key)
			}
			if h.Key != tt.lead || h.Status != tt.status || h.Owner != tt.owner || h.Cycle != 1 || h.LastEventKey != tt.key {
				t.Errorf("handoff = %+v, want lead %s %s owner %q cycle 1 last event %s", *h, tt.lead, tt.status, tt.owner, tt.key)
			}
			if got := h.statuses(); !reflect.DeepEqual(got, tt.statuses) {
				t.Errorf("handoff history = %v, want %v", got, tt.statuses)
			}
			for _, tr := range h.History {
				if tr.EventKey != tt.key || tr.Cycle != 1 || tr.At == "" {
					t.Errorf("transition %+v, want event %s, cycle 1 and a time", tr, tt.key)
				}
			}
		})
	}
}
