package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// The reminders of Telegram, email and ntfy (Slack's are in slack_once.go).

// Telegram: a reminder is a message in the chat, a reply to the card when
// it is there. Telegram has no lookup of a bot's messages, so a reminder
// whose answer was lost may be posted twice on its retry: a reminder is a
// nudge, the card itself is never posted twice (PostsOnce).

func (s *telegramSurface) EscalateTo(client string) (string, bool) {
	ch, ok := s.cfg.EscalateTo[client]
	return ch, ok
}

func (s *telegramSurface) Remind(ctx context.Context, n Notice) error {
	body := map[string]any{"chat_id": n.Chat, "text": clip(noticeText(n, telegramQuote, 2000), telegramText), "link_preview_options": map[string]bool{"is_disabled": true}}
	if id, err := strconv.ParseInt(n.Card.Ref, 10, 64); err == nil && n.Card.Chat == n.Chat && n.Card.Surface == ViaTelegram {
		body["reply_parameters"] = map[string]any{"message_id": id, "allow_sending_without_reply": true}
	}
	return s.call(ctx, "sendMessage", body, nil)
}

// noticeText is a reminder as plain text: its line, the customer's last
// message, the draft, and where to decide.
func noticeText(n Notice, quoteMax, draftMax int) string {
	v := n.View
	var b strings.Builder
	b.WriteString(n.Line + "\n")
	if len(v.Messages) > 0 {
		b.WriteString("\n« " + clip(v.Messages[len(v.Messages)-1], quoteMax) + " »\n")
	}
	b.WriteString("\nDraft reply:\n" + clip(v.Text, draftMax) + "\n")
	if n.Card.Ref != "" && n.Card.Chat == n.Chat {
		b.WriteString("\nDecide on the card.")
	} else {
		b.WriteString("\nDecide in the dashboard.")
	}
	if n.Link != "" {
		b.WriteString(" " + n.Link)
	}
	return b.String()
}

// Email: a reminder is a mail like the card's (its Reply-To the draft's
// reply address, so answering it decides), to the client's address or the
// escalation's. Its reference names the draft and the stage, so the smtp
// provider's own rules keep a retry from mailing it twice where they can.

func (s *emailSurface) EscalateTo(client string) (string, bool) {
	if s.send == nil {
		return "", false
	}
	to, ok := s.cfg.EscalateTo[client]
	return to, ok
}

func (s *emailSurface) Remind(ctx context.Context, n Notice) error {
	if s.send == nil {
		return errors.New("approvals.email has no provider to send its mails")
	}
	v := n.View
	what := "Reminder"
	switch n.Stage {
	case StageEscalate:
		what = "Escalated"
	case StageWindow:
		what = "Reply window closing"
	}
	_, err := s.send.Send(ctx, provider.Message{
		Ref: "approval-" + n.Stage + ":" + v.Draft.ID, To: n.Chat, CorrelationID: v.Draft.CorrelationID,
		Subject:      clip(fmt.Sprintf("%s: approve a reply to %s (%s · %s)", what, oneLine(v.Customer), v.ClientName, v.Channel), 180),
		Text:         n.Line + "\n\n" + s.cardText(v),
		ReplyAddress: replyAddress(s.cfg, s.key, v.Draft.ID),
	})
	return err
}

// ntfy: a reminder pushes the draft again to each person allowed on its
// client, with fresh buttons; an escalation pushes to the client's
// escalate_to topic, which is no person's, so its push only opens the
// draft in the dashboard.

func (s *ntfySurface) EscalateTo(client string) (string, bool) {
	t, ok := s.cfg.EscalateTo[client]
	return t, ok
}

func (s *ntfySurface) Remind(ctx context.Context, n Notice) error {
	v := n.View
	if n.Stage == StageEscalate {
		return s.publishPlain(ctx, n)
	}
	users, err := s.a.st.Users()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(s.cfg.Topics))
	for name := range s.cfg.Topics {
		names = append(names, name)
	}
	slices.Sort(names)
	// A retry skips the people an earlier attempt pushed this stage to: a
	// push that went out left its token, minted since the stage was due (a
	// push that failed took its token with it, so that person is pushed
	// again).
	var pushed []string
	if n.Retry {
		if err := s.a.st.View(func(tx *store.Tx) error {
			ts, err := tx.PushTokensOf(ViaNtfy, v.Draft.ID)
			for _, t := range ts {
				if !t.CreatedAt.Before(n.Since) {
					pushed = append(pushed, t.User)
				}
			}
			return err
		}); err != nil {
			return err
		}
	}
	now := s.a.Now()
	for _, name := range names {
		i := slices.IndexFunc(users, func(u store.User) bool { return u.Name == name })
		if i < 0 || users[i].Disabled || !Allowed(s.a.cfg, users[i], v.Channel) || slices.Contains(pushed, name) {
			continue
		}
		if err := s.push(ctx, name, s.cfg.Topics[name], v, now, n.Line); err != nil {
			return err
		}
	}
	return nil
}

// publishPlain publishes n to its topic with no button that decides.
func (s *ntfySurface) publishPlain(ctx context.Context, n Notice) error {
	v := n.View
	p := ntfyPublish{
		Topic: n.Chat, Title: clip("Escalated: reply to "+oneLine(v.Customer)+" — "+v.ClientName+" · "+v.Channel, ntfyTitle),
		Message: clip(ntfyText(v, n.Line), ntfyMessage), Priority: 5, Tags: []string{"rotating_light"}, Click: n.Link,
		Actions: []ntfyAction{},
	}
	if n.Link != "" {
		p.Actions = append(p.Actions, ntfyAction{Action: "view", Label: "Open", URL: n.Link})
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if s.cfg.Token != "" {
		h.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.a.post(ctx, s.cfg.URL, h, body)
	if err != nil {
		return fmt.Errorf("ntfy publish to escalation topic: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	e := &NtfyError{Status: resp.StatusCode}
	if err := json.Unmarshal(data, e); err != nil {
		s.a.log.Debug("approvals: ntfy: an error answer that is not JSON", slog.Int("status", resp.StatusCode))
	}
	return e
}

// Erasure: a card quotes the customer, so when their lead is erased the
// card's message is deleted (Follow, Deleter).

// Delete deletes a Slack card (chat.delete); one already gone is fine.
func (s *slackSurface) Delete(ctx context.Context, c store.Card) error {
	err := s.call(ctx, "chat.delete", map[string]string{"channel": c.Chat, "ts": c.Ref}, nil)
	var api *SlackAPIError
	if errors.As(err, &api) && (api.Code == "message_not_found" || api.Code == "channel_not_found") {
		return nil
	}
	return err
}

// Delete deletes a Telegram card (deleteMessage). A bot cannot delete a
// message over 48 hours old in a group: that card is edited to say the
// customer was erased, its keyboard gone.
func (s *telegramSurface) Delete(ctx context.Context, c store.Card) error {
	id, err := strconv.ParseInt(c.Ref, 10, 64)
	if err != nil {
		return nil // not a message id of ours
	}
	err = s.call(ctx, "deleteMessage", map[string]any{"chat_id": c.Chat, "message_id": id}, nil)
	var api *TelegramAPIError
	if !errors.As(err, &api) || api.Code != http.StatusBadRequest {
		return err
	}
	switch {
	case strings.Contains(api.Description, "message to delete not found"):
		return nil
	case strings.Contains(api.Description, "can't be deleted"):
		err = s.call(ctx, "editMessageText", map[string]any{"chat_id": c.Chat, "message_id": id, "text": "This draft's customer was erased."}, nil)
		if errors.As(err, &api) && api.Code == http.StatusBadRequest && strings.Contains(api.Description, "message to edit not found") {
			return nil
		}
		return err
	}
	return err
}
