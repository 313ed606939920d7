package hook

import (
	"slices"
	"strings"
)

// Handshakes a channel can answer.
const (
	HandshakeMeta  = "meta"  // GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…
	HandshakeSlack = "slack" // POST {"type":"url_verification","challenge":…}, signed
)

// Answers a channel can give the sender.
const (
	AnswerJSON  = "json"  // 202 accepted / 200 duplicate, with the outcome as JSON
	AnswerOK    = "ok"    // always 200, the outcome as JSON: Meta, Slack, Mailgun, Postmark retry anything else
	AnswerTwiML = "twiml" // always 200, an empty TwiML <Response/> as text/xml: Twilio answers the sender with it
)

// Preset bundles what one provider needs: how it signs, where its fields
// are, how it batches, which notifications are not messages, how it
// registers a URL and what it expects back. A channel's own keys override
// any of it. A preset named after a provider kind (twilio, whatsapp,
// telegram, slack) is the one that kind's declaration in provider/kinds
// names as its inbound; a test there keeps the two in step.
type Preset struct {
	Name      string
	Scheme    string // the signature scheme a signature block without one gets
	Header    string // hmac-sha256 and token
	Encoding  string // hmac-sha256
	Prefix    string // hmac-sha256
	Fields    PresetFields
	Messages  Messages
	Receipts  Receipts
	Handshake string
	Answer    string
}

// PresetFields are a preset's field sources (see Payload.FieldAt).
type PresetFields struct {
	MessageID                           []string
	ConversationID, Contact, Name, Text string
	Subject                             string // email presets: what a reply's "Re: " answers
}

// Messages says which items of a body are messages: Items is a pattern
// whose "*" tokens walk arrays ("" is the whole body, one item); an item is
// a message when every When source is present and no Unless source is.
// Anything else is a notification, answered 2xx and counted. Media says
// what a message without text sent, so that none is recorded empty.
type Messages struct {
	Items  string
	When   []string
	Unless []string
	Media  []Media
	// ReplyTo says where in the channel a message sits, so that its reply
	// goes there (a group, a channel's thread, an email's Message-ID)
	// rather than to the contact's own chat. It never changes the lead.
	ReplyTo ReplyTo
	// Sent is where the provider says when the customer wrote the message
	// (WhatsApp's timestamp, Unix seconds; Messenger's and Instagram's,
	// Unix milliseconds with SentMillis; an RFC 3339 time is read as one):
	// a reply window counts from it.
	// Empty, absent or unreadable: from when handoff received it.
	Sent       string
	SentMillis bool
}

// ReplyTo is where a message sits in its channel: in Messages the
// sources, in an Item the values read from them. Each is optional.
type ReplyTo struct {
	Chat      string // the chat or channel it was written in
	MessageID string // the message a reply answers (Telegram's message_id, an email's Message-ID)
	Thread    string // the thread it belongs to (Slack's thread_ts, else its ts)
}

// Media is one kind of message that may come without text (a photo
// without a caption): a message whose text is empty while Source is
// present gets Text instead ("sent a photo").
type Media struct {
	Source string
	Text   string
}

// Receipts says where a body reports on one of our own sends: Items as in
// Messages, ID the provider's message id of the send, Status its new
// status. No ID source: the provider sends none.
type Receipts struct {
	Items  string
	ID     string
	Status string
}

const (
	waValue   = "/entry/*/changes/*/value"
	waMessage = waValue + "/messages/*"
	waStatus  = waValue + "/statuses/*"
	fbItem    = "/entry/*/messaging/*"
	// waName is the profile name of the contacts[] entry whose wa_id is
	// the message's sender: a batch can carry several senders.
	waName = waValue + "/contacts/[wa_id=@" + waMessage + "/from]/profile/name"
)

// waText is a WhatsApp message's text: a text's body, else a media
// message's caption, else the text of the button the customer tapped (a
// template's quick reply: button.text; an interactive message's reply
// button or list row: its title).
var waText = strings.Join([]string{
	waMessage + "/text/body", waMessage + "/image/caption", waMessage + "/video/caption", waMessage + "/document/caption",
	waMessage + "/button/text", waMessage + "/interactive/button_reply/title", waMessage + "/interactive/list_reply/title",
}, orSeparator)

// waMedia names what a WhatsApp message without text or caption sent.
var waMedia = []Media{
	{waMessage + "/image", "sent a photo"},
	{waMessage + "/video", "sent a video"},
	{waMessage + "/audio", "sent a voice message or audio"},
	{waMessage + "/document", "sent a document"},
	{waMessage + "/sticker", "sent a sticker"},
	{waMessage + "/location", "sent a location"},
	{waMessage + "/contacts", "sent a contact card"},
	{waMessage + "/reaction", "reacted to a message"},
}

// metaMessaging is Messenger's and Instagram's shape: entry[].messaging[],
// where a message has message.mid and our own sends come back as echoes.
func metaMessaging(name string) Preset {
	return Preset{
		Name: name, Scheme: SchemeMeta,
		Fields: PresetFields{
			MessageID: []string{fbItem + "/message/mid"},
			Contact:   fbItem + "/sender/id", Text: fbItem + "/message/text",
		},
		Messages: Messages{Items: fbItem, When: []string{fbItem + "/message/mid"}, Unless: []string{fbItem + "/message/is_echo"},
			Sent: fbItem + "/timestamp", SentMillis: true},
		Handshake: HandshakeMeta, Answer: AnswerOK,
	}
}

var presets = map[string]Preset{
	"generic": {Name: "generic", Answer: AnswerJSON},
	"twilio": {
		Name: "twilio", Scheme: SchemeTwilio,
		Fields: PresetFields{
			MessageID: []string{"/MessageSid"},
			Contact:   "/From", Name: "/ProfileName", Text: "/Body",
		},
		// A status callback carries MessageStatus; an inbound message does not.
		Messages: Messages{When: []string{"/MessageSid"}, Unless: []string{"/MessageStatus"}},
		Receipts: Receipts{ID: "/MessageSid", Status: "/MessageStatus"},
		Answer:   AnswerTwiML,
	},
	"whatsapp": {
		Name: "whatsapp", Scheme: SchemeMeta,
		Fields: PresetFields{
			MessageID: []string{waMessage + "/id"},
			Contact:   waMessage + "/from", Name: waName, Text: waText,
		},
		Messages:  Messages{Items: waMessage, When: []string{waMessage + "/id"}, Media: waMedia, Sent: waMessage + "/timestamp"},
		Receipts:  Receipts{Items: waStatus, ID: waStatus + "/id", Status: waStatus + "/status"},
		Handshake: HandshakeMeta, Answer: AnswerOK,
	},
	"messenger": metaMessaging("messenger"),
	"instagram": metaMessaging("instagram"),
	"telegram": {
		Name: "telegram", Scheme: SchemeToken, Header: "X-Telegram-Bot-Api-Secret-Token",
		Fields: PresetFields{
			MessageID:      []string{"/update_id"},
			ConversationID: "/message/chat/id", Contact: "/message/from/id", Name: "/message/from/first_name", Text: "/message/text",
		},
		// A reply goes to the chat the message came from (a group's, not
		// the sender's private chat) as a reply to it.
		Messages: Messages{When: []string{"/message/message_id"}, ReplyTo: ReplyTo{Chat: "/message/chat/id", MessageID: "/message/message_id"}},
		Answer:   AnswerJSON,
	},
	"slack": {
		Name: "slack", Scheme: SchemeSlack,
		Fields: PresetFields{
			MessageID:      []string{"/event_id"},
			ConversationID: "/event/channel", Contact: "/event/user", Name: "", Text: "/event/text",
		},
		// Bots' messages (our own replies among them) and edits carry
		// bot_id or a subtype; other events carry no text.
		// A reply goes to the channel the message was written in, in its
		// thread: the thread it is in, else the one it starts.
		Messages: Messages{When: []string{"/event_id", "/event/text", "/event/user"}, Unless: []string{"/event/bot_id", "/event/subtype"},
			ReplyTo: ReplyTo{Chat: "/event/channel", Thread: "/event/thread_ts | /event/ts"}},
		Handshake: HandshakeSlack, Answer: AnswerOK,
	},
	"sendgrid": {
		Name: "sendgrid", Scheme: SchemeBasic,
		Fields: PresetFields{
			MessageID: []string{"mailheader:Message-ID@/headers"},
			// from is the raw header ("Jürgen Müller <j@example.com>"):
			// the lead is the address, the name its display name; a from
			// that is no address is taken as it is.
			Contact: "mailaddress:/from | /from", Name: "mailname:/from", Text: "/text", Subject: "/subject",
		},
		Answer: AnswerOK,
	},
	"mailgun": {
		Name: "mailgun", Scheme: SchemeMailgun,
		Fields: PresetFields{
			// Message-Id is not always a field of its own; the email's
			// headers (message-headers, a JSON list of pairs) have it.
			MessageID: []string{"/Message-Id | mailheader:Message-Id@/message-headers"},
			// stripped-text is empty when Mailgun could not strip the
			// quoted part: then the whole plain text.
			// from is the raw header ("Bob Smith <bob@example.com>"); its
			// display name is the lead's name, sender the bare address.
			Contact: "/sender", Name: "mailname:/from", Text: "/stripped-text | /body-plain", Subject: "/subject",
		},
		// Event webhooks are JSON with event-data (legacy ones, forms with
		// event): everything else is an email, recorded or refused with
		// a 400 when it has no id — never answered 200 and dropped, which
		// Mailgun would not retry.
		Messages: Messages{Unless: []string{"/event-data", "/event"}},
		Receipts: Receipts{ID: "/event-data/message/headers/message-id", Status: "/event-data/event"},
		Answer:   AnswerOK,
	},
	"postmark": {
		Name: "postmark", Scheme: SchemeBasic,
		Fields: PresetFields{
			MessageID: []string{"/MessageID"},
			// StrippedTextReply is empty for an email that is not a
			// reply: then the whole TextBody.
			Contact: "/FromFull/Email", Name: "/FromName", Text: "/StrippedTextReply | /TextBody", Subject: "/Subject",
		},
		// MessageID is Postmark's own id (the dedup key); the email's
		// Message-ID, which a reply's In-Reply-To names, is in Headers[].
		Messages: Messages{ReplyTo: ReplyTo{MessageID: "/Headers/[Name=Message-ID]/Value | /Headers/[Name=Message-Id]/Value"}},
		Answer:   AnswerOK,
	},
	"typeform": {
		Name: "typeform", Scheme: SchemeHMACSHA256, Header: "Typeform-Signature", Encoding: "base64", Prefix: "sha256=",
		Fields: PresetFields{
			MessageID: []string{"/form_response/token"},
			Contact:   "/form_response/answers/[type=email]/email",
			Name:      "/form_response/answers/[field.ref=name]/text",
			Text:      "/form_response/answers/[field.ref=message]/text",
		},
		Answer: AnswerJSON,
	},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LookupPreset returns the preset called name; the caller may change the
// copy it gets.
func LookupPreset(name string) (Preset, bool) {
	p, ok := presets[name]
	if !ok {
		return Preset{}, false
	}
	p.Fields.MessageID = slices.Clone(p.Fields.MessageID)
	p.Messages.When = slices.Clone(p.Messages.When)
	p.Messages.Unless = slices.Clone(p.Messages.Unless)
	p.Messages.Media = slices.Clone(p.Messages.Media)
	return p, true
}
