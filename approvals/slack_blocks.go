package approvals

import (
	"strings"
	"unicode/utf8"
)

// The Block Kit a Slack card is made of, as Slack documents it
// (docs.slack.dev/reference/block-kit): a header, the client and channel, the
// turn's messages quoted, the draft, and the buttons its state offers. The
// documented limits are kept here and checked by the tests
// (slack_blocks_test.go): a section's text 3000 characters, a header's 150,
// a button's text 75 and value 2000, an action_id or block_id 255, a
// message 50 blocks, a modal's title 24 and its input's initial_value 3000.

// Slack's documented limits.
const (
	slackSectionText  = 3000
	slackHeaderText   = 150
	slackButtonText   = 75
	slackContextText  = 3000
	slackModalTitle   = 24
	slackInputMax     = 3000
	slackFallbackText = 3000 // the notification text: Slack truncates at 40000; a card needs far less
)

// The action_ids of a card's buttons and the modal's callback_id.
const (
	slackApprove = "handoff.approve"
	slackEdit    = "handoff.edit"
	slackReject  = "handoff.reject"
	slackUndo    = "handoff.undo"
	slackModal   = "handoff.edit_modal"
	slackReplyID = "handoff.reply" // the modal's input block and action
)

type textObj struct {
	Type  string `json:"type"` // plain_text or mrkdwn
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}

func plain(s string, max int) *textObj { return &textObj{Type: "plain_text", Text: clip(s, max)} }
func mrkdwn(s string, max int) *textObj {
	return &textObj{Type: "mrkdwn", Text: clip(s, max)}
}

type confirmObj struct {
	Title   *textObj `json:"title"`
	Text    *textObj `json:"text"`
	Confirm *textObj `json:"confirm"`
	Deny    *textObj `json:"deny"`
	Style   string   `json:"style,omitempty"`
}

type element struct {
	Type     string      `json:"type"` // button, plain_text_input
	Text     *textObj    `json:"text,omitempty"`
	ActionID string      `json:"action_id"`
	Value    string      `json:"value,omitempty"`
	Style    string      `json:"style,omitempty"`
	Confirm  *confirmObj `json:"confirm,omitempty"`
	// plain_text_input
	Multiline    bool   `json:"multiline,omitempty"`
	InitialValue string `json:"initial_value,omitempty"`
	MaxLength    int    `json:"max_length,omitempty"`
}

type block struct {
	Type     string     `json:"type"` // header, section, context, actions, divider, input
	BlockID  string     `json:"block_id,omitempty"`
	Text     *textObj   `json:"text,omitempty"`
	Elements []any      `json:"elements,omitempty"` // context: text objects; actions: elements
	Label    *textObj   `json:"label,omitempty"`    // input
	Element  *element   `json:"element,omitempty"`  // input
	Fields   []*textObj `json:"fields,omitempty"`
}

// slackMessage is a chat.postMessage or chat.update body.
type slackMessage struct {
	Channel     string  `json:"channel"`
	TS          string  `json:"ts,omitempty"` // chat.update
	Text        string  `json:"text"`
	Blocks      []block `json:"blocks"`
	UnfurlLinks bool    `json:"unfurl_links"`
	UnfurlMedia bool    `json:"unfurl_media"`
	// Metadata names the draft the message is of (slack_once.go), so that
	// a post whose answer was lost is found by conversations.history.
	Metadata *slackMetadata `json:"metadata,omitempty"`
	// ThreadTS and ReplyBroadcast post a reminder as a reply to its card,
	// also shown in the channel.
	ThreadTS       string `json:"thread_ts,omitempty"`
	ReplyBroadcast bool   `json:"reply_broadcast,omitempty"`
}

// slackMetadata is a message's metadata (docs.slack.dev/messaging/message-metadata):
// an event_type and an event_payload of flat values.
type slackMetadata struct {
	EventType    string            `json:"event_type"`
	EventPayload map[string]string `json:"event_payload"`
}

// slackView is views.open's view: the Edit modal.
type slackView struct {
	Type            string   `json:"type"` // modal
	CallbackID      string   `json:"callback_id"`
	PrivateMetadata string   `json:"private_metadata"`
	Title           *textObj `json:"title"`
	Submit          *textObj `json:"submit"`
	Close           *textObj `json:"close"`
	Blocks          []block  `json:"blocks"`
}

// escape makes s safe in mrkdwn: Slack reads &, < and > as markup.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip shortens s to at most max characters, ending with "…" when cut.
func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// quote is s as a mrkdwn quote, every line of it.
func quote(s string) string {
	lines := strings.Split(escape(s), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// slackBlocks is the card v as Block Kit.
func slackBlocks(v View) []block {
	bs := []block{
		{Type: "header", Text: plain("Reply to "+v.Customer, slackHeaderText)},
		{Type: "context", Elements: []any{mrkdwn("*"+escape(v.ClientName)+"* · channel "+escape(v.Channel)+" · draft "+v.Draft.ID, slackContextText)}},
	}
	if len(v.Messages) > 0 {
		var b strings.Builder
		b.WriteString("*" + escape(v.Customer) + " wrote:*")
		for _, m := range v.Messages {
			b.WriteString("\n" + quote(m))
		}
		bs = append(bs, block{Type: "section", Text: mrkdwn(b.String(), slackSectionText)})
	}
	reply := "*Draft reply:*\n" + escape(v.Text)
	if v.State == Held || v.State == Approved {
		reply = "*Reply:*\n" + escape(v.Text)
	}
	bs = append(bs, block{Type: "section", Text: mrkdwn(reply, slackSectionText)})
	id := v.Draft.ID
	switch v.State {
	case Waiting:
		bs = append(bs, block{Type: "actions", BlockID: "handoff.decide", Elements: []any{
			element{Type: "button", Text: plain("Approve", slackButtonText), ActionID: slackApprove, Value: id, Style: "primary"},
			element{Type: "button", Text: plain("Edit", slackButtonText), ActionID: slackEdit, Value: id},
			element{Type: "button", Text: plain("Reject", slackButtonText), ActionID: slackReject, Value: id, Style: "danger",
				Confirm: &confirmObj{Title: plain("Reject this draft?", 100), Text: plain("Nothing is sent to "+v.Customer+".", 300),
					Confirm: plain("Reject", 30), Deny: plain("Keep it", 30), Style: "danger"}},
		}})
	case Held:
		bs = append(bs,
			block{Type: "context", Elements: []any{mrkdwn("✅ "+escape(v.Status)+" · sent at "+v.UndoUntil.UTC().Format("15:04:05 UTC")+" unless undone", slackContextText)}},
			block{Type: "actions", BlockID: "handoff.undo", Elements: []any{
				element{Type: "button", Text: plain("Undo", slackButtonText), ActionID: slackUndo, Value: id},
			}})
	default:
		mark := map[State]string{Approved: "✅ ", Rejected: "❌ ", Superseded: "↪️ "}[v.State]
		bs = append(bs, block{Type: "context", Elements: []any{mrkdwn(mark+escape(v.Status), slackContextText)}})
	}
	return bs
}

// slackFallback is the card's notification text (the message's text).
func slackFallback(v View) string {
	switch v.State {
	case Waiting:
		return clip("Draft reply to "+v.Customer+" waits for approval: "+v.Text, slackFallbackText)
	default:
		return clip("Reply to "+v.Customer+": "+v.Status, slackFallbackText)
	}
}

// slackEditView is the Edit modal of v's draft.
func slackEditView(v View) slackView {
	return slackView{
		Type: "modal", CallbackID: slackModal, PrivateMetadata: v.Draft.ID,
		Title:  plain("Edit the reply", slackModalTitle),
		Submit: plain("Approve", slackModalTitle),
		Close:  plain("Cancel", slackModalTitle),
		Blocks: []block{
			{Type: "context", Elements: []any{mrkdwn("To *"+escape(v.Customer)+"* ("+escape(v.ClientName)+", channel "+escape(v.Channel)+")", slackContextText)}},
			{Type: "input", BlockID: slackReplyID, Label: plain("Reply", 2000), Element: &element{
				Type: "plain_text_input", ActionID: slackReplyID, Multiline: true, InitialValue: v.Text, MaxLength: slackInputMax,
			}},
		},
	}
}
