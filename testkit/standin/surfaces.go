package standin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// SurfaceAPI is a stand-in for the Web APIs the approval surfaces call:
// Slack's (chat.postMessage, chat.update, chat.delete, conversations.history
// with the messages posted and their metadata, views.open, users.info, and
// a response_url under /response/) and Telegram's Bot API (sendMessage,
// editMessageText, deleteMessage, answerCallbackQuery under /bot<token>/). It checks each
// call's documented shape (the token, the JSON body, the required fields
// and their limits), answers as the API does, and records every call.
type SurfaceAPI struct {
	*httptest.Server
	t     testing.TB
	token string // the bot token every call must carry

	mu     sync.Mutex
	calls  []SurfaceCall
	bad    []string
	nextTS int
	// Emails are users.info's answers, by member id.
	Emails map[string]string
	// Fail, when set for a method, answers it with ok false and that error.
	Fail map[string]string
	// Limit, when set for a method, answers it as the API's rate limit with
	// that many seconds to wait (Slack: 429 and Retry-After; Telegram: 429
	// with parameters.retry_after).
	Limit map[string]int
	// Lose, when set for a method, carries out that many of its next calls
	// and closes each one's connection without an answer (an answer lost
	// on the way back).
	Lose map[string]int
	// Accepted, when set, is called with each call carried out (Slack's,
	// Telegram's sendMessage and editMessageText),
	// before it is answered; it may block until r's context ends (the
	// caller killed before the answer).
	Accepted func(method string, r *http.Request)
	// Now, when set, is Slack's clock: a message's ts is its second and a
	// count (unset: 1767225600, 2026-01-01).
	Now func() time.Time

	// messages are the Slack messages posted, by channel, oldest first.
	messages map[string][]slackMsg
}

// slackMsg is one posted Slack message as conversations.history shows it.
type slackMsg struct {
	TS             string
	Text           string
	ThreadTS       string
	ReplyBroadcast bool
	Metadata       map[string]any
}

// Messages are the messages posted in channel, oldest first: their ts and
// metadata event types, for a test's count.
func (s *SurfaceAPI) Messages(channel string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.messages[channel] {
		et, _ := m.Metadata["event_type"].(string)
		out = append(out, m.TS+" "+et)
	}
	return out
}

// SurfaceCall is one API call as the stand-in received it.
type SurfaceCall struct {
	Method string
	Body   map[string]any
}

// NewSurfaceAPI starts a stand-in that takes calls carrying token.
func NewSurfaceAPI(t testing.TB, token string) *SurfaceAPI {
	s := &SurfaceAPI{t: t, token: token, Emails: map[string]string{}, Fail: map[string]string{}, Limit: map[string]int{}, Lose: map[string]int{},
		messages: map[string][]slackMsg{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// ResponseURL is a response_url that the stand-in takes (an interaction's).
func (s *SurfaceAPI) ResponseURL(id string) string { return s.URL + "/response/" + id }

// Calls are the calls of method ("" for every call), in order.
func (s *SurfaceAPI) Calls(method string) []SurfaceCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SurfaceCall
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Malformed are the calls that broke the API's documented shape.
func (s *SurfaceAPI) Malformed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

func (s *SurfaceAPI) malformed(w http.ResponseWriter, format string, args ...any) {
	why := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.bad = append(s.bad, why)
	s.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

func (s *SurfaceAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost {
		s.malformed(w, "%s %s: the APIs take POST", r.Method, r.URL.Path)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		s.malformed(w, "%s: Content-Type %q, want application/json", r.URL.Path, r.Header.Get("Content-Type"))
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		s.malformed(w, "%s: the body is not a JSON object: %v", r.URL.Path, err)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	switch {
	case strings.HasPrefix(path, "response/"):
		s.record("response_url", body)
		w.WriteHeader(http.StatusOK)
		return
	case strings.HasPrefix(path, "bot"):
		tok, method, _ := strings.Cut(strings.TrimPrefix(path, "bot"), "/")
		if tok != s.token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
			return
		}
		s.telegram(w, r, method, body)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	s.slack(w, r, path, body)
}

// answered ends a call carried out: Accepted first, then the answer, or
// none when the method's answers are being lost.
func (s *SurfaceAPI) answered(w http.ResponseWriter, r *http.Request, method string, status int, v any) {
	s.mu.Lock()
	accepted := s.Accepted
	s.mu.Unlock()
	if accepted != nil {
		accepted(method, r)
	}
	s.mu.Lock()
	lose := s.Lose[method] > 0
	if lose {
		s.Lose[method]--
	}
	s.mu.Unlock()
	if lose {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	writeJSON(w, status, v)
}

// checkMetadata checks a message's metadata: an event_type and an
// event_payload object (docs.slack.dev/messaging/message-metadata).
func checkMetadata(v any) (map[string]any, string) {
	if v == nil {
		return nil, ""
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "metadata is not an object"
	}
	et, _ := m["event_type"].(string)
	if et == "" || len(et) > 255 {
		return nil, "metadata.event_type must be 1 to 255 characters"
	}
	if _, ok := m["event_payload"].(map[string]any); !ok {
		return nil, "metadata.event_payload must be an object"
	}
	return m, ""
}

// history answers conversations.history: the channel's messages (and
// replies also sent to it) newer than oldest, newest first, limit of them,
// with their metadata when include_all_metadata is true.
func (s *SurfaceAPI) history(w http.ResponseWriter, r *http.Request, body map[string]any) {
	channel, _ := body["channel"].(string)
	if channel == "" {
		s.malformed(w, "conversations.history without a channel")
		return
	}
	limit := 100
	if l, ok := body["limit"].(float64); ok {
		if l < 1 || l > 999 {
			s.malformed(w, "conversations.history: limit %v is outside 1 to 999", l)
			return
		}
		limit = int(l)
	}
	oldest := 0.0
	if o, ok := body["oldest"].(string); ok {
		f, err := strconv.ParseFloat(o, 64)
		if err != nil || !slackStamp(o) {
			s.malformed(w, "conversations.history: oldest %q is not a timestamp such as 1767225600.000000", o)
			return
		}
		oldest = f
	}
	inclusive, _ := body["inclusive"].(bool)
	meta, _ := body["include_all_metadata"].(bool)
	s.record("conversations.history", body)
	s.mu.Lock()
	var out []map[string]any
	msgs := s.messages[channel]
	for i := len(msgs) - 1; i >= 0 && len(out) < limit; i-- {
		m := msgs[i]
		if m.ThreadTS != "" && !m.ReplyBroadcast {
			continue
		}
		ts, _ := strconv.ParseFloat(m.TS, 64)
		if ts < oldest || (ts == oldest && !inclusive) {
			continue
		}
		e := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
		if m.ThreadTS != "" {
			e["subtype"], e["thread_ts"] = "thread_broadcast", m.ThreadTS
		}
		if meta && m.Metadata != nil {
			e["metadata"] = m.Metadata
		}
		out = append(out, e)
	}
	s.mu.Unlock()
	s.answered(w, r, "conversations.history", http.StatusOK, map[string]any{"ok": true, "messages": out, "has_more": false})
}

// slackStamp says ts is written as seconds.microseconds.
func slackStamp(ts string) bool {
	sec, frac, ok := strings.Cut(ts, ".")
	if !ok || len(frac) != 6 || sec == "" {
		return false
	}
	for _, c := range sec + frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (s *SurfaceAPI) record(method string, body map[string]any) {
	s.mu.Lock()
	s.calls = append(s.calls, SurfaceCall{Method: method, Body: body})
	s.mu.Unlock()
}

// Set changes the stand-in's answers under its lock (a test running calls
// meanwhile): fn may write Fail, Limit, Lose and Accepted.
func (s *SurfaceAPI) Set(fn func(s *SurfaceAPI)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

// knobs reads method's Limit and Fail under the lock.
func (s *SurfaceAPI) knobs(method string) (wait int, limited bool, code string, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait, limited = s.Limit[method]
	code, failed = s.Fail[method]
	return
}

func (s *SurfaceAPI) slack(w http.ResponseWriter, r *http.Request, method string, body map[string]any) {
	wait, limited, code, failed := s.knobs(method)
	if limited {
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	if failed {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": code})
		return
	}
	str := func(k string) string { v, _ := body[k].(string); return v }
	switch method {
	case "chat.postMessage", "chat.update":
		if str("channel") == "" {
			s.malformed(w, "%s without a channel", method)
			return
		}
		blocks, ok := body["blocks"].([]any)
		if !ok || len(blocks) == 0 || len(blocks) > 50 {
			s.malformed(w, "%s: blocks must be 1 to 50 blocks", method)
			return
		}
		if method == "chat.update" && str("ts") == "" {
			s.malformed(w, "chat.update without the message's ts")
			return
		}
		meta, why := checkMetadata(body["metadata"])
		if why != "" {
			s.malformed(w, "%s: %s", method, why)
			return
		}
		if tts := str("thread_ts"); tts != "" && !slackStamp(tts) {
			s.malformed(w, "%s: thread_ts %q is not a message's ts", method, tts)
			return
		}
		if _, ok := body["reply_broadcast"]; ok && str("thread_ts") == "" {
			s.malformed(w, "%s: reply_broadcast without thread_ts", method)
			return
		}
		s.record(method, body)
		ts := str("ts")
		if ts == "" {
			s.mu.Lock()
			s.nextTS++
			sec := int64(1767225600)
			if s.Now != nil {
				sec = s.Now().Unix()
			}
			ts = fmt.Sprintf("%d.%06d", sec, s.nextTS)
			b, _ := body["reply_broadcast"].(bool)
			s.messages[str("channel")] = append(s.messages[str("channel")], slackMsg{TS: ts, Text: str("text"), ThreadTS: str("thread_ts"), ReplyBroadcast: b, Metadata: meta})
			s.mu.Unlock()
		}
		s.answered(w, r, method, http.StatusOK, map[string]any{"ok": true, "channel": str("channel"), "ts": ts})
	case "conversations.history":
		s.history(w, r, body)
	case "chat.delete":
		if str("channel") == "" || !slackStamp(str("ts")) {
			s.malformed(w, "chat.delete needs a channel and a message's ts")
			return
		}
		s.record(method, body)
		s.mu.Lock()
		msgs, found := s.messages[str("channel")], false
		for i, m := range msgs {
			if m.TS == str("ts") {
				s.messages[str("channel")], found = append(msgs[:i:i], msgs[i+1:]...), true
				break
			}
		}
		s.mu.Unlock()
		if !found {
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		s.answered(w, r, method, http.StatusOK, map[string]any{"ok": true, "channel": str("channel"), "ts": str("ts")})
	case "views.open":
		if str("trigger_id") == "" {
			s.malformed(w, "views.open without a trigger_id")
			return
		}
		if _, ok := body["view"].(map[string]any); !ok {
			s.malformed(w, "views.open without a view")
			return
		}
		s.record(method, body)
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "view": map[string]any{"id": "V0001"}})
	case "users.info":
		s.record(method, body)
		email, ok := s.Emails[str("user")]
		if !ok {
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "user": map[string]any{"id": str("user"), "profile": map[string]any{"email": email}}})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (s *SurfaceAPI) telegram(w http.ResponseWriter, r *http.Request, method string, body map[string]any) {
	wait, limited, desc, failed := s.knobs(method)
	if limited {
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error_code": 429,
			"description": "Too Many Requests: retry after " + strconv.Itoa(wait), "parameters": map[string]any{"retry_after": wait}})
		return
	}
	if failed {
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "error_code": 400, "description": desc})
		return
	}
	str := func(k string) string { v, _ := body[k].(string); return v }
	switch method {
	case "sendMessage", "editMessageText":
		if body["chat_id"] == nil {
			s.malformed(w, "%s without a chat_id", method)
			return
		}
		if text := str("text"); text == "" || utf8.RuneCountInString(text) > 4096 {
			s.malformed(w, "%s: text must be 1 to 4096 characters", method)
			return
		}
		if method == "editMessageText" && body["message_id"] == nil {
			s.malformed(w, "editMessageText without a message_id")
			return
		}
		if rp, ok := body["reply_parameters"]; ok {
			m, _ := rp.(map[string]any)
			if _, isNum := m["message_id"].(float64); !isNum {
				s.malformed(w, "%s: reply_parameters without a numeric message_id", method)
				return
			}
		}
		if why := checkKeyboard(body["reply_markup"]); why != "" {
			s.malformed(w, "%s: %s", method, why)
			return
		}
		s.record(method, body)
		id := 0
		if method == "sendMessage" {
			s.mu.Lock()
			s.nextTS++
			id = 100 + s.nextTS
			s.mu.Unlock()
		} else {
			f, _ := body["message_id"].(float64)
			id = int(f)
		}
		// The Message answered names its chat by its numeric id, however
		// chat_id was given (a number, or a numeric string).
		chat := body["chat_id"]
		if cs, ok := chat.(string); ok {
			if n, err := strconv.ParseInt(cs, 10, 64); err == nil {
				chat = n
			} else {
				chat = -1000000000001 // an @channel's id
			}
		}
		s.answered(w, r, method, http.StatusOK, map[string]any{"ok": true, "result": map[string]any{"message_id": id, "chat": map[string]any{"id": chat}, "text": str("text")}})
	case "deleteMessage":
		if body["chat_id"] == nil {
			s.malformed(w, "deleteMessage without a chat_id")
			return
		}
		if _, ok := body["message_id"].(float64); !ok {
			s.malformed(w, "deleteMessage without a numeric message_id")
			return
		}
		s.record(method, body)
		s.answered(w, r, method, http.StatusOK, map[string]any{"ok": true, "result": true})
	case "answerCallbackQuery":
		if str("callback_query_id") == "" {
			s.malformed(w, "answerCallbackQuery without a callback_query_id")
			return
		}
		if utf8.RuneCountInString(str("text")) > 200 {
			s.malformed(w, "answerCallbackQuery: text over 200 characters")
			return
		}
		s.record(method, body)
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": true})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error_code": 404, "description": "Not Found: method not found"})
	}
}

// checkKeyboard checks an InlineKeyboardMarkup: rows of buttons, each with
// text and a callback_data of 1 to 64 bytes.
func checkKeyboard(v any) string {
	if v == nil {
		return ""
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "reply_markup is not an object"
	}
	rows, ok := m["inline_keyboard"].([]any)
	if !ok {
		return "reply_markup has no inline_keyboard"
	}
	for _, row := range rows {
		buttons, ok := row.([]any)
		if !ok {
			return "an inline_keyboard row is not an array"
		}
		for _, b := range buttons {
			bm, _ := b.(map[string]any)
			text, _ := bm["text"].(string)
			data, _ := bm["callback_data"].(string)
			if text == "" {
				return "a button without text"
			}
			if len(data) < 1 || len(data) > 64 {
				return "callback_data is " + strconv.Itoa(len(data)) + " bytes; 1 to 64"
			}
		}
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
