package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/handoff/handoff/provider/kinds"
)

func init() { register(kinds.Slack, newSlack) }

const slackAPI = "https://slack.com"

// Slack calls chat.postMessage as @slack/web-api does: a bearer token, a
// form with channel and text. Errors come back as 200 {"ok":false}: only
// "ok":true is sent.
type Slack struct {
	apiKind
	url  string
	auth string // never formatted
}

func newSlack(cfg kinds.Provider, d Deps) (Provider, error) {
	if cfg.Token == "" {
		return nil, errors.New("slack: token_env is required")
	}
	return &Slack{apiKind: newAPIKind(cfg, d), url: base(cfg, slackAPI) + "/api/chat.postMessage", auth: "Bearer " + cfg.Token}, nil
}

// Capabilities: nothing to prove an unknown outcome with.
func (s *Slack) Capabilities() Capabilities { return s.caps(false) }

// slackUnknown are chat.postMessage errors on Slack's side, where the
// message may have been posted.
var slackUnknown = map[string]bool{"internal_error": true, "fatal_error": true, "service_unavailable": true, "request_timeout": true}

// slackText escapes Slack's three control characters (its "Formatting
// text for app surfaces": &, <, >), so what a customer or a model wrote
// is shown as written and never becomes a mention (<!channel>) or a link.
var slackText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Send posts one message: in the channel the customer wrote in, in the
// message's thread, where the event says so (its reply_to), else to To
// (a user id: their DM).
func (s *Slack) Send(ctx context.Context, m Message) (string, error) {
	form := url.Values{"channel": {m.To}, "text": {slackText.Replace(m.Text)}}
	if r := m.ReplyTo; r.Chat != "" {
		form.Set("channel", r.Chat)
		if r.Thread != "" {
			form.Set("thread_ts", r.Thread)
		}
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/x-www-form-urlencoded")
	hdr.Set("Accept", "application/json")
	hdr.Set("Authorization", s.auth)
	a, err := s.w.post(ctx, s.url, hdr, []byte(form.Encode()))
	if err != nil {
		return "", err
	}
	var ans struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		TS    string `json:"ts"`
	}
	jerr := json.Unmarshal(a.Body, &ans)
	why := reason(ans.Error, a)
	switch c := a.Status; {
	case c == http.StatusOK && ans.OK:
		return ans.TS, nil
	case c == http.StatusOK && (a.ReadErr != nil || jerr != nil):
		// The answer broke off: posted or not, only the channel can tell.
		return "", s.w.lostID(a, "body")
	case c == http.StatusTooManyRequests || ans.Error == "ratelimited":
		return "", s.w.refused("later", a, s.w.retryAfter(a), why)
	case c >= 500 || slackUnknown[ans.Error]:
		return "", s.w.refused("unknown", a, s.w.retryAfter(a), why)
	case c == http.StatusOK || c >= 400:
		// 200 {"ok":false,"error":"channel_not_found"} and the like: Slack
		// refused the message; it is not posted.
		return "", s.w.refused("permanent", a, 0, why)
	}
	return "", s.w.refused("unknown", a, 0, why)
}
