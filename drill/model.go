package drill

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
)

// model is a fake OpenAI-compatible chat completions server in the drill
// process. Every fixture text carries a tag ("[drill:dup-07] ..."), and the
// newest user message of a prompt holds the text, so the server counts the
// calls made for each event and can be told to fail for one of them.
type model struct {
	srv *httptest.Server

	mu       sync.Mutex
	calls    map[string]int // per tag, every call
	failures map[string]int // per tag, the calls answered with 500
	failing  map[string]bool
	untagged int
}

// tagRE finds a fixture tag in a prompt.
var tagRE = regexp.MustCompile(`\[drill:([a-z0-9-]+)\]`)

func newModel() *model {
	m := &model{calls: map[string]int{}, failures: map[string]int{}, failing: map[string]bool{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve)) // listens on 127.0.0.1
	return m
}

// baseURL is what the instance's drafter.base_url points at.
func (m *model) baseURL() string { return m.srv.URL + "/v1" }

func (m *model) close() { m.srv.Close() }

// fail makes every call for tag answer 500 (on) or succeed (off).
func (m *model) fail(tag string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failing[tag] = on
}

// count is how many calls were made for tag, and how many of them failed.
func (m *model) count(tag string) (calls, failed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[tag], m.failures[tag]
}

// chatRequest is the part of a chat completions request the fake reads.
type chatRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func (m *model) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"the drill's fake model only serves POST /v1/chat/completions","type":"invalid_request_error"}}`)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"the body is not a chat completions request","type":"invalid_request_error"}}`)
		return
	}
	tag := ""
	for n := len(req.Messages) - 1; n >= 0; n-- {
		if req.Messages[n].Role == "user" {
			if sub := tagRE.FindStringSubmatch(contentText(req.Messages[n].Content)); sub != nil {
				tag = sub[1]
			}
			break
		}
	}

	m.mu.Lock()
	var fail bool
	var n int
	if tag == "" {
		m.untagged++
		n = m.untagged
	} else {
		m.calls[tag]++
		n = m.calls[tag]
		if fail = m.failing[tag]; fail {
			m.failures[tag]++
		}
	}
	m.mu.Unlock()

	if fail {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"the drill's fake model is told to fail for this message","type":"server_error"}}`)
		return
	}
	answer, _ := json.Marshal(map[string]any{
		"reply":  fmt.Sprintf("Thanks for your message, we will get back to you shortly. (drill reply %d)", n),
		"intent": "sales", "name": "", "email": "", "phone": "",
		"summary": "A drill message.", "confidence": 0.9,
	})
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-drill-%s-%d", tag, n), "object": "chat.completion", "created": 1, "model": "drill-model",
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": string(answer)},
		}},
		"usage": map[string]any{"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60},
	})
}

// contentText is a message's text: a plain string, or the text parts of a
// list of content parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	out := ""
	for _, p := range parts {
		if p.Type == "text" {
			out += p.Text + "\n"
		}
	}
	return out
}
