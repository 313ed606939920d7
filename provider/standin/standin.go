// Package standin runs test stand-ins for the providers handoff sends
// through: HTTP servers that check each API's documented request shape,
// answer as the API documents, count every message they accept, and can
// send the provider's delivery receipts. Tests only; nothing in the binary
// imports it.
package standin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is how the stand-in answers a send.
type Mode string

// The modes every kind implements.
const (
	OK        Mode = "ok"        // accept and answer as documented
	Refuse    Mode = "refuse"    // the provider's permanent refusal; nothing accepted
	RateLimit Mode = "ratelimit" // the provider's rate-limit answer; nothing accepted
	Stall     Mode = "stall"     // accept, then never answer (until the caller hangs up)
	Cut       Mode = "cut"       // accept, then close the connection without answering
)

// Message is one message the stand-in accepted.
type Message struct {
	ID   string // the provider id it answered (or would have)
	To   string
	Text string
	Ref  string // our reference, where the request carries one (biz_opaque_callback_data, ?ref= on the Twilio callback)
	// Callback is Twilio's StatusCallback URL.
	Callback string
}

// Server is one provider's stand-in.
type Server struct {
	Kind string
	URL  string // api_base
	// Token is the secret it expects: the bearer token, the Telegram bot
	// token, or the Twilio auth token (with AccountSID).
	Token      string
	AccountSID string
	PhoneID    string

	// Hold is how long an accepted send waits before its answer (0: none),
	// so a test can kill the sender while the provider has the message.
	Hold time.Duration

	srv     *httptest.Server
	holding atomic.Int64

	mu       sync.Mutex
	script   []Mode
	posts    int
	accepted []Message
	requests []string // why a request was refused as malformed, if any
}

// New starts a stand-in for kind (twilio, whatsapp, telegram, slack) that
// answers the n-th send as script[n-1], the last entry repeating (OK when
// empty). It closes at the end of the test.
func New(t testing.TB, kind string, script ...Mode) *Server {
	t.Helper()
	s := &Server{Kind: kind, Token: "tok-" + kind, AccountSID: "AC" + strings.Repeat("a", 32), PhoneID: "1234567890", script: script}
	if kind == "twilio" {
		s.Token = "twilio-auth-token"
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// SetScript replaces the script; the count of sends goes on.
func (s *Server) SetScript(script ...Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = script
}

// Accepted is every message the stand-in accepted, in order.
func (s *Server) Accepted() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.accepted...)
}

// Posts is how many sends reached the stand-in, accepted or not.
func (s *Server) Posts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

// SetHold sets Hold.
func (s *Server) SetHold(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Hold = d
}

// Holding is how many accepted sends are waiting for their answer now.
func (s *Server) Holding() int { return int(s.holding.Load()) }

// Malformed lists the requests refused for their shape (each a sentence).
func (s *Server) Malformed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *Server) path() string {
	switch s.Kind {
	case "twilio":
		return "/2010-04-01/Accounts/" + s.AccountSID + "/Messages.json"
	case "whatsapp":
		return "/v21.0/" + s.PhoneID + "/messages"
	case "telegram":
		return "/bot" + s.Token + "/sendMessage"
	case "slack":
		return "/api/chat.postMessage"
	}
	return "/"
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != s.path() {
		s.bad(w, http.StatusNotFound, fmt.Sprintf("%s %s is not the %s send endpoint", r.Method, r.URL.Path, s.Kind))
		return
	}
	m, why := s.parse(r)
	if why != "" {
		s.bad(w, http.StatusBadRequest, why)
		return
	}
	s.mu.Lock()
	s.posts++
	mode := OK
	if len(s.script) > 0 {
		mode = s.script[min(s.posts, len(s.script))-1]
	}
	if mode == OK || mode == Stall || mode == Cut {
		m.ID = s.newID(len(s.accepted) + 1)
		s.accepted = append(s.accepted, m)
	}
	s.mu.Unlock()

	s.mu.Lock()
	hold := s.Hold
	s.mu.Unlock()
	if hold > 0 && mode == OK {
		s.holding.Add(1)
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		s.holding.Add(-1)
	}
	switch mode {
	case Stall:
		<-r.Context().Done()
		return
	case Cut:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("standin: the server cannot hijack")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	status, body := s.answer(mode, m)
	if mode == RateLimit && s.Kind != "whatsapp" {
		w.Header().Set("Retry-After", "3")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (s *Server) newID(n int) string {
	switch s.Kind {
	case "twilio":
		return fmt.Sprintf("SM%032d", n)
	case "whatsapp":
		return fmt.Sprintf("wamid.HBgL%010d", n)
	case "telegram":
		return strconv.Itoa(100 + n)
	case "slack":
		return fmt.Sprintf("1700000000.%06d", n)
	}
	return strconv.Itoa(n)
}

// answer is the documented answer for mode.
func (s *Server) answer(mode Mode, m Message) (int, string) {
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	switch s.Kind {
	case "twilio":
		switch mode {
		case Refuse:
			return 400, j(map[string]any{"code": 21211, "message": "The 'To' number " + m.To + " is not a valid phone number.", "more_info": "https://www.twilio.com/docs/errors/21211", "status": 400})
		case RateLimit:
			return 429, j(map[string]any{"code": 20429, "message": "Too Many Requests", "more_info": "https://www.twilio.com/docs/errors/20429", "status": 429})
		}
		return 201, j(map[string]any{"sid": m.ID, "status": "queued", "to": m.To, "body": m.Text, "account_sid": s.AccountSID})
	case "whatsapp":
		switch mode {
		case Refuse:
			return 400, j(map[string]any{"error": map[string]any{"message": "(#131026) Message undeliverable", "type": "OAuthException", "code": 131026, "fbtrace_id": "AbC"}})
		case RateLimit:
			return 400, j(map[string]any{"error": map[string]any{"message": "(#130429) Rate limit hit", "type": "OAuthException", "code": 130429, "fbtrace_id": "AbC"}})
		}
		return 200, j(map[string]any{"messaging_product": "whatsapp", "contacts": []any{map[string]any{"input": m.To, "wa_id": m.To}}, "messages": []any{map[string]any{"id": m.ID}}})
	case "telegram":
		switch mode {
		case Refuse:
			return 400, j(map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: chat not found"})
		case RateLimit:
			return 429, j(map[string]any{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3", "parameters": map[string]any{"retry_after": 3}})
		}
		id, _ := strconv.Atoi(m.ID)
		return 200, j(map[string]any{"ok": true, "result": map[string]any{"message_id": id, "date": 1700000000, "chat": map[string]any{"id": m.To, "type": "private"}, "text": m.Text}})
	case "slack":
		switch mode {
		case Refuse:
			// Slack's refusals are 200s.
			return 200, j(map[string]any{"ok": false, "error": "channel_not_found"})
		case RateLimit:
			return 429, j(map[string]any{"ok": false, "error": "ratelimited"})
		}
		return 200, j(map[string]any{"ok": true, "channel": m.To, "ts": m.ID, "message": map[string]any{"text": m.Text}})
	}
	return 500, "{}"
}

// parse checks the documented request shape and reads the message.
func (s *Server) parse(r *http.Request) (Message, string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return Message{}, "the body could not be read"
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := func() (url.Values, string) {
		if ct != "application/x-www-form-urlencoded" {
			return nil, "the body is " + ct + ", not a form"
		}
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, "the form does not parse"
		}
		return v, ""
	}
	switch s.Kind {
	case "twilio":
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.AccountSID+":"+s.Token))
		if r.Header.Get("Authorization") != want {
			return Message{}, "Authentication Error - invalid username (20003)"
		}
		f, why := form()
		if why != "" {
			return Message{}, why
		}
		if f.Get("To") == "" {
			return Message{}, "A 'To' phone number is required. (21604)"
		}
		if f.Get("From") == "" || f.Get("Body") == "" {
			return Message{}, "A 'From' number and a 'Body' are required."
		}
		m := Message{To: f.Get("To"), Text: f.Get("Body"), Callback: f.Get("StatusCallback")}
		if cb, err := url.Parse(m.Callback); err == nil {
			m.Ref = cb.Query().Get("ref")
		}
		return m, ""
	case "whatsapp":
		if r.Header.Get("Authorization") != "Bearer "+s.Token {
			return Message{}, "(#190) Invalid OAuth access token"
		}
		if ct != "application/json" {
			return Message{}, "the body is " + ct + ", not JSON"
		}
		var v struct {
			MessagingProduct string `json:"messaging_product"`
			To               string `json:"to"`
			Type             string `json:"type"`
			Text             struct {
				Body string `json:"body"`
			} `json:"text"`
			Biz string `json:"biz_opaque_callback_data"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return Message{}, "the JSON does not parse"
		}
		if v.MessagingProduct != "whatsapp" || v.To == "" || v.Type != "text" || v.Text.Body == "" {
			return Message{}, "(#100) messaging_product, to, type=text and text.body are required"
		}
		return Message{To: v.To, Text: v.Text.Body, Ref: v.Biz}, ""
	case "telegram":
		if ct != "application/json" {
			return Message{}, "the body is " + ct + ", not JSON"
		}
		var v struct {
			ChatID json.RawMessage `json:"chat_id"`
			Text   string          `json:"text"`
		}
		if err := json.Unmarshal(body, &v); err != nil || len(v.ChatID) == 0 {
			return Message{}, "Bad Request: chat_id is empty"
		}
		if v.Text == "" {
			return Message{}, "Bad Request: message text is empty"
		}
		return Message{To: strings.Trim(string(v.ChatID), `"`), Text: v.Text}, ""
	case "slack":
		if r.Header.Get("Authorization") != "Bearer "+s.Token {
			return Message{}, "not_authed"
		}
		f, why := form()
		if why != "" {
			return Message{}, why
		}
		if f.Get("channel") == "" || f.Get("text") == "" {
			return Message{}, "channel_not_found or no_text"
		}
		return Message{To: f.Get("channel"), Text: f.Get("text")}, ""
	}
	return Message{}, "unknown kind"
}

func (s *Server) bad(w http.ResponseWriter, status int, why string) {
	s.mu.Lock()
	s.requests = append(s.requests, why)
	s.mu.Unlock()
	if s.Kind == "slack" {
		// Slack answers even a malformed call with 200 ok:false.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":false,"error":"invalid_arguments"}`)
		return
	}
	http.Error(w, why, status)
}

// WhatsAppStatus is the body of a WhatsApp status webhook about m.
func WhatsAppStatus(m Message, status string) []byte {
	st := map[string]any{"id": m.ID, "status": status, "timestamp": "1700000000", "recipient_id": m.To}
	if m.Ref != "" {
		st["biz_opaque_callback_data"] = m.Ref
	}
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "WABA", "changes": []any{map[string]any{"field": "messages", "value": map[string]any{
			"messaging_product": "whatsapp", "metadata": map[string]any{"phone_number_id": "1234567890"},
			"statuses": []any{st},
		}}},
	}}})
	return b
}

// TwilioStatus is the form of a Twilio status callback about m.
func TwilioStatus(m Message, status string) url.Values {
	return url.Values{"MessageSid": {m.ID}, "SmsSid": {m.ID}, "MessageStatus": {status}, "To": {m.To}, "AccountSid": {"AC" + strings.Repeat("a", 32)}}
}
