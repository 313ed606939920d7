package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/store"
)

// hookAnswer is the body of every non-error webhook answer for one message.
type hookAnswer struct {
	Status        string `json:"status"`
	EventKey      string `json:"event_key"`
	CorrelationID string `json:"correlation_id"`
}

// batchAnswer is the body for a channel whose requests carry several
// messages (messages.items set), or none: every outcome, in body order.
type batchAnswer struct {
	Status        string       `json:"status"` // accepted (one new at least), duplicate, or ignored (no message)
	Events        []hookAnswer `json:"events"`
	Notifications int          `json:"notifications"`
	Receipts      int          `json:"receipts"`
}

// twiml is the empty TwiML document Twilio expects: no reply is sent from
// the webhook itself, handoff replies later through the provider.
const twiml = `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`

// maxChallenge bounds the handshake challenge echoed back.
const maxChallenge = 1024

// newVerifiers builds each signed channel's verifier once, at start.
func newVerifiers(cfg *config.Config) (map[string]hook.Verifier, error) {
	out := map[string]hook.Verifier{}
	for _, ch := range cfg.Channels {
		if ch.Signature == nil {
			continue
		}
		v, err := hook.NewVerifier(ch.Signature.Verifying())
		if err != nil {
			return nil, fmt.Errorf("web: channel %s: %w", ch.Name, err)
		}
		out[ch.Name] = v
	}
	return out, nil
}

// receiveHook records an inbound request's messages and enqueues their
// draft jobs in one transaction, durable before the answer, and counts
// every outcome. Nothing is stored on any error.
func (s *Server) receiveHook(c *echo.Context) error {
	name := c.Param("channel")
	outcomes, err := s.receive(c, name)
	for _, o := range outcomes {
		s.metrics.Webhook(name, o)
	}
	return err
}

// publicURL is the URL the sender called: base_url when set (behind a
// proxy the request's own scheme and host are the proxy's), else this
// request's scheme and Host.
func (s *Server) publicURL(req *http.Request) string {
	if s.cfg.BaseURL != "" {
		return strings.TrimRight(s.cfg.BaseURL, "/") + req.URL.RequestURI()
	}
	scheme := "http"
	if req.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + req.Host + req.URL.RequestURI()
}

// receive does the work of receiveHook and names its outcomes for metrics.
func (s *Server) receive(c *echo.Context, name string) ([]string, error) {
	ch, ok := s.cfg.Channel(name)
	if !ok {
		return []string{"rejected_unknown_channel"}, errorf(http.StatusNotFound, "there is no channel named %q", name)
	}
	req := c.Request()
	tooLarge := func() error {
		return errorf(http.StatusRequestEntityTooLarge, "the body is larger than the %d-byte limit of channel %s", ch.MaxBody, ch.Name)
	}
	if req.ContentLength > ch.MaxBody {
		return []string{"rejected_too_large"}, tooLarge() // refused unread
	}
	// Room for the body first (limits.bodies_in_flight), so that a flood
	// of large bodies waits in the socket buffers instead of the heap.
	release, err := s.bodies.reserve(req.Context(), bodyReserve(req.ContentLength, ch.MaxBody), s.cfg.Limits.BodyWait)
	if err != nil {
		return []string{"rejected_busy"}, s.busy(c)
	}
	defer release()
	body, err := readBody(c.Response(), req, ch.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return []string{"rejected_too_large"}, tooLarge()
		}
		return []string{"rejected_unreadable"}, &apiError{status: http.StatusBadRequest, msg: "the body could not be read", err: err}
	}
	now := s.now().UTC()
	var once *hook.Once
	if v := s.verifiers[ch.Name]; v != nil {
		hr := &hook.Request{URL: s.publicURL(req), Header: req.Header, Body: body, Now: now}
		if ov, ok := v.(hook.OnceVerifier); ok {
			o, err := ov.VerifyOnce(hr)
			if err != nil {
				return []string{"rejected_signature"}, refused(err, http.StatusUnauthorized)
			}
			once = &o
		} else if err := v.Verify(hr); err != nil {
			return []string{"rejected_signature"}, refused(err, http.StatusUnauthorized)
		}
	}
	p, err := hook.Parse(req.Header.Get("Content-Type"), body, req.Header)
	if err != nil {
		return []string{"rejected_body"}, refused(err, http.StatusBadRequest)
	}
	if ch.Handshake == hook.HandshakeSlack {
		if t, _, _ := p.Field("/type"); t == "url_verification" {
			challenge, _, _ := p.Field("/challenge")
			if !validChallenge(challenge) {
				return []string{"rejected_handshake"}, errorf(http.StatusBadRequest, "the url_verification challenge is missing or not printable text of at most %d bytes", maxChallenge)
			}
			return []string{"handshake"}, c.JSON(http.StatusOK, map[string]string{"challenge": challenge})
		}
	}
	in, err := s.inbound(p, ch, req.Header.Get("Content-Type"), body, now)
	if err != nil {
		return []string{"rejected_message_id"}, refused(err, http.StatusBadRequest)
	}
	if once != nil {
		if err := s.spend(req, ch, *once, body, now); err != nil {
			return []string{"rejected_replay"}, err
		}
	}
	outcomes := make([]string, 0, len(in.messages)+in.notifications+len(in.receipts))
	for range in.notifications {
		outcomes = append(outcomes, "notification")
	}
	for range in.receipts {
		outcomes = append(outcomes, "receipt")
	}
	var recs []store.Recorded
	switch {
	case len(in.messages) == 1 && len(in.receipts) == 0:
		rec, err := intake.Record(req.Context(), s.st, in.messages[0], s.cfg.Retry.MaxAttempts)
		if err != nil {
			return []string{"rejected_unavailable"}, unavailable(err)
		}
		recs = []store.Recorded{rec}
	case len(in.messages) > 0 || len(in.receipts) > 0:
		if recs, err = intake.RecordBatch(req.Context(), s.st, in.messages, in.receipts, s.cfg.Retry.MaxAttempts); err != nil {
			return []string{"rejected_unavailable"}, unavailable(err)
		}
	}
	if len(in.receipts) > 0 {
		// A stored receipt that names one of our sends settles its row. A
		// failure leaves the receipt stored and the row as it was: the
		// provider is answered 2xx either way, as it was for the receipt.
		if _, err := delivery.SettleReceipts(req.Context(), s.st, settling(in, req.URL.Query().Get("ref"))); err != nil {
			s.log.Error("receipts stored but not settled", "channel", ch.Name, slog.Any("err", err))
		}
	}
	ans := batchAnswer{Status: "ignored", Events: []hookAnswer{}, Notifications: in.notifications, Receipts: len(in.receipts)}
	created := false
	for _, rec := range recs {
		a := hookAnswer{Status: "duplicate", EventKey: rec.Event.Key, CorrelationID: rec.Event.CorrelationID}
		if rec.Created {
			a.Status, created = "accepted", true
		}
		outcomes = append(outcomes, a.Status)
		ans.Events = append(ans.Events, a)
	}
	switch {
	case created:
		ans.Status = "accepted" // the commit woke the runner (store.HookDue)
	case len(recs) > 0:
		ans.Status = "duplicate"
	}
	return outcomes, s.answerHook(c, ch, ans)
}

// spend records that the request spent its signature's one-time value, in
// one write transaction before its messages are recorded, and refuses a
// value another request spent: the signature covers only the value, not
// the body, so a captured one would otherwise carry any message. The same
// request sent again (the sender's retry: its content type and body
// byte for byte) passes, and its messages answer as duplicates. Were the
// recording to fail after the spend, that retry still records them.
func (s *Server) spend(req *http.Request, ch *config.Channel, o hook.Once, body []byte, now time.Time) error {
	h := sha256.New()
	h.Write([]byte(req.Header.Get("Content-Type")))
	h.Write([]byte{0})
	h.Write(body)
	fp := h.Sum(nil)
	first, err := s.st.SpendNonce(req.Context(), store.Nonce{Scope: ch.Name, Value: o.Value, SignedAt: o.SignedAt, Keep: o.Keep, Request: fp}, now)
	switch {
	case err != nil:
		return unavailable(err)
	case first != nil && subtle.ConstantTimeCompare(first, fp) != 1:
		return errorf(http.StatusUnauthorized, "this signature's token was already used by another request; a %s signature is good for one request only", ch.Signature.Scheme)
	}
	return nil
}

// answerHook answers as the channel's provider expects.
func (s *Server) answerHook(c *echo.Context, ch *config.Channel, ans batchAnswer) error {
	status := http.StatusOK
	if ans.Status == "accepted" {
		status = http.StatusAccepted
	}
	switch ch.Answer {
	case hook.AnswerTwiML:
		return c.Blob(http.StatusOK, "text/xml; charset=utf-8", []byte(twiml))
	case hook.AnswerOK:
		status = http.StatusOK
	}
	if ch.Messages.Items == "" && len(ans.Events) == 1 {
		return c.JSON(status, ans.Events[0])
	}
	return c.JSON(status, ans)
}

// readBody reads a webhook's body, at most limit bytes: into a buffer of
// exactly its Content-Length when it sends one (io.ReadAll would grow its
// buffer by doubling, about twice the body in garbage), else as it comes.
func readBody(w http.ResponseWriter, req *http.Request, limit int64) ([]byte, error) {
	r := http.MaxBytesReader(w, req.Body, limit)
	if n := req.ContentLength; n >= 0 && n <= limit {
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(r)
}

func unavailable(err error) error {
	return &apiError{status: http.StatusServiceUnavailable, msg: "the event could not be stored; nothing was recorded, retry later", err: err}
}

// inbound is what one request carries.
type inbound struct {
	messages      []intake.Message
	notifications int              // items that are not messages (a status, an edit, a bot's message...)
	receipts      []intake.Receipt // reports on a send, found at the channel's receipts sources
	receiptRefs   []string         // our reference on each receipt, where the provider echoes it
}

// settling is what delivery needs to settle in's receipts: our reference
// from the item (WhatsApp's biz_opaque_callback_data) or else from the
// URL (the ref a Twilio StatusCallback URL carries; the signature covers it).
func settling(in inbound, urlRef string) []delivery.Receipt {
	out := make([]delivery.Receipt, len(in.receipts))
	for i, r := range in.receipts {
		ref := in.receiptRefs[i]
		if ref == "" {
			ref = urlRef
		}
		out[i] = delivery.Receipt{Channel: r.Channel, ProviderID: r.ProviderID, Ref: ref, Status: r.Status, At: r.At}
	}
	return out
}

// inbound is what p carries, read by the channel's mapping (hook's
// ReadAll: a message refused refuses the request, 400, nothing stored),
// as the messages and receipts intake records.
func (s *Server) inbound(p *hook.Payload, ch *config.Channel, contentType string, body []byte, now time.Time) (inbound, error) {
	var in inbound
	r, err := p.ReadAll(ch.Mapping())
	if err != nil {
		return in, err
	}
	kept, isJSON, err := p.Stored(body)
	if err != nil {
		return in, err
	}
	in.notifications = r.Notifications
	for _, m := range r.Messages {
		in.messages = append(in.messages, intake.Message{
			Channel: ch.Name, MessageID: m.MessageID, ConversationID: m.ConversationID,
			Contact: m.Contact, Name: m.Name, Text: m.Text, Subject: m.Subject,
			ReplyTo:     store.ReplyTo{Chat: m.ReplyTo.Chat, MessageID: m.ReplyTo.MessageID, Thread: m.ReplyTo.Thread},
			ContentType: contentType, Body: kept, JSON: isJSON, Valid: p.Valid(), ReceivedAt: now, SentAt: m.SentAt, Coalesce: ch.Coalesce,
		})
	}
	for _, rc := range r.Receipts {
		in.receipts = append(in.receipts, intake.Receipt{Channel: ch.Name, ProviderID: rc.ProviderID, Status: rc.Status, At: now})
		in.receiptRefs = append(in.receiptRefs, rc.Ref)
	}
	return in, nil
}

// hookHandshake answers GET /hooks/{channel}: Meta's subscription check on
// a channel whose handshake is meta, echoing hub.challenge only when
// hub.verify_token is the channel's verify_token. Nothing is stored.
func (s *Server) hookHandshake(c *echo.Context) error {
	name := c.Param("channel")
	ch, ok := s.cfg.Channel(name)
	if !ok {
		s.metrics.Webhook(name, "rejected_unknown_channel")
		return errorf(http.StatusNotFound, "there is no channel named %q", name)
	}
	if ch.Handshake != hook.HandshakeMeta {
		// The router's own sentence for a method a route does not take.
		c.Response().Header().Set("Allow", http.MethodPost)
		return errorf(http.StatusMethodNotAllowed, "GET is not allowed on %s", c.Request().URL.Path)
	}
	// The verify token is a secret a caller could guess at: each try counts
	// under the login limits of the caller's address first.
	right, err := s.trySecret(c, "hub.verify_token of "+ch.Name, "hub.verify_token")
	if err != nil {
		s.metrics.Webhook(name, "rejected_handshake")
		return err
	}
	q := c.Request().URL.Query()
	token, challenge := q.Get("hub.verify_token"), q.Get("hub.challenge")
	if q.Get("hub.mode") != "subscribe" || ch.VerifyToken == "" || !sameSecret(token, ch.VerifyToken) {
		s.metrics.Webhook(name, "rejected_handshake")
		return errorf(http.StatusForbidden, "the handshake is refused: hub.mode is not subscribe or hub.verify_token does not match the channel's verify_token")
	}
	right()
	if !validChallenge(challenge) {
		s.metrics.Webhook(name, "rejected_handshake")
		return errorf(http.StatusBadRequest, "hub.challenge is missing or not printable text of at most %d bytes", maxChallenge)
	}
	s.metrics.Webhook(name, "handshake")
	c.Response().Header().Set("X-Content-Type-Options", "nosniff")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(challenge))
}

// sameSecret compares digests in constant time, so neither the content nor
// the length of the secret leaks.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// validChallenge accepts printable ASCII only: the challenge is echoed.
func validChallenge(s string) bool {
	if s == "" || len(s) > maxChallenge {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
