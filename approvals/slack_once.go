package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/provider"
)

// A Slack card is posted once. chat.postMessage has no idempotency key, so
// a post whose answer is lost (a timeout, a reset connection, a process
// killed between Slack's accept and our record) may or may not be in the
// channel. Every card and reminder carries message metadata naming its
// draft (event_type handoff_card or handoff_reminder, event_payload
// {draft, stage}), and each post is classified as the provider kinds'
// sends are (provider.NotSent, provider.Ambiguous):
//
//	safe to resend  Slack answered (ok false, a 429), or nothing left this machine: not posted
//	look up         no answer, a 5xx, an answer cut short: conversations.history
//	                (oldest = when the post began, include_all_metadata) before any new post
//	reconcile       the lookup itself cannot be made (no channels:history scope, not in the
//	                channel): the card is marked uncertain, shown, and never posted blind
//
// The card's Posting (store.Card) is written before the post and cleared
// with its ref, so a retry knows an earlier attempt may have posted it.

// The metadata event types of handoff's messages.
const (
	slackCardEvent     = "handoff_card"
	slackReminderEvent = "handoff_reminder"
)

// slackHistoryPage is how many messages one lookup reads (the API's
// limit is 999; a card is looked for from just before its post began).
const slackHistoryPage = 200

// slackClockMargin is how far before a post began its lookup reads.
const slackClockMargin = 5 * time.Minute

// call POSTs body as JSON to Web API method and decodes the answer into
// out. A failure is *provider.NotSent or *jobs.RetryLater (Slack took
// nothing), *SlackAPIError (Slack answered no), or anything else when the
// call may have been carried out (no answer, an HTTP 5xx, an answer that
// cannot be read).
func (s *slackSurface) call(ctx context.Context, method string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ans, err := s.a.do(ctx, s.cfg.APIURL+"/"+method, http.Header{
		"Content-Type":  {"application/json; charset=utf-8"},
		"Authorization": {"Bearer " + s.cfg.BotToken},
	}, raw)
	if err != nil {
		return fmt.Errorf("slack %s: %w", method, err)
	}
	if ans.Status == http.StatusTooManyRequests {
		// Slack's rate limit (chat.postMessage: about one a second per
		// channel) names its wait; the job waits that long.
		wait, _ := strconv.Atoi(ans.Header.Get("Retry-After"))
		return &jobs.RetryLater{After: time.Duration(max(wait, 1)) * time.Second, Err: &provider.NotSent{Err: fmt.Errorf("slack %s: rate limited", method)}}
	}
	if ans.ReadErr != nil {
		return fmt.Errorf("slack %s: the answer broke off: %w", method, ans.ReadErr)
	}
	if ans.Status != http.StatusOK {
		return fmt.Errorf("slack %s: HTTP %d", method, ans.Status)
	}
	var ok struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(ans.Body, &ok); err != nil {
		return fmt.Errorf("slack %s: the answer is not JSON: %w", method, err)
	}
	if !ok.OK {
		return &SlackAPIError{Method: method, Code: ok.Error}
	}
	if out != nil {
		return json.Unmarshal(ans.Body, out)
	}
	return nil
}

// notPosted reports whether err proves a post did not happen: Slack said
// no (ok false, a rate limit), or nothing of the request left.
func notPosted(err error) bool {
	var (
		api     *SlackAPIError
		tg      *TelegramAPIError
		notSent *provider.NotSent
	)
	return errors.As(err, &api) || errors.As(err, &tg) || errors.As(err, &notSent)
}

func cardMetadata(draft string) *slackMetadata {
	return &slackMetadata{EventType: slackCardEvent, EventPayload: map[string]string{"draft": draft}}
}

func (s *slackSurface) Post(ctx context.Context, chat string, v View) (string, error) {
	var out struct {
		TS string `json:"ts"`
	}
	msg := slackMessage{Channel: chat, Text: slackFallback(v), Blocks: slackBlocks(v), Metadata: cardMetadata(v.Draft.ID)}
	if err := s.call(ctx, "chat.postMessage", msg, &out); err != nil {
		return "", err
	}
	if out.TS == "" {
		return "", errors.New("slack chat.postMessage: the answer has no ts")
	}
	return out.TS, nil
}

// Find looks for the card of v posted in chat since (a post whose answer
// was lost): the ts of the message whose metadata names v's draft.
func (s *slackSurface) Find(ctx context.Context, chat string, v View, since time.Time) (string, bool, error) {
	return s.findMessage(ctx, chat, since, func(m *slackMetadata) bool {
		return m.EventType == slackCardEvent && m.EventPayload["draft"] == v.Draft.ID
	})
}

// findMessage reads chat's history from a little before since, with the
// messages' metadata, for the first message match takes. An error that
// says the lookup cannot be made at all is *LookupError.
func (s *slackSurface) findMessage(ctx context.Context, chat string, since time.Time, match func(*slackMetadata) bool) (string, bool, error) {
	// Slack's ts is its own clock's: five minutes' margin for the two
	// clocks (a few more messages read, never the card missed).
	oldest := since.Add(-slackClockMargin)
	req := map[string]any{"channel": chat, "oldest": fmt.Sprintf("%d.000000", oldest.Unix()), "limit": slackHistoryPage, "include_all_metadata": true, "inclusive": true}
	for range 5 { // pages: a busy channel has more than one since the post
		var out struct {
			Messages []struct {
				TS       string         `json:"ts"`
				Metadata *slackMetadata `json:"metadata"`
			} `json:"messages"`
			HasMore  bool `json:"has_more"`
			Metadata struct {
				NextCursor string `json:"next_cursor"`
			} `json:"response_metadata"`
		}
		err := s.call(ctx, "conversations.history", req, &out)
		var api *SlackAPIError
		if errors.As(err, &api) {
			switch api.Code {
			case "missing_scope", "not_in_channel", "channel_not_found", "not_allowed_token_type", "invalid_auth", "account_inactive", "token_revoked":
				return "", false, &LookupError{Surface: ViaSlack, Why: fmt.Sprintf("conversations.history in %s answered %s (the app needs the channels:history and groups:history scopes and to be in the channel)", chat, api.Code)}
			}
		}
		if err != nil {
			return "", false, err
		}
		for _, m := range out.Messages {
			if m.Metadata != nil && match(m.Metadata) {
				return m.TS, true, nil
			}
		}
		if !out.HasMore || out.Metadata.NextCursor == "" {
			return "", false, nil
		}
		req["cursor"] = out.Metadata.NextCursor
	}
	return "", false, &LookupError{Surface: ViaSlack, Why: fmt.Sprintf("over %d messages were posted in %s since the card's post began", 5*slackHistoryPage, chat)}
}

// LookupError says a surface cannot find out whether a post whose answer
// was lost reached its chat.
type LookupError struct {
	Surface string
	Why     string
}

func (e *LookupError) Error() string { return e.Surface + " cannot be asked: " + e.Why }

// Finder is a Surface that can find a card it posted whose answer was lost.
type Finder interface {
	Find(ctx context.Context, chat string, v View, since time.Time) (ref string, found bool, err error)
}

func (s *slackSurface) EscalateTo(client string) (string, bool) {
	ch, ok := s.cfg.EscalateTo[client]
	return ch, ok
}

// Remind posts n: in the card's channel as a reply to the card, also sent
// to the channel (reply_broadcast); in another (the escalation's) as a
// message of its own. A retry looks for the notice first (its metadata).
func (s *slackSurface) Remind(ctx context.Context, n Notice) error {
	meta := &slackMetadata{EventType: slackReminderEvent, EventPayload: map[string]string{"draft": n.View.Draft.ID, "stage": n.Stage}}
	if n.Retry {
		_, found, err := s.findMessage(ctx, n.Chat, n.Since, func(m *slackMetadata) bool {
			return m.EventType == meta.EventType && m.EventPayload["draft"] == meta.EventPayload["draft"] && m.EventPayload["stage"] == n.Stage
		})
		if err != nil || found {
			return err
		}
	}
	msg := slackMessage{Channel: n.Chat, Text: clip(n.Line, slackFallbackText), Blocks: slackNotice(n), Metadata: meta}
	if n.Card.Ref != "" && n.Card.Chat == n.Chat && n.Card.Surface == ViaSlack {
		msg.ThreadTS, msg.ReplyBroadcast = n.Card.Ref, true
	}
	return s.call(ctx, "chat.postMessage", msg, nil)
}

// slackNotice is a reminder's blocks: its line, the customer's last
// message and the draft, and where to decide.
func slackNotice(n Notice) []block {
	v := n.View
	bs := []block{{Type: "section", Text: mrkdwn("*"+escape(n.Line)+"*", slackSectionText)}}
	if len(v.Messages) > 0 {
		last := v.Messages[len(v.Messages)-1]
		bs = append(bs, block{Type: "section", Text: mrkdwn(quote(clip(last, 1200)), slackSectionText)})
	}
	bs = append(bs, block{Type: "section", Text: mrkdwn("*Draft reply*\n"+escape(clip(v.Text, 2000)), slackSectionText)})
	where := "Decide on the card above."
	if n.Card.Chat != n.Chat || n.Card.Ref == "" {
		where = "Decide in the dashboard."
	}
	if n.Link != "" {
		where += " <" + n.Link + "|Open the draft>"
	}
	bs = append(bs, block{Type: "context", Elements: []any{mrkdwn(where, slackContextText)}})
	return bs
}

// uncertainSentence says why a card is not posted again.
func uncertainSentence(surface, chat string, posting time.Time, why string) string {
	return fmt.Sprintf("The %s card may already be in %s: its post began at %s and no answer came back, and %s; it is not posted again. Look in the chat, and decide the draft there or in the dashboard.",
		surfaceLabel(surface), chat, posting.UTC().Format("15:04:05 UTC"), why)
}
