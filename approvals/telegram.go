package approvals

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// Telegram: the card is a bot's message in the client's approvers' chat
// (sendMessage), with an inline keyboard whose callback_data are tokens
// (Seal: the action and the draft, MAC'd with the webhook's secret, at
// most 64 bytes); the bot's webhook is POST /surfaces/telegram, its
// X-Telegram-Bot-Api-Secret-Token compared in constant time, each
// update_id taken once. A button's callback_query decides through Decide
// and is answered with answerCallbackQuery; Edit is a reply to the card
// with the new text (the card named by the token on its keyboard). The
// card follows every decision with editMessageText.

func init() { register(ViaTelegram, openTelegram) }

type telegramSurface struct {
	a   *Approvals
	cfg *config.TelegramSurface
	key []byte // the tokens' MAC key: the webhook's secret
}

func openTelegram(a *Approvals) (Surface, bool, error) {
	c := a.cfg.Approvals.Telegram
	if c == nil {
		return nil, false, nil
	}
	if c.WebhookSecret == "" || c.BotToken == "" {
		return nil, false, errors.New("approvals.telegram needs its bot token and webhook secret")
	}
	return &telegramSurface{a: a, cfg: c, key: []byte("handoff telegram tokens\x00" + c.WebhookSecret)}, true, nil
}

func (s *telegramSurface) Name() string { return ViaTelegram }

func (s *telegramSurface) Chat(client string) (string, bool) {
	ch, ok := s.cfg.Chats[client]
	return ch, ok
}

// Telegram's documented limits.
const (
	telegramText         = 4096 // a message's text
	telegramCallbackData = 64   // a button's callback_data, bytes
	telegramAnswerText   = 200  // answerCallbackQuery's text
	telegramQuote        = 600  // one quoted message of the card
	telegramUpdateKeep   = 24 * time.Hour
)

// TelegramAPIError is a Bot API answer with ok false.
type TelegramAPIError struct {
	Method      string
	Code        int
	Description string
}

func (e *TelegramAPIError) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// call POSTs body as JSON to Bot API method and decodes its result into out.
func (s *telegramSurface) call(ctx context.Context, method string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// The wire's rules (Approvals.do): a failure says whether anything
	// left, so that a card whose post had no answer is not posted blind.
	// The Bot API's URL holds the token: the errors never spell it out.
	resp, err := s.a.do(ctx, s.cfg.APIURL+"/bot"+s.cfg.BotToken+"/"+method, http.Header{"Content-Type": {"application/json"}}, raw)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, err)
	}
	if resp.ReadErr != nil {
		return fmt.Errorf("telegram %s: the answer broke off: %w", method, resp.ReadErr)
	}
	data := resp.Body
	var ans struct {
		OK          bool            `json:"ok"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Result      json.RawMessage `json:"result"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return fmt.Errorf("telegram %s: HTTP %d, not JSON", method, resp.Status)
	}
	if ans.ErrorCode == http.StatusTooManyRequests {
		// Flood control names its wait (ResponseParameters.retry_after).
		return &jobs.RetryLater{After: time.Duration(max(ans.Parameters.RetryAfter, 1)) * time.Second,
			Err: &TelegramAPIError{Method: method, Code: ans.ErrorCode, Description: ans.Description}}
	}
	if !ans.OK {
		return &TelegramAPIError{Method: method, Code: ans.ErrorCode, Description: ans.Description}
	}
	if out != nil {
		return json.Unmarshal(ans.Result, out)
	}
	return nil
}

type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

// The actions a token names.
const (
	tgApprove = "a"
	tgReject  = "r"
	tgUndo    = "u"
	tgEdit    = "e"
)

// token is the callback_data of action on draft.
func (s *telegramSurface) token(action, draft string) (string, error) {
	t := Seal(s.key, ViaTelegram, action+":"+draft)
	if len(t) > telegramCallbackData {
		return "", fmt.Errorf("the button of draft %s would be %d bytes; Telegram takes %d", draft, len(t), telegramCallbackData)
	}
	return t, nil
}

// keyboard is the card's buttons in v's state; nil: none.
func (s *telegramSurface) keyboard(v View) (*inlineKeyboard, error) {
	var row []inlineButton
	add := func(text, action string) error {
		t, err := s.token(action, v.Draft.ID)
		if err != nil {
			return err
		}
		row = append(row, inlineButton{Text: text, CallbackData: t})
		return nil
	}
	var err error
	switch v.State {
	case Waiting:
		err = errors.Join(add("✅ Approve", tgApprove), add("✏️ Edit", tgEdit), add("❌ Reject", tgReject))
	case Held:
		err = add("↩️ Undo", tgUndo)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &inlineKeyboard{InlineKeyboard: [][]inlineButton{row}}, nil
}

// telegramText is the card v as plain text, at most 4096 characters: the
// head, the reply and the status first; the messages fill what is left.
func telegramCardText(v View) string {
	head := "📝 Reply to " + v.Customer + " — " + v.ClientName + " · " + v.Channel
	var tail strings.Builder
	switch v.State {
	case Waiting:
		tail.WriteString("Draft reply:\n" + v.Text + "\n\n(Reply to this message with your own text to approve it edited.)")
	case Held:
		tail.WriteString("Reply:\n" + v.Text + "\n\n✅ " + v.Status + " — sent at " + v.UndoUntil.UTC().Format("15:04:05 UTC") + " unless undone")
	case Approved:
		tail.WriteString("Reply:\n" + v.Text + "\n\n✅ " + v.Status)
	case Rejected:
		tail.WriteString("Draft reply:\n" + v.Text + "\n\n❌ " + v.Status)
	default:
		tail.WriteString("Draft reply:\n" + v.Text + "\n\n↪️ " + v.Status)
	}
	budget := telegramText - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail.String()) - 4
	var msgs strings.Builder
	if len(v.Messages) > 0 {
		msgs.WriteString(v.Customer + " wrote:")
		for _, m := range v.Messages {
			msgs.WriteString("\n« " + clip(m, telegramQuote) + " »")
		}
	}
	text := head + "\n\n"
	if m := msgs.String(); m != "" && budget > 20 {
		text += clip(m, budget) + "\n\n"
	}
	return clip(text+tail.String(), telegramText)
}

type tgMessage struct {
	MessageID int64 `json:"message_id"`
	From      *struct {
		ID       int64  `json:"id"`
		IsBot    bool   `json:"is_bot"`
		Username string `json:"username"`
	} `json:"from"`
	Chat struct {
		ID int64 `json:"id"`
	} `json:"chat"`
	Text           string          `json:"text"`
	ReplyToMessage *tgMessage      `json:"reply_to_message"`
	ReplyMarkup    *inlineKeyboard `json:"reply_markup"`
}

// tgUpdate is the part of an Update handoff reads (core.telegram.org/bots/api#update).
type tgUpdate struct {
	UpdateID      int64      `json:"update_id"`
	Message       *tgMessage `json:"message"`
	CallbackQuery *struct {
		ID   string `json:"id"`
		From struct {
			ID       int64  `json:"id"`
			Username string `json:"username"`
		} `json:"from"`
		Message *tgMessage `json:"message"`
		Data    string     `json:"data"`
	} `json:"callback_query"`
}

func (s *telegramSurface) Post(ctx context.Context, chat string, v View) (string, error) {
	kb, err := s.keyboard(v)
	if err != nil {
		return "", err
	}
	body := map[string]any{"chat_id": chat, "text": telegramCardText(v), "link_preview_options": map[string]bool{"is_disabled": true}}
	if kb != nil {
		body["reply_markup"] = kb
	}
	var out tgMessage
	if err := s.call(ctx, "sendMessage", body, &out); err != nil {
		return "", err
	}
	if out.MessageID == 0 {
		return "", errors.New("telegram sendMessage: the answer has no message_id")
	}
	return strconv.FormatInt(out.MessageID, 10), nil
}

func (s *telegramSurface) Update(ctx context.Context, c store.Card, v View) error {
	id, err := strconv.ParseInt(c.Ref, 10, 64)
	if err != nil {
		return nil // not a message id of ours: nothing to change
	}
	kb, err := s.keyboard(v)
	if err != nil {
		return err
	}
	body := map[string]any{"chat_id": c.Chat, "message_id": id, "text": telegramCardText(v), "link_preview_options": map[string]bool{"is_disabled": true}}
	if kb != nil {
		body["reply_markup"] = kb // left out, the keyboard goes
	}
	err = s.call(ctx, "editMessageText", body, nil)
	var api *TelegramAPIError
	if errors.As(err, &api) && api.Code == http.StatusBadRequest &&
		(strings.Contains(api.Description, "message is not modified") || strings.Contains(api.Description, "message to edit not found")) {
		return nil
	}
	return err
}

// Receive answers one webhook update.
func (s *telegramSurface) Receive(ctx context.Context, r *Request) Answer {
	got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.WebhookSecret)) != 1 {
		return textAnswer(http.StatusUnauthorized, "the X-Telegram-Bot-Api-Secret-Token header is missing or wrong")
	}
	var u tgUpdate
	if err := json.Unmarshal(r.Body, &u); err != nil {
		return textAnswer(http.StatusBadRequest, "the body is not a Telegram Update")
	}
	// Telegram sends an update again until it gets a 200: take each once.
	first, err := s.a.st.SpendNonce(ctx, store.Nonce{
		Scope: "surface:telegram", Value: strconv.FormatInt(u.UpdateID, 10), Unsigned: true, Keep: telegramUpdateKeep, Request: r.Body,
	}, r.Now)
	if err != nil {
		s.a.log.Error("approvals: telegram: remember the update", slog.Any("err", err))
		return textAnswer(http.StatusServiceUnavailable, "the update could not be recorded; send it again")
	}
	if first != nil {
		return Answer{Status: http.StatusOK} // seen: its answer was given
	}
	switch {
	case u.CallbackQuery != nil:
		s.callback(ctx, u)
	case u.Message != nil && u.Message.ReplyToMessage != nil && u.Message.From != nil && !u.Message.From.IsBot:
		s.reply(ctx, u.Message)
	}
	return Answer{Status: http.StatusOK}
}

// open reads a token: its action and draft, when handoff made it.
func (s *telegramSurface) open(data string) (action, draft string, ok bool) {
	msg, ok := Unseal(s.key, ViaTelegram, data)
	if !ok {
		return "", "", false
	}
	return strings.Cut(msg, ":")
}

func (s *telegramSurface) callback(ctx context.Context, u tgUpdate) {
	q := u.CallbackQuery
	answer := func(text string, alert bool) {
		s.a.Later(10*time.Second, func(ctx context.Context) error {
			body := map[string]any{"callback_query_id": q.ID}
			if text != "" {
				body["text"], body["show_alert"] = clip(text, telegramAnswerText), alert
			}
			return s.call(ctx, "answerCallbackQuery", body, nil)
		})
	}
	action, draft, ok := s.open(q.Data)
	if !ok {
		answer("This button is not one of handoff's.", true)
		return
	}
	id := strconv.FormatInt(q.From.ID, 10)
	person, err := s.a.Person(ViaTelegram, s.cfg.Users, id, "")
	if err != nil {
		answer(Sentence(err), true)
		return
	}
	var act Action
	switch action {
	case tgApprove:
		act = Approve
	case tgReject:
		act = Reject
	case tgUndo:
		act = Undo
	case tgEdit:
		answer("Reply to the card with your text: it is sent as the reply, approved by you.", true)
		return
	default:
		answer("This button is not one of handoff's.", true)
		return
	}
	out, err := s.a.Decide(ctx, Ask{Via: ViaTelegram, Draft: draft, Action: act, Person: person, From: "telegram " + id})
	if err != nil {
		s.logUnexpected(err)
		answer(Sentence(err), true)
		return
	}
	answer(out.Sentence, !out.Decided)
}

// reply takes a reply to a card as the edited reply, approved by its author.
func (s *telegramSurface) reply(ctx context.Context, m *tgMessage) {
	say := func(text string) {
		s.a.Later(10*time.Second, func(ctx context.Context) error {
			return s.call(ctx, "sendMessage", map[string]any{
				"chat_id": m.Chat.ID, "text": clip(text, telegramText),
				"reply_parameters": map[string]any{"message_id": m.MessageID, "allow_sending_without_reply": true},
			}, nil)
		})
	}
	draft, ok := s.cardOf(ctx, m.ReplyToMessage)
	if !ok {
		return // a reply to something else: none of handoff's business
	}
	id := strconv.FormatInt(m.From.ID, 10)
	person, err := s.a.Person(ViaTelegram, s.cfg.Users, id, "")
	if err != nil {
		say(Sentence(err))
		return
	}
	if strings.TrimSpace(m.Text) == "" {
		say("Reply with text: that text is sent to the customer, approved by you.")
		return
	}
	out, err := s.a.Decide(ctx, Ask{Via: ViaTelegram, Draft: draft, Action: Approve, Text: m.Text, Person: person, From: "telegram " + id})
	switch {
	case err != nil:
		s.logUnexpected(err)
		say(Sentence(err))
	case !out.Decided:
		say(out.Sentence)
	}
}

// cardOf is the draft whose card m is: named by a token on its keyboard,
// else by the card's stored message id.
func (s *telegramSurface) cardOf(ctx context.Context, m *tgMessage) (string, bool) {
	if m.ReplyMarkup != nil {
		for _, row := range m.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				if _, draft, ok := s.open(b.CallbackData); ok {
					return draft, true
				}
			}
		}
	}
	var c store.Card
	err := s.a.st.View(func(tx *store.Tx) (err error) {
		c, err = tx.CardByRef(ViaTelegram, strconv.FormatInt(m.Chat.ID, 10), strconv.FormatInt(m.MessageID, 10))
		return err
	})
	return c.Draft, err == nil
}

func (s *telegramSurface) logUnexpected(err error) {
	var refusal *Refusal
	if !errors.As(err, &refusal) {
		s.a.log.Error("approvals: telegram decision", slog.Any("err", err))
	}
}
