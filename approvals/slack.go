package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/store"
)

// Slack: the card is a Block Kit message posted with chat.postMessage in
// the client's channel and changed with chat.update; the buttons and the
// Edit modal's submission come to POST /surfaces/slack (the app's
// Interactivity Request URL), signed with the app's signing secret (v0
// HMAC of "v0:<timestamp>:<body>", the hook package's slack scheme, five
// minutes' tolerance) and refused when replayed. Each request is answered
// within Slack's 3 s: the decision is one transaction; the card's change
// is the follow job Decide enqueued; a refusal is an ephemeral message
// through the request's response_url, sent after the answer.

func init() { register(ViaSlack, openSlack) }

type slackSurface struct {
	a      *Approvals
	cfg    *config.SlackSurface
	verify hook.Verifier
	emails sync.Map // member id -> email, as users.info gave it
}

// slackTolerance is how far a request's timestamp may stray (Slack's and
// @slack/bolt's five minutes); a signature is remembered that long.
const slackTolerance = 5 * time.Minute

func openSlack(a *Approvals) (Surface, bool, error) {
	c := a.cfg.Approvals.Slack
	if c == nil {
		return nil, false, nil
	}
	v, err := hook.NewVerifier(hook.Signing{Scheme: hook.SchemeSlack, Secrets: []string{c.SigningSecret}, Tolerance: slackTolerance})
	if err != nil {
		return nil, false, err
	}
	return &slackSurface{a: a, cfg: c, verify: v}, true, nil
}

func (s *slackSurface) Name() string { return ViaSlack }

func (s *slackSurface) Chat(client string) (string, bool) {
	ch, ok := s.cfg.Channels[client]
	return ch, ok
}

// SlackAPIError is an answer of Slack's Web API with ok false.
type SlackAPIError struct {
	Method, Code string
}

func (e *SlackAPIError) Error() string { return "slack " + e.Method + ": " + e.Code }

func (s *slackSurface) Update(ctx context.Context, c store.Card, v View) error {
	msg := slackMessage{Channel: c.Chat, TS: c.Ref, Text: slackFallback(v), Blocks: slackBlocks(v)}
	err := s.call(ctx, "chat.update", msg, nil)
	var api *SlackAPIError
	if errors.As(err, &api) && (api.Code == "message_not_found" || api.Code == "channel_not_found") {
		return nil // deleted in Slack: nothing is left to change
	}
	return err
}

// slackPayload is the part of an interaction payload handoff reads
// (block_actions, view_submission; docs.slack.dev/reference/interaction-payloads).
type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		TeamID   string `json:"team_id"`
	} `json:"user"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	TriggerID   string `json:"trigger_id"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		BlockID  string `json:"block_id"`
		Value    string `json:"value"`
	} `json:"actions"`
	View struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		State           struct {
			Values map[string]map[string]struct {
				Type  string `json:"type"`
				Value string `json:"value"`
			} `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// Receive answers one interaction request.
func (s *slackSurface) Receive(ctx context.Context, r *Request) Answer {
	if err := s.verify.Verify(&hook.Request{Header: r.Header, Body: r.Body, Now: r.Now}); err != nil {
		return textAnswer(http.StatusUnauthorized, hookSentence(err))
	}
	ts, _ := strconv.ParseInt(strings.TrimSpace(r.Header.Get("X-Slack-Request-Timestamp")), 10, 64)
	fp := sha256.Sum256(r.Body)
	first, err := s.a.st.SpendNonce(ctx, store.Nonce{
		Scope: "surface:slack", Value: r.Header.Get("X-Slack-Signature"), SignedAt: time.Unix(ts, 0),
		Keep: slackTolerance, Request: fp[:],
	}, r.Now)
	if err != nil {
		s.a.log.Error("approvals: slack: remember the request's signature", slog.Any("err", err))
		return textAnswer(http.StatusServiceUnavailable, "the request could not be checked against replays; try again")
	}
	if first != nil {
		return textAnswer(http.StatusUnauthorized, "this signed request was already received: a replay is refused")
	}
	form, err := url.ParseQuery(string(r.Body))
	if err != nil || form.Get("payload") == "" {
		return textAnswer(http.StatusBadRequest, "an interaction is a form with a payload field")
	}
	var p slackPayload
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil {
		return textAnswer(http.StatusBadRequest, "the payload field is not an interaction payload")
	}
	switch p.Type {
	case "block_actions":
		return s.blockActions(ctx, p)
	case "view_submission":
		return s.viewSubmission(ctx, p)
	}
	return Answer{Status: http.StatusOK} // shortcuts, view_closed…: nothing of handoff's
}

// person resolves the member of p: the configured id, else the email of
// their Slack profile (users.info, remembered).
func (s *slackSurface) person(ctx context.Context, p slackPayload) (store.User, error) {
	if _, ok := s.cfg.Users[p.User.ID]; ok {
		return s.a.Person(ViaSlack, s.cfg.Users, p.User.ID, "")
	}
	email, _ := s.emails.Load(p.User.ID)
	if email == nil {
		var out struct {
			User struct {
				Profile struct {
					Email string `json:"email"`
				} `json:"profile"`
			} `json:"user"`
		}
		// Part of the 3 s: bounded, and remembered for the next click.
		cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		err := s.call(cctx, "users.info", map[string]string{"user": p.User.ID}, &out)
		cancel()
		if err != nil {
			s.a.log.Warn("approvals: slack users.info", slog.String("user", p.User.ID), slog.Any("err", err))
		} else {
			email = out.User.Profile.Email
			s.emails.Store(p.User.ID, email)
		}
	}
	e, _ := email.(string)
	return s.a.Person(ViaSlack, s.cfg.Users, p.User.ID, e)
}

func (s *slackSurface) blockActions(ctx context.Context, p slackPayload) Answer {
	if len(p.Actions) == 0 {
		return Answer{Status: http.StatusOK}
	}
	act := p.Actions[0]
	var action Action
	switch act.ActionID {
	case slackApprove:
		action = Approve
	case slackReject:
		action = Reject
	case slackUndo:
		action = Undo
	case slackEdit:
	default:
		return Answer{Status: http.StatusOK} // not a button of handoff's
	}
	u, err := s.person(ctx, p)
	if err != nil {
		s.ephemeral(p.ResponseURL, Sentence(err))
		return Answer{Status: http.StatusOK}
	}
	if act.ActionID == slackEdit {
		s.openEdit(ctx, p, u, act.Value)
		return Answer{Status: http.StatusOK}
	}
	out, err := s.a.Decide(ctx, Ask{Via: ViaSlack, Draft: act.Value, Action: action, Person: u, From: s.from(p)})
	switch {
	case err != nil:
		s.logUnexpected(err)
		s.ephemeral(p.ResponseURL, Sentence(err))
	case !out.Decided:
		s.ephemeral(p.ResponseURL, out.Sentence) // "already approved by …": the card shows who
	}
	return Answer{Status: http.StatusOK}
}

// openEdit opens the Edit modal (views.open, within the trigger's 3 s)
// when u may decide draft id and it waits; else says why, ephemerally.
func (s *slackSurface) openEdit(ctx context.Context, p slackPayload, u store.User, id string) {
	var v View
	err := s.a.st.View(func(tx *store.Tx) error {
		var err error
		if v, err = s.a.viewTx(tx, id, s.a.Now()); err != nil {
			return err
		}
		return s.a.allowedTx(tx, u.Name, v.Draft)
	})
	switch {
	case err != nil:
		s.ephemeral(p.ResponseURL, Sentence(refusalOf(err)))
		return
	case v.State != Waiting:
		s.ephemeral(p.ResponseURL, "This draft is no longer waiting: "+v.Status)
		return
	case len([]rune(v.Text)) > slackInputMax:
		s.ephemeral(p.ResponseURL, fmt.Sprintf("This reply is longer than Slack's %d-character box; edit it in the dashboard.", slackInputMax))
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.call(cctx, "views.open", map[string]any{"trigger_id": p.TriggerID, "view": slackEditView(v)}, nil); err != nil {
		s.a.log.Warn("approvals: slack views.open", slog.Any("err", err))
		s.ephemeral(p.ResponseURL, "Slack did not open the editor in time; click Edit again.")
	}
}

func (s *slackSurface) viewSubmission(ctx context.Context, p slackPayload) Answer {
	if p.View.CallbackID != slackModal {
		return Answer{Status: http.StatusOK}
	}
	fail := func(sentence string) Answer {
		body, _ := json.Marshal(map[string]any{"response_action": "errors", "errors": map[string]string{slackReplyID: clip(sentence, 150)}})
		return Answer{Status: http.StatusOK, ContentType: "application/json", Body: body}
	}
	u, err := s.person(ctx, p)
	if err != nil {
		return fail(Sentence(err))
	}
	text := p.View.State.Values[slackReplyID][slackReplyID].Value
	if strings.TrimSpace(text) == "" {
		return fail("The reply is empty; write one, or cancel.")
	}
	_, err = s.a.Decide(ctx, Ask{Via: ViaSlack, Draft: p.View.PrivateMetadata, Action: Approve, Text: text, Person: u, From: s.from(p)})
	if err != nil {
		s.logUnexpected(err)
		return fail(Sentence(err))
	}
	// An approval that was already made answers as one (the card says whose).
	body, _ := json.Marshal(map[string]string{"response_action": "clear"})
	return Answer{Status: http.StatusOK, ContentType: "application/json", Body: body}
}

// from names the member for the audit's From.
func (s *slackSurface) from(p slackPayload) string {
	team := p.Team.ID
	if team == "" {
		team = p.User.TeamID
	}
	if team != "" {
		return "slack " + team + "/" + p.User.ID
	}
	return "slack " + p.User.ID
}

func (s *slackSurface) logUnexpected(err error) {
	var refusal *Refusal
	if !errors.As(err, &refusal) {
		s.a.log.Error("approvals: slack decision", slog.Any("err", err))
	}
}

// ephemeral tells the clicker alone sentence, through the request's
// response_url (after the answer: it is not part of the 3 s).
func (s *slackSurface) ephemeral(responseURL, sentence string) {
	if !s.slackURL(responseURL) {
		return
	}
	body, _ := json.Marshal(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": sentence})
	s.a.Later(10*time.Second, func(ctx context.Context) error {
		resp, err := s.a.post(ctx, responseURL, http.Header{"Content-Type": {"application/json; charset=utf-8"}}, body)
		if err != nil {
			return fmt.Errorf("slack response_url: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("slack response_url: HTTP %d", resp.StatusCode)
		}
		return nil
	})
}

// slackURL reports whether u is one of Slack's: a response_url is
// https://hooks.slack.com/…, or on the API's own origin (a stand-in).
func (s *slackSurface) slackURL(u string) bool {
	if strings.HasPrefix(u, "https://hooks.slack.com/") {
		return true
	}
	api, err1 := url.Parse(s.cfg.APIURL)
	got, err2 := url.Parse(u)
	return err1 == nil && err2 == nil && got.Scheme == api.Scheme && got.Host == api.Host
}

func textAnswer(status int, sentence string) Answer {
	return Answer{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(sentence + "\n")}
}

// hookSentence is a verifier's refusal, which never quotes a secret.
func hookSentence(err error) string {
	var he *hook.Error
	if errors.As(err, &he) {
		return he.Msg
	}
	return "the request's signature is not valid"
}
