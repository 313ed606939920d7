package approvals

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// ntfy: a waiting draft is pushed to the ntfy topic of each person allowed
// on its client (approvals.ntfy.topics), as one JSON publish to the server's
// root (docs.ntfy.sh/publish/#publish-as-json) with two action buttons of
// type http, Approve and Reject, that POST "approve" or "reject" to
// <base_url>/surfaces/ntfy/<token>, and a view button that opens the draft.
// The token is 256 random bits, one per person and push, of which only the
// SHA-256 is stored (store/pushtokens.go) with the draft, the person and
// its expiry (approvals.ntfy.token_ttl); it is spent in the transaction of
// the decision it makes (Ask.Spend), so a second press, a replay or a press
// after the decision elsewhere decides nothing more, and expired tokens are
// swept at each push. The publish goes through post: one call, no retry;
// a retried announce job skips the people whose push went out.

func init() { register(ViaNtfy, openNtfy) }

type ntfySurface struct {
	a   *Approvals
	cfg *config.NtfySurface
}

func openNtfy(a *Approvals) (Surface, bool, error) {
	c := a.cfg.Approvals.Mail.Ntfy
	if c == nil {
		return nil, false, nil
	}
	if a.cfg.BaseURL == "" {
		return nil, false, errors.New("approvals.ntfy needs base_url: a push's buttons POST to <base_url>/surfaces/ntfy/…")
	}
	return &ntfySurface{a: a, cfg: c}, true, nil
}

func (s *ntfySurface) Name() string { return ViaNtfy }

// Chat is the client itself: a push goes to the topic of each person
// allowed on it.
func (s *ntfySurface) Chat(client string) (string, bool) { return client, len(s.cfg.Topics) > 0 }

// ntfy's documented limits: a message's body is cut past 4,096 bytes.
const (
	ntfyMessage  = 3800 // characters of the draft and messages, under 4,096 bytes for most text
	ntfyTitle    = 200
	ntfyTokenLen = 32
	ntfySweep    = 256
)

// ntfyAction is one action button (docs.ntfy.sh/publish/#action-buttons).
type ntfyAction struct {
	Action string `json:"action"` // http or view
	Label  string `json:"label"`
	URL    string `json:"url"`
	Method string `json:"method,omitempty"`
	Body   string `json:"body,omitempty"`
	Clear  bool   `json:"clear,omitempty"`
}

// ntfyPublish is a JSON publish (docs.ntfy.sh/publish/#publish-as-json).
type ntfyPublish struct {
	Topic    string       `json:"topic"`
	Title    string       `json:"title"`
	Message  string       `json:"message"`
	Priority int          `json:"priority,omitempty"`
	Tags     []string     `json:"tags,omitempty"`
	Click    string       `json:"click,omitempty"`
	Actions  []ntfyAction `json:"actions"`
}

// NtfyError is an ntfy server's refusal of a publish.
type NtfyError struct {
	Status int
	Code   int    `json:"code"`
	Error_ string `json:"error"`
}

func (e *NtfyError) Error() string {
	return fmt.Sprintf("ntfy publish: HTTP %d %d %s", e.Status, e.Code, e.Error_)
}

// Post pushes v to each allowed person's topic not pushed yet; the ref is
// "" (a push is not changed once sent).
func (s *ntfySurface) Post(ctx context.Context, client string, v View) (string, error) {
	now := s.a.Now()
	if _, err := s.a.st.SweepPushTokens(ctx, now, ntfySweep); err != nil {
		s.a.log.Warn("approvals: ntfy: sweep the expired tokens", slog.Any("err", err))
	}
	users, err := s.a.st.Users()
	if err != nil {
		return "", err
	}
	var sent []string // the people pushed already
	if err := s.a.st.View(func(tx *store.Tx) error {
		ts, err := tx.PushTokensOf(ViaNtfy, v.Draft.ID)
		for _, t := range ts {
			sent = append(sent, t.User)
		}
		return err
	}); err != nil {
		return "", err
	}
	names := make([]string, 0, len(s.cfg.Topics))
	for name := range s.cfg.Topics {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		i := slices.IndexFunc(users, func(u store.User) bool { return u.Name == name })
		if i < 0 || users[i].Disabled || !Allowed(s.a.cfg, users[i], v.Channel) || slices.Contains(sent, name) {
			continue
		}
		if err := s.push(ctx, name, s.cfg.Topics[name], v, now, ""); err != nil {
			return "", err
		}
	}
	return "", nil
}

// push mints a token for person, stores its hash, and publishes v to
// topic; lead, when set, comes first in the message (a reminder's line).
func (s *ntfySurface) push(ctx context.Context, person, topic string, v View, now time.Time, lead string) error {
	raw := make([]byte, ntfyTokenLen)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	hash := sha256.Sum256([]byte(token))
	if err := s.a.st.Update(ctx, func(tx *store.Tx) error {
		return tx.PutPushToken(hash[:], store.PushToken{Surface: ViaNtfy, Draft: v.Draft.ID, User: person, CreatedAt: now, Expires: now.Add(s.cfg.TokenTTL)})
	}); err != nil {
		return err
	}
	base := s.a.cfg.BaseURL
	act := base + "/surfaces/ntfy/" + token
	open := base + "/drafts?" + url.Values{"id": {v.Draft.ID}}.Encode()
	msg := ntfyText(v, lead)
	body, err := json.Marshal(ntfyPublish{
		Topic: topic, Title: clip("Reply to "+oneLine(v.Customer)+" — "+v.ClientName+" · "+v.Channel, ntfyTitle),
		Message: clip(msg, ntfyMessage), Priority: 4, Tags: []string{"incoming_envelope"}, Click: open,
		Actions: []ntfyAction{
			{Action: "http", Label: "Approve", URL: act, Method: http.MethodPost, Body: "approve", Clear: true},
			{Action: "http", Label: "Reject", URL: act, Method: http.MethodPost, Body: "reject", Clear: true},
			{Action: "view", Label: "Open", URL: open},
		},
	})
	if err != nil {
		return err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if s.cfg.Token != "" {
		h.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	// A push that failed takes its token with it: its buttons, if it went
	// out after all, decide nothing, and the retry pushes that person again.
	forget := func(cause error) error {
		if err := s.a.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
			_, err := tx.SpendPushToken(hash[:], now)
			var expired *store.ExpiredTokenError
			if errors.Is(err, store.ErrNotFound) || errors.As(err, &expired) {
				return nil
			}
			return err
		}); err != nil {
			s.a.log.Warn("approvals: ntfy: forget the token of a failed push", slog.Any("err", err))
		}
		return cause
	}
	resp, err := s.a.post(ctx, s.cfg.URL, h, body)
	if err != nil {
		return forget(fmt.Errorf("ntfy publish to %s's topic: %w", person, err))
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	e := &NtfyError{Status: resp.StatusCode}
	_ = json.Unmarshal(data, e)
	if resp.StatusCode == http.StatusTooManyRequests {
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return forget(&jobs.RetryLater{After: time.Duration(max(after, 10)) * time.Second, Err: e})
	}
	return forget(e)
}

// ntfyText is a push's message: lead, the customer's last message and the
// draft.
func ntfyText(v View, lead string) string {
	msg := v.Text
	if len(v.Messages) > 0 {
		msg = v.Customer + ": " + clip(v.Messages[len(v.Messages)-1], 600) + "\n\nDraft reply:\n" + v.Text
	}
	if lead != "" {
		msg = lead + "\n\n" + msg
	}
	return msg
}

// Receive takes one press of a push's button: POST /surfaces/ntfy/<token>
// with "approve" or "reject".
func (s *ntfySurface) Receive(ctx context.Context, r *Request) Answer {
	token := strings.Trim(r.Path, "/")
	if token == "" || len(token) > 100 {
		return textAnswer(http.StatusNotFound, "This is not a push button's address.")
	}
	var act Action
	switch strings.ToLower(strings.TrimSpace(string(r.Body))) {
	case "approve":
		act = Approve
	case "reject":
		act = Reject
	default:
		return textAnswer(http.StatusBadRequest, `A push button posts "approve" or "reject"; nothing was decided.`)
	}
	hash := sha256.Sum256([]byte(token))
	var tok store.PushToken
	err := s.a.st.View(func(tx *store.Tx) (err error) { tok, err = tx.PushToken(hash[:]); return err })
	gone := "This button was used already or has expired; nothing was decided. Decide in the dashboard."
	switch {
	case errors.Is(err, store.ErrNotFound):
		return textAnswer(http.StatusGone, gone)
	case err != nil:
		s.a.log.Error("approvals: ntfy: read the token", slog.Any("err", err))
		return textAnswer(http.StatusServiceUnavailable, Sentence(err))
	case !r.Now.Before(tok.Expires):
		return textAnswer(http.StatusGone, gone)
	}
	person, err := s.a.st.ActiveUser(tok.User)
	if err != nil {
		return textAnswer(http.StatusForbidden, fmt.Sprintf("Handoff user %q does not exist or is disabled; nothing was decided.", tok.User))
	}
	out, err := s.a.Decide(ctx, Ask{
		Via: ViaNtfy, Draft: tok.Draft, Action: act, Person: person, From: "ntfy " + s.cfg.Topics[tok.User],
		Spend: func(tx *store.Tx) error {
			t, err := tx.SpendPushToken(hash[:], r.Now)
			var expired *store.ExpiredTokenError
			if errors.Is(err, store.ErrNotFound) || errors.As(err, &expired) {
				return refuse("%s", gone)
			}
			if err == nil && (t.Draft != tok.Draft || t.User != tok.User) {
				return refuse("%s", gone)
			}
			return err
		},
	})
	if err != nil {
		var refusal *Refusal
		if !errors.As(err, &refusal) {
			s.a.log.Error("approvals: ntfy decision", slog.Any("err", err))
			return textAnswer(http.StatusServiceUnavailable, Sentence(err))
		}
		status := http.StatusConflict
		if refusal.Sentence == gone {
			status = http.StatusGone
		}
		return textAnswer(status, Sentence(err))
	}
	if !out.Decided {
		return textAnswer(http.StatusConflict, out.Sentence)
	}
	return textAnswer(http.StatusOK, out.Sentence)
}
