package testkit

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Model is a fake OpenAI-compatible model: an HTTP server for POST
// /v1/chat/completions that answers each call as its script says and
// records every request, so that a test asserts on what was sent. Unless
// told otherwise it answers a valid draft that is different on every call
// (DraftReply), so a reused draft is told from a new one.
//
// The script is one function of the call (Answer), and a queue of replies
// for the next calls that comes before it (Queue). The model can also be
// held shut (Hold): a call that arrives then waits, unanswered and not yet
// a call, until Release, or until its caller hangs up.
type Model struct {
	// URL is the base URL a drafter is configured with (it ends in /v1).
	URL string

	srv   *httptest.Server
	quit  chan struct{} // closed at cleanup: releases the calls still waiting
	conns atomic.Int32

	mu      sync.Mutex
	script  func(ModelCall) Reply
	queue   []Reply
	calls   []ModelCall
	gate    chan struct{} // nil: open; else closed by Release
	visits  []ModelVisit
	waiting int // requests at the hold now
	seq     int // orders the arrivals and departures of every request
}

// ModelCall is one request the model took up, with the reply it gave.
type ModelCall struct {
	N      int // 1-based, in the order the calls were taken up
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Req    ChatRequest // Body decoded
	Reply  Reply       // what the script answered
}

// Correlation is the call's X-Correlation-ID.
func (c ModelCall) Correlation() string { return c.Header.Get("X-Correlation-ID") }

// ModelVisit is one request that reached the model, whatever became of
// it: In and Out order the arrivals and the departures (answered, or its
// caller gone) of every request on one counter, so that a test can tell
// which calls were in flight at once; Out is 0 while it is in flight.
type ModelVisit struct {
	Body    []byte
	In, Out int
	Held    bool // it arrived while the model was held
}

// ChatRequest is the part of a chat completions request tests look at.
type ChatRequest struct {
	Model          string        `json:"model"`
	Messages       []ChatMessage `json:"messages"`
	ResponseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string         `json:"name"`
			Strict bool           `json:"strict"`
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// ChatMessage is one prompt message; Content is a string or text parts.
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text is the message's content, whether sent as a string or as parts.
func (m ChatMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Saw says one of the request's messages contains text.
func (r ChatRequest) Saw(text string) bool {
	return slices.ContainsFunc(r.Messages, func(m ChatMessage) bool { return strings.Contains(m.Text(), text) })
}

// Reply is how the model answers one call. The zero Reply is a 200
// completion with an empty content; the constructors below name the
// answers real servers give.
type Reply struct {
	Status      int    // the HTTP status; 0 is 200
	Content     string // the assistant message's content
	NullContent bool   // content null (with Refusal: OpenAI's refusal)
	Refusal     string // message.refusal
	NoChoices   bool   // a completion without choices
	// Error and ErrorType make the body of a Status >= 400:
	// {"error":{"message":…,"type":…}}.
	Error, ErrorType string
	RetryAfter       string // a Retry-After header
	// Body, when set, is sent verbatim (as application/json) instead.
	Body string
	// PromptTokens and CompletionTokens are the usage; both 0: 11 and 7.
	PromptTokens, CompletionTokens int
	Delay                          time.Duration // wait this long first (a hang-up ends the call unanswered)
	Hang                           bool          // never answer: wait until the caller hangs up
	Cut                            bool          // announce a longer body, send half of it, close the connection
	Drop                           bool          // close the connection without a byte of answer
}

// JSONReply answers content as the assistant message.
func JSONReply(content string) Reply { return Reply{Content: content} }

// FencedReply answers the JSON inside a ```json fence, as chat models do.
func FencedReply(json string) Reply { return Reply{Content: "```json\n" + json + "\n```"} }

// RefusalReply is OpenAI's refusal: content null, message.refusal set.
func RefusalReply(text string) Reply {
	return Reply{NullContent: true, Refusal: text, PromptTokens: 11, CompletionTokens: 3}
}

// NullReply is content null without a refusal.
func NullReply() Reply { return Reply{NullContent: true, PromptTokens: 11, CompletionTokens: 3} }

// ErrorReply is an OpenAI-shaped error answer.
func ErrorReply(status int, msg, typ string) Reply {
	return Reply{Status: status, Error: msg, ErrorType: typ}
}

// RateLimited is a 429 with Retry-After: retryAfter.
func RateLimited(retryAfter, msg string) Reply {
	return Reply{Status: http.StatusTooManyRequests, Error: msg, ErrorType: "requests", RetryAfter: retryAfter}
}

// DraftReply is a valid draft that names call n ("draft #n").
func DraftReply(n int) Reply {
	return JSONReply(fmt.Sprintf(`{"reply":"draft #%d","intent":"support","name":"Ada","email":"ada@example.com","phone":"","summary":"call %d","confidence":0.8}`, n, n))
}

// NewModel starts a fake model that answers DraftReply(n) to call n until
// told otherwise; it closes at the end of the test, releasing any call
// still waiting.
func NewModel(t testing.TB) *Model {
	t.Helper()
	m := &Model{quit: make(chan struct{})}
	m.script = func(c ModelCall) Reply { return DraftReply(c.N) }
	m.srv = httptest.NewUnstartedServer(m)
	m.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			m.conns.Add(1)
		}
	}
	m.srv.Start()
	m.URL = m.srv.URL + "/v1"
	t.Cleanup(func() {
		close(m.quit)
		m.srv.Close()
	})
	return m
}

// Answer makes script answer every later call (after any queued reply).
// The script is called for one call at a time, so it may keep state.
func (m *Model) Answer(script func(ModelCall) Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = script
}

// Always answers r to every later call.
func (m *Model) Always(r Reply) { m.Answer(func(ModelCall) Reply { return r }) }

// Queue answers the next calls with replies, in order, before the script.
func (m *Model) Queue(replies ...Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = append(m.queue, replies...)
}

// Calls is every call taken up so far, in order.
func (m *Model) Calls() []ModelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// CallsFor is the calls made with the correlation id corr (one event's).
func (m *Model) CallsFor(corr string) []ModelCall {
	var out []ModelCall
	for _, c := range m.Calls() {
		if c.Correlation() == corr {
			out = append(out, c)
		}
	}
	return out
}

// Content is what the model answered on call n (1-based).
func (m *Model) Content(n int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < 1 || n > len(m.calls) {
		return ""
	}
	return m.calls[n-1].Reply.Content
}

// Conns is how many connections callers opened to the model.
func (m *Model) Conns() int { return int(m.conns.Load()) }

// Hold shuts the model: calls arriving from now on wait until Release.
func (m *Model) Hold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gate == nil {
		m.gate = make(chan struct{})
	}
}

// Release opens the model: the waiting calls, and every later one, are
// taken up.
func (m *Model) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gate != nil {
		close(m.gate)
		m.gate = nil
	}
}

// Arrived is how many requests reached the model, waiting or not.
func (m *Model) Arrived() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.visits)
}

// Waiting is how many requests wait at the hold now.
func (m *Model) Waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting
}

// Visits is every request that reached the model, in order of arrival.
func (m *Model) Visits() []ModelVisit {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.visits)
}

// ServeHTTP answers one request.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Read the body first: only then does the server watch the connection
	// and end r's context when the caller is gone.
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeModelError(w, http.StatusNotFound, "no such route", "invalid_request_error")
		return
	}
	m.mu.Lock()
	m.seq++
	v := len(m.visits)
	m.visits = append(m.visits, ModelVisit{Body: body, In: m.seq, Held: m.gate != nil})
	gate := m.gate
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.seq++
		m.visits[v].Out = m.seq
		m.mu.Unlock()
	}()
	if gate != nil && !m.wait(r, gate) {
		return
	}
	c := ModelCall{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &c.Req)
	m.mu.Lock()
	c.N = len(m.calls) + 1
	if len(m.queue) > 0 {
		c.Reply, m.queue = m.queue[0], m.queue[1:]
	} else {
		c.Reply = m.script(c)
	}
	m.calls = append(m.calls, c)
	m.mu.Unlock()
	m.reply(w, r, c.Reply)
}

// wait holds r until gate opens; it is false when the caller hung up (or
// the test ended) first.
func (m *Model) wait(r *http.Request, gate chan struct{}) bool {
	m.mu.Lock()
	m.waiting++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.waiting--
		m.mu.Unlock()
	}()
	select {
	case <-gate:
		return true
	case <-r.Context().Done():
	case <-m.quit:
	}
	return false
}

func (m *Model) reply(w http.ResponseWriter, r *http.Request, rep Reply) {
	if rep.Delay > 0 {
		t := time.NewTimer(rep.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-m.quit:
			return
		}
	}
	switch {
	case rep.Hang:
		select {
		case <-r.Context().Done():
		case <-m.quit:
		}
		return
	case rep.Drop:
		hijackClose(w)
		return
	case rep.Cut:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "400")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"reply\":\"hal`)
		w.(http.Flusher).Flush()
		hijackClose(w)
		return
	}
	if rep.RetryAfter != "" {
		w.Header().Set("Retry-After", rep.RetryAfter)
	}
	if rep.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		if rep.Status != 0 {
			w.WriteHeader(rep.Status)
		}
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	if rep.Status >= 400 {
		writeModelError(w, rep.Status, rep.Error, rep.ErrorType)
		return
	}
	prompt, completion := rep.PromptTokens, rep.CompletionTokens
	if prompt == 0 && completion == 0 {
		prompt, completion = 11, 7
	}
	choices := []any{}
	if !rep.NoChoices {
		msg := map[string]any{"role": "assistant", "content": rep.Content}
		if rep.NullContent {
			msg["content"] = nil
		}
		if rep.Refusal != "" || rep.NullContent {
			msg["refusal"] = nil
			if rep.Refusal != "" {
				msg["refusal"] = rep.Refusal
			}
		}
		choices = append(choices, map[string]any{"index": 0, "message": msg, "finish_reason": "stop"})
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.Status != 0 {
		w.WriteHeader(rep.Status)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "x", "object": "chat.completion", "created": 1, "model": "m",
		"choices": choices,
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

func writeModelError(w http.ResponseWriter, status int, msg, typ string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ}})
}

// hijackClose closes the connection under w without answering.
func hijackClose(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// draftJSON is a valid draft whose reply is reply.
func draftJSON(reply string) Reply {
	raw, _ := json.Marshal(map[string]any{"reply": reply, "intent": "support", "name": "Ada", "email": "ada@example.com", "phone": "", "summary": "cites facts", "confidence": 0.8})
	return JSONReply(string(raw))
}

// CiteReply is a valid draft whose reply is text, then a mark citing ids
// as the prompt asks ("… [F1][F3]"); without ids, text as it is (which
// may hold marks of its own).
func CiteReply(text string, ids ...string) Reply {
	if len(ids) > 0 {
		text += " [" + strings.Join(ids, "][") + "]"
	}
	return draftJSON(text)
}

// OfferedFacts is the facts entries a request's system prompt offered,
// by id: the lines "[F3] Open 9–17" (drafter.factsPrompt).
func OfferedFacts(r ChatRequest) map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role != "system" {
			continue
		}
		for _, line := range strings.Split(m.Text(), "\n") {
			id, text, ok := strings.Cut(line, "] ")
			if ok && strings.HasPrefix(id, "[F") && len(id) > 2 && strings.Trim(id[2:], "0123456789") == "" {
				out[id[1:]] = text
			}
		}
	}
	return out
}

// CiteFacts is a script that answers every call with reply, citing each
// fact the call's prompt offered whose text holds one of words (case
// folded), in the order of the ids' numbers: the model using the facts
// as it is asked to.
func CiteFacts(reply string, words ...string) func(ModelCall) Reply {
	return func(c ModelCall) Reply {
		offered := OfferedFacts(c.Req)
		var ids []string
		for id, text := range offered {
			if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(strings.ToLower(text), strings.ToLower(w)) }) {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, func(a, b string) int {
			x, _ := strconv.Atoi(a[1:])
			y, _ := strconv.Atoi(b[1:])
			return x - y
		})
		return CiteReply(reply, ids...)
	}
}
