package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// SlackSocket is Slack's side of Socket Mode over real HTTP and WebSocket
// (docs.slack.dev/apis/socket-mode): POST /apps.connections.open with the
// app-level token as Bearer answers a ws:// URL on the same server, whose
// connections the test drives (Next); every other path is the Web API
// stand-in's (chat.postMessage, users.info, the response_url, …), so the
// server's URL is the surface's api_url.
type SlackSocket struct {
	*httptest.Server
	token string

	mu    sync.Mutex
	opens int
	bad   []string
	conns chan *SocketPeer
	quit  chan struct{} // closed at the test's end: every connection's handler returns
}

// SocketPeer is one connection as Slack holds it.
type SocketPeer struct {
	C    *websocket.Conn
	done chan struct{}
	once sync.Once
}

// NewSlackSocket starts the stand-in; api answers the Web API's methods.
func NewSlackSocket(t testing.TB, api *SurfaceAPI, appToken string) *SlackSocket {
	s := &SlackSocket{token: appToken, conns: make(chan *SocketPeer, 8), quit: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apps.connections.open":
			s.mu.Lock()
			defer s.mu.Unlock()
			if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+s.token {
				s.bad = append(s.bad, fmt.Sprintf("%s apps.connections.open without the app token", r.Method))
				writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
				return
			}
			s.opens++
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "url": fmt.Sprintf("ws://%s/link/?ticket=t-%d&app_id=A0TEST", r.Host, s.opens)})
		case "/link/":
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			p := &SocketPeer{C: c, done: make(chan struct{})}
			select {
			case s.conns <- p:
			case <-s.quit:
				return
			}
			select {
			case <-p.done:
			case <-s.quit:
			}
		default:
			api.Config.Handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() { close(s.quit); s.Close() })
	return s
}

// Opens counts the apps.connections.open calls answered with a URL.
func (s *SlackSocket) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Refused are the apps.connections.open calls refused (no or another token).
func (s *SlackSocket) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// Waiting counts the connections accepted and not yet taken by Next.
func (s *SlackSocket) Waiting() int { return len(s.conns) }

// Next is the next connection handoff opens, greeted with hello.
func (s *SlackSocket) Next(t testing.TB) *SocketPeer {
	t.Helper()
	select {
	case p := <-s.conns:
		t.Cleanup(p.Done)
		p.Send(t, map[string]any{"type": "hello", "num_connections": 1, "debug_info": map[string]any{"host": "applink-standin"},
			"connection_info": map[string]any{"app_id": "A0TEST"}})
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("handoff opened no Socket Mode connection within 10 s")
		return nil
	}
}

// Done closes the connection (without a close frame) and lets its
// handler return.
func (p *SocketPeer) Done() {
	p.once.Do(func() {
		p.C.CloseNow()
		close(p.done)
	})
}

// Send writes v as one text message.
func (p *SocketPeer) Send(t testing.TB, v any) {
	t.Helper()
	raw, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.C.Write(ctx, websocket.MessageText, raw); err != nil {
		t.Fatalf("write to handoff: %v", err)
	}
}

// Interactive sends payload as an interactive envelope, as Slack does
// (retry > 0: a resend, retry_reason timeout), and returns handoff's ack,
// which must come within Slack's 3 s and name the envelope.
func (p *SocketPeer) Interactive(t testing.TB, id string, retry int, payload json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	reason := ""
	if retry > 0 {
		reason = "timeout"
	}
	p.Send(t, map[string]any{"envelope_id": id, "type": "interactive", "payload": payload, "accepts_response_payload": true,
		"retry_attempt": retry, "retry_reason": reason})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, raw, err := p.C.Read(ctx)
	if err != nil {
		t.Fatalf("envelope %s: no ack within Slack's 3 s: %v", id, err)
	}
	var ack map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ack); err != nil {
		t.Fatalf("envelope %s: the ack %q is not JSON", id, raw)
	}
	if string(ack["envelope_id"]) != `"`+id+`"` {
		t.Fatalf("ack %s, want envelope_id %q", raw, id)
	}
	return ack
}
