package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// TestAnswerFor pins the one mapping from errors to answers: each store and
// domain error, bare and wrapped with context as a handler returns it.
func TestAnswerFor(t *testing.T) {
	draft := store.Draft{ID: "d1", Status: store.DraftApproved, Decision: &store.Decision{By: "ada"}}
	state := &store.StateError{What: "outbox row o1", State: "pending", Want: "failed"}
	tests := []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"not found, named", missing(store.ErrNotFound, "there is no draft %q", "d1"), 404, `there is no draft "d1"`},
		{"not found, named, wrapped by the store", missing(fmt.Errorf("store: draft d1: %w", store.ErrNotFound), "there is no draft %q", "d1"), 404, `there is no draft "d1"`},
		{"not found, named, wrapped again", fmt.Errorf("web: approve: %w", missing(store.ErrNotFound, "there is no such draft")), 404, "there is no such draft"},
		// A record another record names, found missing, is damage: nobody asked for it by name.
		{"not found, unnamed", fmt.Errorf("store: outbox o1: %w", store.ErrNotFound), 500, errInternal},
		{"exists, named", taken(store.ErrExists, "There is already a person named %s.", "ada"), 409, "There is already a person named ada."},
		{"exists, unnamed", store.ErrExists, 500, errInternal},
		{"a not-found worded as a name in use", taken(store.ErrNotFound, "There is already a person named ada."), 500, errInternal},
		{"a name in use worded as a not-found", missing(store.ErrExists, "there is no token %q", "t1"), 500, errInternal},
		{"nil stays nil", missing(nil, "there is no draft"), 0, ""},
		{"a name does not change another cause", missing(state, "there is no outbox row %q", "o1"), 409, state.Error()},
		{"state", fmt.Errorf("store: reconcile o1: %w", state), 409, state.Error()},
		{"conflict", fmt.Errorf("store: reject d1: %w", &store.ConflictError{Draft: draft}), 409, (&store.ConflictError{Draft: draft}).Error() + "; that decision stands"},
		{"unsafe replay", &delivery.UnsafeReplayError{ID: "o1", Why: "maybe sent"}, 409, (&delivery.UnsafeReplayError{ID: "o1", Why: "maybe sent"}).Error()},
		{"not regenerable", fmt.Errorf("store: replay: %w", &delivery.NotRegenerableError{ID: "o1", What: "reply (outbox row)"}), 400, (&delivery.NotRegenerableError{ID: "o1", What: "reply (outbox row)"}).Error()},
		{"too long", fmt.Errorf("review: approve draft d1: %w", &review.TooLongError{Draft: "d1", Provider: "sms", Kind: "twilio", Length: 1734, Max: 1600}), 400, "the reply to draft d1 is 1734 characters, and provider sms (twilio) takes at most 1600: shorten it by 134 and approve again"},
		{"password too short", password.ErrTooShort, 400, password.ErrTooShort.Error()},
		{"password too long", fmt.Errorf("user: %w", password.ErrTooLong), 400, "user: " + password.ErrTooLong.Error()},
		{"hook error", &hook.Error{Status: 401, Msg: "the signature does not match"}, 401, "the signature does not match"},
		{"hook error under a fallback", refused(&hook.Error{Status: 401, Msg: "bad"}, 400), 401, "bad"},
		{"fallback", refused(errors.New("hook: no message id source configured"), 400), 400, "hook: no message id source configured"},
		{"explicit answer", errorf(418, "short and stout"), 418, "short and stout"},
		{"explicit answer over its cause", &apiError{status: 503, msg: "the event could not be stored", err: state}, 503, "the event could not be stored"},
		{"echo error", echo.NewHTTPError(404, "nope"), 404, "nope"},
		{"echo status", echo.ErrMethodNotAllowed, 405, http.StatusText(405)},
		{"unavailable, unnamed", fmt.Errorf("store: approve: %w", store.ErrUnavailable), 500, errInternal},
		{"deadline", context.DeadlineExceeded, 500, errInternal},
		{"too many guesses", &users.TooMany{Why: "too many failed logins", Retry: 1500 * time.Millisecond}, 429, "too many failed logins; try again in 2s"},
		{"login failed", users.ErrLoginFailed, 401, users.ErrLoginFailed.Error()},
		{"account disabled", users.ErrAccountDisabled, 403, users.ErrAccountDisabled.Error()},
		{"a wrong code at login", &users.CodeRefused{Err: users.ErrCodeWrong}, 401, users.ErrCodeWrong.Error()},
		{"a locked code at login", &users.CodeRefused{Err: users.ErrCodeLocked}, 429, users.ErrCodeLocked.Error()},
		{"a wrong code at a step-up", &users.StepUpRefused{Err: users.ErrStepUpCode}, 403, users.ErrStepUpCode.Error()},
		{"a locked code at a step-up", &users.StepUpRefused{Err: users.ErrCodeLocked}, 429, users.ErrCodeLocked.Error()},
		{"a token refused", &users.TokenRefused{Why: "the token is not valid"}, 401, "the token is not valid"},
		{"anything else", errors.New("boom"), 500, errInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.status == 0 {
				if tt.err != nil {
					t.Errorf("got %v, want nil", tt.err)
				}
				return
			}
			status, msg := answerFor(tt.err)
			if status != tt.status || msg != tt.msg {
				t.Errorf("answerFor(%v) = %d %q, want %d %q", tt.err, status, msg, tt.status, tt.msg)
			}
		})
	}
}

// TestErrorAnswersThroughTheRouter: every store refusal a route words for
// itself answers that route's status and sentence, exactly.
func TestErrorAnswersThroughTheRouter(t *testing.T) {
	e := newTestEnv(t, nil)
	key := "demo:errors-1"
	sendLead(t, e, "demo", "errors-1", "+15550009999")
	d := waitDraft(t, e, key)
	id := d["id"].(string)
	if code, ans := apiPost(t, e, "/api/v1/drafts/"+id+"/approve", ""); code != http.StatusOK {
		t.Fatalf("approve %s: %d %v", id, code, ans)
	}
	conflict := fmt.Sprintf("draft %s was already approved by api-token at ", id)
	tests := []struct {
		method, path, body string
		status             int
		want               string // the whole sentence, or its start when it ends with a time
	}{
		{"GET", "/api/v1/events/demo:nope", "", 404, `no event has the key "demo:nope"`},
		{"GET", "/api/v1/outbox/nope", "", 404, `there is no outbox row "nope"`},
		{"POST", "/api/v1/drafts/nope/approve", "", 404, `there is no draft "nope"`},
		{"POST", "/api/v1/drafts/nope/reject", "", 404, "there is no such draft"},
		{"POST", "/api/v1/drafts/" + id + "/reject", "", 409, conflict},
		{"POST", "/api/v1/reconcile/nope", `{"outcome":"not_sent"}`, 404, `there is no outbox row "nope"`},
		{"POST", "/api/v1/dead-letters/nope/replay", "", 404, `there is no dead letter "nope"`},
		{"POST", "/api/v1/dead-letters/nope/cancel", `{"reason":"x"}`, 404, `there is no dead letter "nope"`},
		{"GET", "/api/v1/keys/nope", "", 404, `key "nope" was never claimed (or has expired)`},
		{"POST", "/api/v1/keys/nope/complete", "", 404, `key "nope" was never claimed (or has expired); claim it first`},
		{"POST", "/api/v1/keys/nope/reconcile", `{"outcome":"not_done"}`, 404, `key "nope" was never claimed (or has expired); claim it first`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var body []byte
			ct := ""
			if tt.body != "" {
				body, ct = []byte(tt.body), "application/json"
			}
			code, ans := e.do(t, tt.method, tt.path, ct, body, tokenHeader())
			msg, _ := ans["error"].(string)
			exact := tt.want != conflict
			if code != tt.status || exact && msg != tt.want || !exact && !(strings.HasPrefix(msg, tt.want) && strings.HasSuffix(msg, "; that decision stands")) {
				t.Errorf("got %d %q, want %d %q", code, msg, tt.status, tt.want)
			}
		})
	}
}

// TestErrorPagesThroughTheRouter: the dashboard words the same refusals as
// pages (htmx: a fragment for #flash), or as a notice on the form's page.
func TestErrorPagesThroughTheRouter(t *testing.T) {
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "root", store.RoleAdmin, "")
	html := http.Header{"Accept": {"text/html"}}
	getPage := func(path string) page { return admin.do(http.MethodGet, path, nil, html) }
	postPage := func(path string, form url.Values) page {
		form.Set("csrf", admin.csrf)
		return admin.do(http.MethodPost, path, form, html)
	}
	tests := []struct {
		name   string
		do     func() page
		status int
		want   string
	}{
		{"timeline page", func() page { return getPage("/events/" + url.PathEscape("demo:nope")) }, 404, "<p>no event has the key &#34;demo:nope&#34;</p>"},
		{"queue card", func() page { return getPage("/drafts?id=nope") }, 404, "<p>there is no draft &#34;nope&#34;</p>"},
		{"approve from the queue (htmx)", func() page { return admin.hx("/drafts/nope/approve", url.Values{}) }, 404, `<p class="notice error">there is no draft &#34;nope&#34;</p>`},
		{"revoke a token", func() page { return postPage("/users/tokens/nope/revoke", url.Values{}) }, 404, "<p>there is no token &#34;nope&#34;</p>"},
		{"dead letter", func() page { return postPage(dlPagePath("nope", "cancel"), url.Values{"reason": {"x"}}) }, 404, "<p>there is no dead letter &#34;nope&#34;</p>"},
		{"key", func() page {
			return postPage("/keys/nope/reconcile", url.Values{"checked": {"yes"}, "outcome": {"not_done"}})
		}, 404, "<p>key &#34;nope&#34; was never claimed (or has expired); claim it first</p>"},
		{"a name in use", func() page {
			return admin.post("/users", url.Values{"name": {"root"}, "role": {"admin"}, "password": {"a-long-enough-password"}})
		}, 409, "There is already a person named root."},
		{"a token name in use", func() page {
			admin.postStepped("/users/tokens", url.Values{"name": {"ci"}, "scope": {"admin"}})
			return admin.postStepped("/users/tokens", url.Values{"name": {"ci"}, "scope": {"admin"}})
		}, 409, "A live token is already named ci; revoke it first or choose another name."},
		{"a short password", func() page {
			return admin.post("/users", url.Values{"name": {"bob"}, "role": {"admin"}, "password": {"short"}})
		}, 400, "Not added: " + password.ErrTooShort.Error() + "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.do()
			if p.code != tt.status || !strings.Contains(p.body, tt.want) {
				t.Errorf("got %d %.400s, want %d with %s", p.code, p.body, tt.status, tt.want)
			}
		})
	}
}

// TestUnmappedErrorIsLoggedOnce: an error nobody maps answers 500 with the
// generic sentence, and is logged once, with the request's correlation id,
// which the answer carries too.
func TestUnmappedErrorIsLoggedOnce(t *testing.T) {
	e := newTestEnv(t, nil)
	var logs bytes.Buffer
	e.srv.log = slog.New(slog.NewJSONHandler(&logs, nil))
	e.srv.e.GET("/test-unmapped", func(*echo.Context) error {
		return fmt.Errorf("web: something: %w", errors.New("the disk caught fire"))
	})
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/test-unmapped", nil))
	if want := `{"error":"` + errInternal + `"}`; rec.Code != http.StatusInternalServerError || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("answered %d %s, want 500 %s", rec.Code, rec.Body, want)
	}
	corr := rec.Header().Get(correlationHeader)
	if corr == "" {
		t.Errorf("the answer has no %s header", correlationHeader)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want 1: %s", len(lines), logs.String())
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatal(err)
	}
	if entry["correlation_id"] != corr || !strings.Contains(fmt.Sprint(entry["err"]), "the disk caught fire") || entry["status"] != float64(500) {
		t.Errorf("logged %v, want the error with correlation_id %q and status 500", entry, corr)
	}
}
