package corpus

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
)

// Shape is a body of a preset's provider that is not its plain text
// message: a batch of two senders, a photo without a caption, an email
// that is not a reply. Its Wants are the messages the preset must read
// from it, in order; a body the preset must refuse (a 400, nothing stored)
// has none and Refused names what the refusal says.
type Shape struct {
	Body
	Wants   []Want
	Refused string
}

// Shapes returns every shape: each JSON one in every JSON layout, each
// form one as its provider sends it (form-encoded and multipart for
// Mailgun, multipart for SendGrid). Layout is "<shape>/<layout>".
func Shapes() []Shape {
	var out []Shape
	for _, sh := range jsonShapes {
		for li, l := range jsonLayouts {
			id := ident{preset: sh.preset, layout: sh.name + "-" + l.name, text: "shape", n: 9000 + li}
			doc, wants, refused := sh.make(id)
			b := Body{Preset: sh.preset, Layout: sh.name + "/" + l.name, Text: "shape", ContentType: "application/json", Raw: l.s.encode(doc)}
			if len(wants) > 0 {
				b.Want = wants[0]
			}
			out = append(out, Shape{Body: b, Wants: wants, Refused: refused})
		}
	}
	for i, sh := range formShapes {
		id := ident{preset: sh.preset, layout: sh.name, text: "shape", n: 9500 + i}
		out = append(out, sh.make(id))
	}
	return out
}

type jsonShape struct {
	preset, name string
	make         func(id ident) (doc obj, wants []Want, refused string)
}

type formShape struct {
	preset, name string
	make         func(id ident) Shape
}

var jsonShapes = []jsonShape{
	{"whatsapp", "two-senders", waTwoSenders},
	{"whatsapp", "media", waMedia},
	{"postmark", "first-email", postmarkFirstEmail},
	{"telegram", "group", telegramGroup},
	{"slack", "channel-thread", slackChannelThread},
	{"slack", "channel-top", slackChannelTop},
}

var formShapes = []formShape{
	{"mailgun", "unstripped-form", func(id ident) Shape { return mailgunShape(id, "unstripped", false) }},
	{"mailgun", "unstripped-multipart", func(id ident) Shape { return mailgunShape(id, "unstripped", true) }},
	{"mailgun", "headers-only-id-form", func(id ident) Shape { return mailgunShape(id, "headers-only-id", false) }},
	{"mailgun", "headers-only-id-multipart", func(id ident) Shape { return mailgunShape(id, "headers-only-id", true) }},
	{"mailgun", "no-id-form", func(id ident) Shape { return mailgunShape(id, "no-id", false) }},
	{"sendgrid", "display-name", func(id ident) Shape { return sendgridFrom(id, "Jürgen Müller <j.mueller@example.com>") }},
	{"sendgrid", "encoded-display-name", func(id ident) Shape {
		return sendgridFrom(id, mime.QEncoding.Encode("UTF-8", "Jürgen Müller")+" <j.mueller@example.com>")
	}},
	{"sendgrid", "bare-address", func(id ident) Shape { return sendgridFrom(id, "j.mueller@example.com") }},
}

// waValue wraps one WhatsApp change value in its notification.
func waEnvelope(value obj) obj {
	return obj{
		{"object", "whatsapp_business_account"},
		{"entry", arr{obj{
			{"id", "102290129340398"},
			{"changes", arr{obj{{"value", value}, {"field", "messages"}}}},
		}}},
	}
}

func waMeta() obj {
	return obj{{"display_phone_number", "15550783881"}, {"phone_number_id", "106540352242922"}}
}

// waTwoSenders is one value with messages from two customers, its
// contacts[] in the other order than its messages: each message's name is
// its own sender's (by wa_id), never the first contact's.
func waTwoSenders(id ident) (obj, []Want, string) {
	zoe, juergen := id.phone("1650"), id.phone("4930")
	m1, m2 := "wamid.shape-zoe-"+id.tag(), "wamid.shape-juergen-"+id.tag()
	return waEnvelope(obj{
			{"messaging_product", "whatsapp"},
			{"metadata", waMeta()},
			{"contacts", arr{
				obj{{"profile", obj{{"name", "Jürgen Müller"}}}, {"wa_id", juergen}},
				obj{{"profile", obj{{"name", "Zoë Ålander 🌸"}}}, {"wa_id", zoe}},
			}},
			{"messages", arr{
				obj{{"from", zoe}, {"id", m1}, {"timestamp", "1767225600"}, {"text", obj{{"body", "Hi, a table for two tonight?"}}}, {"type", "text"}},
				obj{{"from", juergen}, {"id", m2}, {"timestamp", "1767225601"}, {"text", obj{{"body", "Habt ihr heute Fisch & Chips?"}}}, {"type", "text"}},
			}},
		}), []Want{
			{MessageID: m1, Conversation: zoe, Contact: zoe, Name: "Zoë Ålander 🌸", Text: "Hi, a table for two tonight?"},
			{MessageID: m2, Conversation: juergen, Contact: juergen, Name: "Jürgen Müller", Text: "Habt ihr heute Fisch & Chips?"},
		}, ""
}

// waMedia is one sender's media messages
// (developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples):
// a caption is the text; without one, the text says what was sent.
func waMedia(id ident) (obj, []Want, string) {
	from := id.phone("1650")
	media := func(n int, typ string, body obj) obj {
		return obj{{"from", from}, {"id", fmt.Sprintf("wamid.shape-%s-%d-%s", typ, n, id.tag())}, {"timestamp", "1767225600"}, {"type", typ}, {typ, body}}
	}
	file := func(mt string, extra ...field) obj {
		return append(obj{{"mime_type", mt}, {"sha256", "J3JTk5fW8vrKBcVd7Gf1pxFqQVsZzfHqH2w2EJ3MpdI="}, {"id", "1003383421387256"}}, extra...)
	}
	msgs := arr{
		media(1, "image", append(obj{{"caption", "Das Menü von heute — 12 €?"}}, file("image/jpeg")...)),
		media(2, "image", file("image/jpeg")),
		media(3, "audio", file("audio/ogg; codecs=opus", field{"voice", true})),
		media(4, "document", file("application/pdf", field{"filename", "Speisekarte.pdf"})),
		media(5, "video", append(obj{{"caption", "  "}}, file("video/mp4")...)),
		media(6, "sticker", file("image/webp", field{"animated", false})),
	}
	texts := []string{"Das Menü von heute — 12 €?", "sent a photo", "sent a voice message or audio", "sent a document", "sent a video", "sent a sticker"}
	var wants []Want
	for i, m := range msgs {
		mid := m.(obj)[1].v.(string)
		wants = append(wants, Want{MessageID: mid, Conversation: from, Contact: from, Name: "Zoë Ålander 🌸", Text: texts[i]})
	}
	return waEnvelope(obj{
		{"messaging_product", "whatsapp"},
		{"metadata", waMeta()},
		{"contacts", arr{obj{{"profile", obj{{"name", "Zoë Ålander 🌸"}}}, {"wa_id", from}}}},
		{"messages", msgs},
	}), wants, ""
}

// postmarkFirstEmail is an email that answers nothing: Postmark finds no
// reply to strip and sends StrippedTextReply empty; the text is TextBody.
func postmarkFirstEmail(id ident) (obj, []Want, string) {
	from := email(id)
	mid := fmt.Sprintf("9a1c2e30-77eb-11e1-8e72-%012d", id.n)
	text := "Guten Tag,\nich hätte gern ein Angebot für 40 Personen am Freitag.\n\nGrüße\nJürgen Müller"
	return obj{
			{"FromName", "Jürgen Müller"},
			{"MessageStream", "inbound"},
			{"From", from},
			{"FromFull", obj{{"Email", from}, {"Name", "Jürgen Müller"}, {"MailboxHash", ""}}},
			{"To", `"Sales" <sales@inbound.postmarkapp.com>`},
			{"ToFull", arr{obj{{"Email", "sales@inbound.postmarkapp.com"}, {"Name", "Sales"}, {"MailboxHash", ""}}}},
			{"Subject", "Angebot für Freitag"},
			{"MessageID", mid},
			{"Date", "Thu, 1 Jan 2026 00:00:00 +0000"},
			{"TextBody", text},
			{"HtmlBody", "<p>Guten Tag,</p>"},
			{"StrippedTextReply", ""},
			{"Headers", arr{obj{{"Name", "Message-ID"}, {"Value", "<CAE-shape-" + id.tag() + "@mail.gmail.com>"}}}},
			{"Attachments", arr{}},
		}, []Want{{MessageID: mid, Conversation: from, Contact: from, Name: "Jürgen Müller", Text: text, Subject: "Angebot für Freitag",
			ReplyTo: ReplyTo{MessageID: "<CAE-shape-" + id.tag() + "@mail.gmail.com>"}}}, ""
}

// telegramGroup is a Bot API Update with a message in a supergroup
// (core.telegram.org/bots/api#message): chat is the group (a negative
// id), from the sender. The reply goes to the group as a reply to the
// message, never to the sender's private chat, which the bot may not
// write first.
func telegramGroup(id ident) (obj, []Want, string) {
	update := strconv.Itoa(880000 + id.n)
	user := num(strconv.Itoa(2222000 + id.n))
	const group = "-1001987654321"
	msgID := strconv.Itoa(4700 + id.n)
	text := "Hallo zusammen! Habt ihr am Samstag noch einen Tisch für 8? 🍻"
	return obj{
			{"update_id", num(update)},
			{"message", obj{
				{"message_id", num(msgID)},
				{"from", obj{{"id", user}, {"is_bot", false}, {"first_name", "Zoë"}, {"last_name", "Ålander"}, {"username", "zoe_a"}, {"language_code", "de"}}},
				{"chat", obj{{"id", num(group)}, {"title", "Stammtisch Café ☕"}, {"type", "supergroup"}}},
				{"date", num("1767225600")},
				{"text", text},
			}},
		}, []Want{{MessageID: update, Conversation: group, Contact: string(user), Name: "Zoë", Text: text,
			ReplyTo: ReplyTo{Chat: group, MessageID: msgID}}}, ""
}

// slackChannel is an Events API message event in a public channel
// (api.slack.com/events/message.channels), in a thread when threadTS is
// set (api.slack.com/events/message/message_replied: a reply carries
// its parent's thread_ts).
func slackChannel(id ident, threadTS string) (obj, []Want, string) {
	const channel, ts = "C0123ABCDEF", "1767225601.000300"
	user := fmt.Sprintf("U%09d", id.n)
	eventID := "Ev" + strings.ToUpper(strings.ReplaceAll(id.tag(), "-", ""))
	text := "Moin! Läuft der Export für Müller &amp; Söhne schon? 🙏"
	ev := obj{{"type", "message"}, {"channel", channel}, {"user", user}, {"text", text}, {"ts", ts}}
	thread := ts
	if threadTS != "" {
		ev, thread = append(ev, field{"thread_ts", threadTS}, field{"parent_user_id", "U0000PARENT"}), threadTS
	}
	ev = append(ev, field{"event_ts", ts}, field{"channel_type", "channel"})
	return obj{
			{"token", "XXYYZZ"},
			{"team_id", "T0001"},
			{"api_app_id", "A0001"},
			{"event", ev},
			{"type", "event_callback"},
			{"authed_users", arr{"U0BOT"}},
			{"event_id", eventID},
			{"event_time", num("1767225601")},
		}, []Want{{MessageID: eventID, Conversation: channel, Contact: user, Text: text,
			ReplyTo: ReplyTo{Chat: channel, Thread: thread}}}, ""
}

func slackChannelThread(id ident) (obj, []Want, string) { return slackChannel(id, "1767225500.000100") }

func slackChannelTop(id ident) (obj, []Want, string) { return slackChannel(id, "") }

// mailgunShape is a route's forward that Mailgun could not strip
// (stripped-text empty: the text is body-plain), one whose Message-Id is
// only in message-headers, or one with no Message-Id anywhere, which the
// preset refuses rather than answer 200 and lose.
func mailgunShape(id ident, kind string, multi bool) Shape {
	sender := email(id)
	mid := "<shape-" + id.tag() + "@mg.example.com>"
	token := mailgunToken(mid)
	plain := "Hallo,\r\nhabt ihr am Freitag noch Platz für 6?\r\n-- \r\nJürgen"
	headers := [][]string{
		{"Received", "by mxa.mailgun.org with SMTP id shape"},
		{"Message-Id", mid},
		{"From", "Jürgen Müller <" + sender + ">"},
		{"Subject", "Freitag"},
		{"To", "sales@mg.example.com"},
	}
	want := Want{MessageID: mid, Conversation: sender, Contact: sender, Name: "Jürgen Müller", Text: "habt ihr am Freitag noch Platz für 6?", Subject: "Freitag"}
	stripped := want.Text
	withField := true
	refused := ""
	switch kind {
	case "unstripped":
		stripped, want.Text = "", plain
	case "headers-only-id":
		withField = false
	case "no-id":
		withField = false
		headers = append(headers[:1], headers[2:]...)
		refused = "message id"
	}
	hj, err := json.Marshal(headers)
	if err != nil {
		panic(err)
	}
	params := func(ts int64) []param {
		t := strconv.FormatInt(ts, 10)
		var ps []param
		if withField {
			ps = append(ps, param{"Message-Id", mid})
		}
		return append(ps, []param{
			{"sender", sender}, {"from", "Jürgen Müller <" + sender + ">"}, {"recipient", "sales@mg.example.com"},
			{"subject", "Freitag"}, {"body-plain", plain}, {"stripped-text", stripped}, {"stripped-signature", ""},
			{"message-headers", string(hj)}, {"attachment-count", "0"},
			{"timestamp", t}, {"token", token}, {"signature", hmacHex(Secret("mailgun"), t+token)},
		}...)
	}
	b := Body{Preset: "mailgun", Layout: kind + map[bool]string{true: "/multipart", false: "/form"}[multi], Text: "shape"}
	const boundary = "----MailgunBoundaryShape0gW"
	if multi {
		b.ContentType = "multipart/form-data; boundary=" + boundary
		b.render = func(ts int64) []byte { return writeMultipart(boundary, params(ts), nil) }
	} else {
		b.ContentType = "application/x-www-form-urlencoded"
		b.render = func(ts int64) []byte { return []byte(encodeForm(params(ts), url.QueryEscape)) }
	}
	b.Raw = b.render(Epoch.Unix())
	b.Fields = values(params(Epoch.Unix()))
	sh := Shape{Body: b, Refused: refused}
	if refused == "" {
		b.Want = want
		sh.Body, sh.Wants = b, []Want{want}
	}
	return sh
}

// sendgridFrom is an Inbound Parse post whose from field is from, as the
// sender wrote it: the lead is the address, the name the display name,
// whichever way from is written.
func sendgridFrom(id ident, from string) Shape {
	mid := "<CAB9-shape-" + id.tag() + "@mail.example.com>"
	headers := strings.Join([]string{
		"Received: by mx0047p1mdw1.sendgrid.net with SMTP id shape",
		"Message-ID: " + mid,
		"From: " + from,
		"Subject: Angebot",
		"To: sales@inbound.example.com",
		"",
	}, "\n")
	ps := []param{
		{"headers", headers}, {"to", "sales@inbound.example.com"}, {"from", from}, {"subject", "Angebot"},
		{"text", "Ein Angebot für Freitag, bitte.\r\n"}, {"sender_ip", "209.85.220.41"},
		{"envelope", `{"to":["sales@inbound.example.com"],"from":"j.mueller@example.com"}`},
		{"charsets", `{"to":"UTF-8","subject":"UTF-8","from":"UTF-8","text":"UTF-8"}`}, {"SPF", "pass"}, {"attachments", "0"},
	}
	name := "Jürgen Müller"
	if !strings.Contains(from, "<") {
		name = ""
	}
	want := Want{MessageID: mid, Conversation: "j.mueller@example.com", Contact: "j.mueller@example.com", Name: name,
		Text: "Ein Angebot für Freitag, bitte.", Subject: "Angebot"}
	const boundary = "xYzZYshape"
	b := Body{Preset: "sendgrid", Layout: id.layout, Text: "shape", ContentType: "multipart/form-data; boundary=" + boundary,
		Raw: writeMultipart(boundary, ps, nil), Fields: values(ps), Want: want}
	return Shape{Body: b, Wants: []Want{want}}
}
