package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/handoff/handoff/provider/kinds"
)

func init() { register(kinds.Telegram, newTelegram) }

const telegramAPI = "https://api.telegram.org"

// Telegram calls the Bot API's sendMessage: the token in the URL path,
// {"chat_id":…,"text":…}, answers {"ok":…,"result":{"message_id":…}}.
// A message written in another chat than the sender's own (a group)
// is answered there, as a reply to it (reply_parameters): a bot may not
// write first to a user's private chat.
type Telegram struct {
	apiKind
	url string // holds the token: never formatted
}

func newTelegram(cfg kinds.Provider, d Deps) (Provider, error) {
	if cfg.Token == "" {
		return nil, errors.New("telegram: token_env is required")
	}
	return &Telegram{apiKind: newAPIKind(cfg, d), url: base(cfg, telegramAPI) + "/bot" + cfg.Token + "/sendMessage"}, nil
}

// Capabilities: nothing to prove an unknown outcome with.
func (t *Telegram) Capabilities() Capabilities { return t.caps(false) }

// Send calls sendMessage once.
func (t *Telegram) Send(ctx context.Context, m Message) (string, error) {
	chat := m.To
	msg := map[string]any{"text": m.Text}
	if r := m.ReplyTo; r.Chat != "" && r.Chat != m.To {
		// In a private chat the chat is the sender (chat.id = from.id):
		// a plain message, as before. Elsewhere the chat it came from, as
		// a reply to it — still sent if that message was deleted since.
		chat = r.Chat
		if id, err := strconv.ParseInt(r.MessageID, 10, 64); err == nil {
			msg["reply_parameters"] = map[string]any{"message_id": id, "allow_sending_without_reply": true}
		}
	}
	msg["chat_id"] = chat
	if n, err := strconv.ParseInt(chat, 10, 64); err == nil {
		msg["chat_id"] = n // a numeric chat id goes as the number it is
	}
	a, err := t.w.postJSON(ctx, t.name, t.url, "", msg)
	if err != nil {
		return "", err
	}
	var ans struct {
		OK          bool   `json:"ok"`
		ErrorCode   int    `json:"error_code"`
		Description string `json:"description"`
		Result      struct {
			MessageID json.Number `json:"message_id"`
		} `json:"result"`
		Parameters struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	_ = json.Unmarshal(a.Body, &ans)
	why := reason(ans.Description, a)
	// The Bot API's advice (parameters.retry_after, in seconds) comes
	// first, then the header, as on every other kind.
	retry := time.Duration(ans.Parameters.RetryAfter) * time.Second
	if retry <= 0 {
		retry = t.w.retryAfter(a)
	}
	switch c := a.Status; {
	case c == http.StatusOK && ans.OK:
		return ans.Result.MessageID.String(), nil
	case c == http.StatusOK:
		if a.ReadErr != nil {
			return "", t.w.lostID(a, "body")
		}
		return "", t.w.refused("unknown", a, 0, why)
	case c == http.StatusTooManyRequests:
		// "Too Many Requests: retry after N": not sent.
		return "", t.w.refused("later", a, retry, why)
	case c >= 500:
		return "", t.w.refused("unknown", a, retry, why)
	case c >= 400:
		// 400 chat not found / empty text, 401 bad token, 403 blocked by
		// the user: nothing was sent.
		return "", t.w.refused("permanent", a, 0, why)
	}
	return "", t.w.refused("unknown", a, 0, why)
}
