// Package standin is the test kit's fake provider: one scriptable HTTP
// server per provider handoff sends through (the generic http kind with a
// JSON or form body, twilio, whatsapp and meta (Messenger and Instagram's
// Send API) on Meta's graph API, telegram, slack). It checks each API's documented request shape, answers each send
// as its script says in the provider's own shapes (accepted with an id, a
// refusal or an error status with the provider's error body, a rate limit
// with Retry-After, a dropped connection, a slow or held answer), records
// every send and lookup, and can write the provider's delivery receipts.
// Tests only; nothing in the binary imports it.
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
	"unicode/utf8"
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
	Held      Mode = "held"      // accept, then answer as OK once Release is called (or never, if the caller hangs up first)
)

// Status is the mode that answers the HTTP status code with the
// provider's error body, accepting nothing: Status(500), Status(429).
func Status(code int) Mode { return Mode(strconv.Itoa(code)) }

// Answer is the mode that answers exactly status, body and the header
// pairs (name, value, …), accepting nothing: for the answers a provider
// gives that no other mode names (an error code, a body cut short).
func Answer(status int, body string, header ...string) Mode {
	b, _ := json.Marshal(rawAnswer{status, body, header})
	return Mode(rawPrefix + string(b))
}

const rawPrefix = "answer "

type rawAnswer struct {
	Status int
	Body   string
	Header []string
}

// raw is an Answer mode's answer; ok is false for the other modes.
func (m Mode) raw() (a rawAnswer, ok bool) {
	rest, ok := strings.CutPrefix(string(m), rawPrefix)
	return a, ok && json.Unmarshal([]byte(rest), &a) == nil
}

// status is the code of a Status mode, 0 for the others.
func (m Mode) status() int {
	n, err := strconv.Atoi(string(m))
	if err != nil {
		return 0
	}
	return n
}

// Message is one message the stand-in accepted.
type Message struct {
	ID   string // the provider id it answered (or would have)
	To   string
	Text string
	Ref  string // our reference, where the request carries one (biz_opaque_callback_data, ?ref= on the Twilio callback)
	// Callback is Twilio's StatusCallback URL.
	Callback string
	// Reply is what the message answers in its chat: Telegram's
	// reply_parameters.message_id, Slack's thread_ts; "" for none.
	Reply string
}

// Send is one send that reached the stand-in, well formed, whatever the
// answer.
type Send struct {
	Message            // what it carried; ID is set when it was accepted
	Mode        Mode   // how it was answered
	Key         string // its Idempotency-Key
	Correlation string // its X-Correlation-ID
	Header      http.Header
	Body        []byte
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
	// Dedupe (http kind) honours Idempotency-Key: a send with a key it
	// accepted before is answered with the first id, and accepted once.
	Dedupe bool

	srv     *httptest.Server
	holding atomic.Int64
	release chan struct{} // closed by Release: the Held sends answer
	once    sync.Once
	quit    chan struct{} // closed at cleanup: every held or stalled send ends

	mu       sync.Mutex
	script   []Mode
	sends    []Send
	accepted []Message
	byKey    map[string]string // http with Dedupe: Idempotency-Key -> id
	lookups  []string          // the refs looked up (http kind)
	requests []string          // why a request was refused as malformed, if any
}

// New starts a stand-in for kind (http, twilio, whatsapp, meta,
// telegram, slack) that answers the n-th send as script[n-1], the last entry
// repeating (OK when empty). It closes at the end of the test, ending the
// sends it still holds.
//
// The http kind takes a JSON or form body with client_ref, to and text
// (what the http provider sends) at SendURL, answers {"id":…}, and answers
// lookups at LookupURL from the messages it accepted.
func New(t testing.TB, kind string, script ...Mode) *Server {
	t.Helper()
	s := &Server{Kind: kind, Token: "tok-" + kind, AccountSID: "AC" + strings.Repeat("a", 32), PhoneID: "1234567890", script: script,
		release: make(chan struct{}), quit: make(chan struct{}), byKey: map[string]string{}}
	if kind == "twilio" {
		s.Token = "twilio-auth-token"
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.quit)
		s.srv.Close()
	})
	return s
}

// SendURL is the http kind's url: the endpoint it posts sends to.
func (s *Server) SendURL() string { return s.URL + "/messages" }

// LookupURL is the http kind's lookup_url.
func (s *Server) LookupURL() string { return s.URL + "/lookup?client_ref={ref}" }

// Release answers the sends Held now, and every later Held one at once.
func (s *Server) Release() { s.once.Do(func() { close(s.release) }) }

// Sends is every well-formed send that reached the stand-in, in order.
func (s *Server) Sends() []Send {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Send(nil), s.sends...)
}

// Lookups is the refs the http kind was asked to look up, in order.
func (s *Server) Lookups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lookups...)
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
	return len(s.sends)
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
	case "meta":
		return "/v21.0/me/messages"
	case "telegram":
		return "/bot" + s.Token + "/sendMessage"
	case "slack":
		return "/api/chat.postMessage"
	case "http":
		return "/messages"
	}
	return "/"
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.Kind == "http" && r.Method == http.MethodGet && r.URL.Path == "/lookup" {
		s.lookup(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != s.path() {
		s.bad(w, http.StatusNotFound, fmt.Sprintf("%s %s is not the %s send endpoint", r.Method, r.URL.Path, s.Kind))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.bad(w, http.StatusBadRequest, "the body could not be read")
		return
	}
	m, why := s.parse(r, body)
	if why != "" {
		s.bad(w, http.StatusBadRequest, why)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	mode := OK
	if len(s.script) > 0 {
		mode = s.script[min(len(s.sends)+1, len(s.script))-1]
	}
	if mode == OK || mode == Stall || mode == Cut || mode == Held {
		if id, ok := s.byKey[key]; ok && s.Dedupe && key != "" {
			m.ID = id // a resend of one it has: the first id, nothing new
		} else {
			m.ID = s.newID(len(s.accepted) + 1)
			s.accepted = append(s.accepted, m)
			if s.Dedupe && key != "" {
				s.byKey[key] = m.ID
			}
		}
	}
	s.sends = append(s.sends, Send{Message: m, Mode: mode, Key: key, Correlation: r.Header.Get("X-Correlation-ID"), Header: r.Header.Clone(), Body: body})
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
	if a, ok := mode.raw(); ok {
		for i := 0; i+1 < len(a.Header); i += 2 {
			w.Header().Set(a.Header[i], a.Header[i+1])
		}
		w.WriteHeader(a.Status)
		_, _ = io.WriteString(w, a.Body)
		return
	}
	switch mode {
	case Stall:
		select {
		case <-r.Context().Done():
		case <-s.quit:
		}
		return
	case Held:
		s.holding.Add(1)
		defer s.holding.Add(-1)
		select {
		case <-s.release:
			mode = OK
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		}
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
	status, answer := s.answer(mode, m)
	switch {
	case mode == RateLimit && s.Kind == "meta":
		// The Graph API advertises its wait in minutes, per business use case.
		w.Header().Set("X-Business-Use-Case-Usage", `{"1234567890":[{"type":"messenger","call_count":100,"total_cputime":1,"total_time":1,"estimated_time_to_regain_access":1}]}`)
	case mode == RateLimit && s.Kind != "whatsapp":
		w.Header().Set("Retry-After", "3")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func (s *Server) newID(n int) string {
	switch s.Kind {
	case "twilio":
		return fmt.Sprintf("SM%032d", n)
	case "whatsapp":
		return fmt.Sprintf("wamid.HBgL%010d", n)
	case "meta":
		return fmt.Sprintf("m_AG5Hz2Uq7tuwNEhXfYYK%010d", n)
	case "telegram":
		return strconv.Itoa(100 + n)
	case "slack":
		return fmt.Sprintf("1700000000.%06d", n)
	case "http":
		return fmt.Sprintf("msg-%d", n)
	}
	return strconv.Itoa(n)
}

// answer is the documented answer for mode.
func (s *Server) answer(mode Mode, m Message) (int, string) {
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if code := mode.status(); code != 0 {
		return code, s.errorBody(code)
	}
	switch s.Kind {
	case "http":
		switch mode {
		case Refuse:
			return 400, j(map[string]any{"error": "the number is not reachable"})
		case RateLimit:
			return 429, j(map[string]any{"error": "rate limited"})
		}
		return 200, j(map[string]any{"id": m.ID})
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
	case "meta":
		switch mode {
		case Refuse:
			return 400, j(map[string]any{"error": map[string]any{"message": "(#10) This message is sent outside of allowed window.", "type": "OAuthException", "code": 10, "error_subcode": 2018278, "fbtrace_id": "AbC"}})
		case RateLimit:
			return 400, j(map[string]any{"error": map[string]any{"message": "(#613) Calls to this api have exceeded the rate limit.", "type": "OAuthException", "code": 613, "fbtrace_id": "AbC"}})
		}
		return 200, j(map[string]any{"recipient_id": m.To, "message_id": m.ID})
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

// errorBody is the provider's error body for an HTTP status.
func (s *Server) errorBody(code int) string {
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	msg := fmt.Sprintf("scripted %d", code)
	switch s.Kind {
	case "twilio":
		return j(map[string]any{"code": 20500, "message": msg, "more_info": "https://www.twilio.com/docs/errors/20500", "status": code})
	case "whatsapp", "meta":
		return j(map[string]any{"error": map[string]any{"message": msg, "type": "OAuthException", "code": 1, "fbtrace_id": "AbC"}})
	case "telegram":
		return j(map[string]any{"ok": false, "error_code": code, "description": msg})
	case "slack":
		return j(map[string]any{"ok": false, "error": "internal_error"})
	}
	return j(map[string]any{"error": msg})
}

// lookup answers the http kind's lookup of client_ref from the messages
// it accepted.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("client_ref")
	s.mu.Lock()
	s.lookups = append(s.lookups, ref)
	id := ""
	for _, m := range s.accepted {
		if m.Ref == ref {
			id = m.ID
			break
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if id == "" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"no such message"}`)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "status": "sent"})
}

// parse checks the documented request shape and reads the message.
func (s *Server) parse(r *http.Request, body []byte) (Message, string) {
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
	case "http":
		var v struct {
			Ref  string `json:"client_ref"`
			To   string `json:"to"`
			Text string `json:"text"`
		}
		if ct == "application/x-www-form-urlencoded" {
			f, why := form()
			if why != "" {
				return Message{}, why
			}
			v.Ref, v.To, v.Text = f.Get("client_ref"), f.Get("to"), f.Get("text")
		} else if err := json.Unmarshal(body, &v); err != nil {
			return Message{}, "the body is neither JSON nor a form"
		}
		return Message{To: v.To, Text: v.Text, Ref: v.Ref}, ""
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
			// A template message: its name and language.code required.
			Template *struct {
				Name     string `json:"name"`
				Language struct {
					Code string `json:"code"`
				} `json:"language"`
			} `json:"template"`
			Biz string `json:"biz_opaque_callback_data"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return Message{}, "the JSON does not parse"
		}
		if v.Type == "template" {
			if v.MessagingProduct != "whatsapp" || v.To == "" || v.Template == nil || v.Template.Name == "" || v.Template.Language.Code == "" {
				return Message{}, "(#100) messaging_product, to, template.name and template.language.code are required"
			}
			return Message{To: v.To, Text: "template " + v.Template.Name, Ref: v.Biz}, ""
		}
		if v.MessagingProduct != "whatsapp" || v.To == "" || v.Type != "text" || v.Text.Body == "" {
			return Message{}, "(#100) messaging_product, to, type=text and text.body are required"
		}
		return Message{To: v.To, Text: v.Text.Body, Ref: v.Biz}, ""
	case "meta":
		if r.Header.Get("Authorization") != "Bearer "+s.Token {
			return Message{}, "(#190) Invalid OAuth access token"
		}
		if ct != "application/json" {
			return Message{}, "the body is " + ct + ", not JSON"
		}
		var v struct {
			Recipient struct {
				ID string `json:"id"`
			} `json:"recipient"`
			MessagingType string `json:"messaging_type"`
			Tag           string `json:"tag"`
			Message       struct {
				Text string `json:"text"`
			} `json:"message"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return Message{}, "the JSON does not parse"
		}
		if _, err := strconv.ParseUint(v.Recipient.ID, 10, 64); err != nil {
			return Message{}, "(#100) recipient.id must be a page-scoped id"
		}
		tagged := v.MessagingType == "MESSAGE_TAG" && v.Tag == "HUMAN_AGENT"
		if (v.MessagingType != "RESPONSE" || v.Tag != "") && !tagged || v.Message.Text == "" {
			return Message{}, "(#100) messaging_type RESPONSE (or MESSAGE_TAG with tag HUMAN_AGENT) and message.text are required"
		}
		if utf8.RuneCountInString(v.Message.Text) > 2000 {
			return Message{}, "(#100) message.text is longer than 2000 characters"
		}
		return Message{To: v.Recipient.ID, Text: v.Message.Text}, ""
	case "telegram":
		if ct != "application/json" {
			return Message{}, "the body is " + ct + ", not JSON"
		}
		var v struct {
			ChatID json.RawMessage `json:"chat_id"`
			Text   string          `json:"text"`
			// core.telegram.org/bots/api#replyparameters: message_id an
			// Integer, the only field required.
			Reply *struct {
				MessageID json.RawMessage `json:"message_id"`
			} `json:"reply_parameters"`
		}
		if err := json.Unmarshal(body, &v); err != nil || len(v.ChatID) == 0 {
			return Message{}, "Bad Request: chat_id is empty"
		}
		if v.Text == "" {
			return Message{}, "Bad Request: message text is empty"
		}
		m := Message{To: strings.Trim(string(v.ChatID), `"`), Text: v.Text}
		if v.Reply != nil {
			if _, err := strconv.ParseInt(string(v.Reply.MessageID), 10, 64); err != nil {
				return Message{}, "Bad Request: can't parse reply parameters JSON object"
			}
			m.Reply = string(v.Reply.MessageID)
		}
		return m, ""
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
		// thread_ts is a parent message's ts: seconds, a dot, six digits.
		if ts, ok := f["thread_ts"]; ok && !slackTS(first(ts)) {
			return Message{}, "invalid_thread_ts"
		}
		return Message{To: f.Get("channel"), Text: f.Get("text"), Reply: f.Get("thread_ts")}, ""
	}
	return Message{}, "unknown kind"
}

// slackTS says ts is written as Slack writes a message's ts ("1767225600.000200").
func slackTS(ts string) bool {
	sec, frac, ok := strings.Cut(ts, ".")
	if !ok || sec == "" || len(frac) != 6 {
		return false
	}
	return strings.Trim(sec+frac, "0123456789") == ""
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
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
