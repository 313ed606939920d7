package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Slack Socket Mode (approvals.slack.socket_mode): instead of Slack
// POSTing interactions to /surfaces/slack, handoff opens the connection
// itself — apps.connections.open with the app-level xapp- token gives a
// wss:// URL — so an install behind NAT needs no public address. Slack
// sends envelopes over it (docs.slack.dev/apis/socket-mode):
//
//	hello        the connection is ready (the backoff starts again from its base)
//	disconnect   Slack is about to close it (warning, refresh_requested,
//	             link_disabled): a fresh URL is opened at once (after the
//	             backoff when the connection never said hello)
//	interactive  one interaction payload (block_actions, view_submission):
//	             it goes through interact, exactly as a signed POST's does
//	             (the same users mapping, client scope, review decision,
//	             card follow jobs), then is acknowledged with
//	             {"envelope_id": …} — with the answer's JSON as the ack's
//	             payload (a view_submission's response_action) — within
//	             Slack's 3 s
//
// Socket Mode payloads are not signed: the TLS connection opened with the
// app token is their authentication. Slack resends an envelope it saw no
// ack for; a resent envelope id is acknowledged without being handled
// again, and a payload handled twice still decides once (review makes an
// approval idempotent: the second answers "already approved by …"). A
// connection that drops, or fails to open, is opened again after a
// backoff that doubles from socketBackoff to socketBackoffMax.

// Socket Mode's timings.
const (
	socketBackoff    = time.Second
	socketBackoffMax = time.Minute
	socketPing       = 30 * time.Second // a ping of handoff's own: a NAT that dropped the connection is noticed
	socketHandle     = 10 * time.Second // one envelope's handling (a decision is one transaction; Slack wants the ack in 3 s)
	socketSeen       = 30 * time.Minute // how long an envelope id is remembered against Slack's resends
	socketReadLimit  = 1 << 20
)

// socketState is the Socket Mode side of the Slack surface.
type socketState struct {
	// backoff is the first wait before a reconnect (0: socketBackoff);
	// tests make it short.
	backoff time.Duration

	mu   sync.Mutex
	seen map[string]time.Time // envelope id -> when it first came
	// connects counts the connections that said hello (tests, the log).
	connects int
}

// socketEnvelope is one message of Slack's over the connection.
type socketEnvelope struct {
	Type                   string          `json:"type"`
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           int             `json:"retry_attempt"`
	RetryReason            string          `json:"retry_reason"`
	Reason                 string          `json:"reason"` // disconnect's
	NumConnections         int             `json:"num_connections"`
}

// socketAck acknowledges one envelope.
type socketAck struct {
	EnvelopeID string          `json:"envelope_id"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// Listen keeps the Socket Mode connection open until ctx ends, when
// socket_mode is set (else it returns at once). It returns once every
// envelope being handled has been answered.
func (s *slackSurface) Listen(ctx context.Context) {
	if !s.cfg.SocketMode {
		return
	}
	base := s.sock.backoff
	if base <= 0 {
		base = socketBackoff
	}
	wait := base
	for ctx.Err() == nil {
		hello, err := s.connect(ctx)
		if ctx.Err() != nil {
			return
		}
		if hello {
			wait = base // it worked for a while: start again from the base
			if errors.Is(err, errRefresh) {
				continue // Slack asked for a fresh connection: open it at once
			}
		}
		if err != nil {
			s.a.log.Warn("approvals: slack socket mode: the connection ended; opening another", slog.Any("err", err), slog.Duration("after", wait))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, socketBackoffMax)
	}
}

// errRefresh ends a connection Slack asked to leave (a disconnect).
var errRefresh = errors.New("slack asked for a fresh connection")

// connect opens one connection and reads it until it ends; hello says
// whether Slack greeted it. A disconnect envelope ends it with
// errRefresh, after which Listen opens the next one.
func (s *slackSurface) connect(ctx context.Context) (hello bool, err error) {
	wss, err := s.openURL(ctx)
	if err != nil {
		return false, err
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	conn, _, err := websocket.Dial(dctx, wss, &websocket.DialOptions{HTTPClient: s.a.http})
	cancel()
	if err != nil {
		// The URL carries a ticket: never in a log line.
		return false, fmt.Errorf("slack socket mode: connect: %s", strings.ReplaceAll(err.Error(), wss, "<the connection's url>"))
	}
	conn.SetReadLimit(socketReadLimit)
	cctx, stop := context.WithCancel(ctx)
	var handlers sync.WaitGroup
	defer func() {
		stop()
		handlers.Wait() // each envelope is answered (or its ack fails) before the next connection
		conn.CloseNow()
	}()
	handlers.Go(func() { s.ping(cctx, conn) })
	for {
		_, raw, err := conn.Read(cctx)
		if err != nil {
			return hello, fmt.Errorf("slack socket mode: read: %w", err)
		}
		var env socketEnvelope
		if err := json.Unmarshal(raw, &env); err != nil {
			s.a.log.Warn("approvals: slack socket mode: a message that is not an envelope was ignored", slog.Int("bytes", len(raw)))
			continue
		}
		switch env.Type {
		case "hello":
			hello = true
			s.sock.mu.Lock()
			s.sock.connects++
			s.sock.mu.Unlock()
			s.a.log.Info("approvals: slack socket mode connected", slog.Int("connections", env.NumConnections))
		case "disconnect":
			s.a.log.Info("approvals: slack socket mode: slack asked for a fresh connection", slog.String("reason", env.Reason))
			// Slack closes it itself: no close handshake to wait for.
			return hello, fmt.Errorf("%w (%s)", errRefresh, env.Reason)
		default:
			if env.EnvelopeID == "" {
				continue // nothing to acknowledge
			}
			handlers.Go(func() { s.envelope(ctx, conn, env) })
		}
	}
}

// openURL asks apps.connections.open for a connection's URL.
func (s *slackSurface) openURL(ctx context.Context) (string, error) {
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ans, err := s.a.do(octx, s.cfg.APIURL+"/apps.connections.open", http.Header{
		"Content-Type":  {"application/x-www-form-urlencoded"},
		"Authorization": {"Bearer " + s.cfg.AppToken},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("slack apps.connections.open: %w", err)
	}
	if ans.ReadErr != nil || ans.Status != http.StatusOK {
		return "", fmt.Errorf("slack apps.connections.open: HTTP %d", ans.Status)
	}
	var out struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		URL   string `json:"url"`
	}
	if err := json.Unmarshal(ans.Body, &out); err != nil {
		return "", fmt.Errorf("slack apps.connections.open: the answer is not JSON: %w", err)
	}
	if !out.OK {
		return "", &SlackAPIError{Method: "apps.connections.open", Code: out.Error}
	}
	if !s.socketURL(out.URL) {
		return "", errors.New("slack apps.connections.open: the answer's url is not a wss:// address")
	}
	return out.URL, nil
}

// socketURL reports whether u may be connected to: a wss:// URL, or a
// plain ws:// one on the API's own host (a stand-in over plain HTTP).
func (s *slackSurface) socketURL(u string) bool {
	got, err := url.Parse(u)
	if err != nil || got.Host == "" {
		return false
	}
	if got.Scheme == "wss" {
		return true
	}
	api, err := url.Parse(s.cfg.APIURL)
	return err == nil && got.Scheme == "ws" && api.Scheme == "http" && got.Host == api.Host
}

// ping pings the connection every socketPing; a ping unanswered closes it,
// so that the read ends and Listen opens another.
func (s *slackSurface) ping(ctx context.Context, conn *websocket.Conn) {
	t := time.NewTicker(socketPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.a.log.Warn("approvals: slack socket mode: a ping went unanswered; reconnecting", slog.Any("err", err))
			conn.CloseNow()
			return
		}
	}
}

// first reports whether envelope id is new, and remembers it.
func (s *slackSurface) first(id string, now time.Time) bool {
	s.sock.mu.Lock()
	defer s.sock.mu.Unlock()
	if s.sock.seen == nil {
		s.sock.seen = map[string]time.Time{}
	}
	if _, ok := s.sock.seen[id]; ok {
		return false
	}
	for k, at := range s.sock.seen {
		if now.Sub(at) > socketSeen {
			delete(s.sock.seen, k)
		}
	}
	s.sock.seen[id] = now
	return true
}

// envelope handles one envelope and acknowledges it: an interaction's
// payload through interact, as a signed POST's; any other kind (events,
// slash commands) is acknowledged alone, as /surfaces/slack answers 200.
func (s *slackSurface) envelope(ctx context.Context, conn *websocket.Conn, env socketEnvelope) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), socketHandle)
	defer cancel()
	ack := socketAck{EnvelopeID: env.EnvelopeID}
	switch {
	case !s.first(env.EnvelopeID, time.Now()):
		// Slack's resend of an envelope whose ack it missed: handled once.
		s.a.log.Info("approvals: slack socket mode: a resent envelope acknowledged again", slog.String("envelope", env.EnvelopeID), slog.Int("retry", env.RetryAttempt))
	case env.Type == "interactive":
		ans := s.interact(hctx, env.Payload)
		switch {
		case ans.Status/100 != 2:
			s.a.log.Warn("approvals: slack socket mode: an interaction was refused", slog.Int("status", ans.Status), slog.String("why", strings.TrimSpace(string(ans.Body))))
		case strings.HasPrefix(ans.ContentType, "application/json") && len(ans.Body) > 0 && env.AcceptsResponsePayload:
			ack.Payload = ans.Body
		}
	}
	raw, err := json.Marshal(ack)
	if err != nil {
		return
	}
	if err := conn.Write(hctx, websocket.MessageText, raw); err != nil {
		s.a.log.Warn("approvals: slack socket mode: an ack was not sent; slack will resend the envelope", slog.String("envelope", env.EnvelopeID), slog.Any("err", err))
	}
}

// socketConnects is how many connections said hello (tests).
func (s *slackSurface) socketConnects() int {
	s.sock.mu.Lock()
	defer s.sock.mu.Unlock()
	return s.sock.connects
}

// Listener is a surface that keeps a connection of its own open (Slack's
// Socket Mode) while the process runs.
type Listener interface {
	Listen(ctx context.Context)
}

// Listen runs every surface's own connection (a Listener's) until ctx
// ends, and returns once all of them have returned.
func (a *Approvals) Listen(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range a.surfaces {
		if l, ok := s.(Listener); ok {
			wg.Go(func() { l.Listen(ctx) })
		}
	}
	wg.Wait()
}
