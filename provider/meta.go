package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/handoff/handoff/provider/kinds"
)

func init() { register(kinds.Meta, newMeta) }

// Meta answers a Messenger or Instagram conversation through the Send API:
// POST /{version}/me/messages with the page access token as a bearer
// token, {"recipient":{"id":PSID},"messaging_type":"RESPONSE",
// "message":{"text":…}} (MESSAGE_TAG with "tag":"HUMAN_AGENT" past 24
// hours, with human_agent), the id at message_id. The Send API carries no
// reference of ours and has no idempotency key: an answer lost on the way
// leaves the outcome unknown, for a person to check, never a resend.
type Meta struct {
	apiKind
	cfg   kinds.Provider // its window: human_agent
	url   string
	auth  string // never formatted
	codes graphCodes
}

func newMeta(cfg kinds.Provider, d Deps) (Provider, error) {
	if cfg.Token == "" {
		return nil, errors.New("meta: token_env is required")
	}
	version := cfg.GraphVersion
	if version == "" {
		version = whatsappVersion
	}
	m := &Meta{
		apiKind: newAPIKind(cfg, d),
		cfg:     cfg,
		url:     base(cfg, whatsappAPI) + "/" + url.PathEscape(version) + "/me/messages",
		auth:    "Bearer " + cfg.Token,
	}
	m.codes = graphCodes{later: metaLater, unknown: metaUnknown, explain: func(e graphError) string {
		return metaExplain(e, cfg.TokenEnv)
	}}
	return m, nil
}

// Capabilities: no receipts that name our reference.
func (m *Meta) Capabilities() Capabilities { return m.caps(false) }

// metaLater are the Messenger Platform's rate limits, where the message
// was not accepted: 4 (application), 17 (user), 32 (page), 613 (calls to
// this API exceeded the rate limit), 80001, 80002 and 80006 (the Pages',
// Instagram's and Messenger's business use case limits).
var metaLater = map[int]bool{4: true, 17: true, 32: true, 613: true, 80001: true, 80002: true, 80006: true}

// metaUnknown are failures on Meta's side, after which the message may be
// out: 1 (unknown), 2 (unexpected, retry later), 1200 (temporary send
// message failure).
var metaUnknown = map[int]bool{1: true, 2: true, 1200: true}

// metaExplain says in one sentence what the codes a person must act on
// mean: 10/2018278 is a message outside the allowed window, 190 a page
// access token Meta no longer takes (from the variable tokenEnv).
func metaExplain(e graphError, tokenEnv string) string {
	switch {
	case e.Code == 10 && e.Subcode == 2018278:
		return fmt.Sprintf("code %d/%d: the reply is outside the allowed window (Messenger and Instagram take a reply only within 24 hours of the customer's last message, 7 days tagged HUMAN_AGENT with human_agent); answer on another channel of the lead", e.Code, e.Subcode)
	case e.Code == 190:
		where := "the page access token"
		if tokenEnv != "" {
			where += " in " + tokenEnv
		}
		return fmt.Sprintf("code 190: Meta refused %s (invalid or expired: %s); set a valid one and restart", where, e.Message)
	}
	return ""
}

type metaSend struct {
	Recipient struct {
		ID string `json:"id"`
	} `json:"recipient"`
	MessagingType string `json:"messaging_type"`
	Tag           string `json:"tag,omitempty"`
	Message       struct {
		Text string `json:"text"`
	} `json:"message"`
}

// Send posts one text message in answer to the customer's: a RESPONSE
// within 24 hours of the customer's last message; past them, with
// human_agent, tagged HUMAN_AGENT (up to 7 days); past the window, nothing.
func (m *Meta) Send(ctx context.Context, msg Message) (string, error) {
	now := m.window()
	if err := windowShut(kinds.Meta, m.cfg, msg, now); err != nil {
		return "", err
	}
	req := metaSend{MessagingType: "RESPONSE"}
	if !msg.LastInbound.IsZero() && kinds.Meta.NeedsTag(m.cfg, now.Sub(msg.LastInbound)) {
		req.MessagingType, req.Tag = "MESSAGE_TAG", "HUMAN_AGENT"
	}
	req.Recipient.ID, req.Message.Text = msg.To, msg.Text
	a, err := m.w.postJSON(ctx, m.name, m.url, m.auth, req)
	if err != nil {
		return "", err
	}
	var ans struct {
		RecipientID string     `json:"recipient_id"`
		MessageID   string     `json:"message_id"`
		Error       graphError `json:"error"`
	}
	_ = json.Unmarshal(a.Body, &ans)
	if a.Status == http.StatusOK {
		if ans.MessageID == "" {
			// Accepted, but the id was lost: nothing will bring it, and
			// a resend could deliver twice.
			return "", m.w.lostID(a, "message_id")
		}
		return ans.MessageID, nil
	}
	// 400 (100 bad parameter, 551 person unavailable, 10/2018278 outside
	// the window), 401 (190 token), 403 (10, 200 permission) are permanent.
	return "", m.w.graphRefused(a, ans.Error, m.codes)
}
