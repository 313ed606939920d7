package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"net/url"
	"strconv"
	"strings"
)

// generator makes one preset's bodies: a JSON template written in every
// JSON layout, or its own form layouts.
type generator struct {
	json  func(id ident, tx Text) (obj, Want)
	forms []formLayout
}

// formLayout is one way a form or multipart sender writes its fields.
type formLayout struct {
	name string
	make func(id ident, tx Text) Body
}

var generators = map[string]generator{
	"whatsapp":  {json: whatsapp},
	"messenger": {json: metaMessaging("page", "1234567890", "m_")},
	"instagram": {json: metaMessaging("instagram", "17841400000000000", "aWdf")},
	"telegram":  {json: telegram},
	"slack":     {json: slack},
	"postmark":  {json: postmark},
	"typeform":  {json: typeform},
	"generic":   {json: generic},
	Demo:        {json: generic},
	"twilio": {forms: []formLayout{
		{"form", func(id ident, tx Text) Body { return twilio(id, tx, encodeURIComponent) }},
		{"form-plus", func(id ident, tx Text) Body { return twilio(id, tx, nil) }},
	}},
	"mailgun": {forms: []formLayout{
		{"form", func(id ident, tx Text) Body { return mailgun(id, tx, false) }},
		{"multipart", func(id ident, tx Text) Body { return mailgun(id, tx, true) }},
	}},
	"sendgrid": {forms: []formLayout{
		{"multipart", func(id ident, tx Text) Body { return sendgrid(id, tx, false) }},
		{"multipart-attachment", func(id ident, tx Text) Body { return sendgrid(id, tx, true) }},
	}},
}

// whatsapp is the Cloud API's text message notification
// (developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples).
func whatsapp(id ident, tx Text) (obj, Want) {
	from := id.phone("1650")
	mid := "wamid.corpus-" + id.tag()
	return obj{
		{"object", "whatsapp_business_account"},
		{"entry", arr{obj{
			{"id", "102290129340398"},
			{"changes", arr{obj{
				{"value", obj{
					{"messaging_product", "whatsapp"},
					{"metadata", obj{{"display_phone_number", "15550783881"}, {"phone_number_id", "106540352242922"}}},
					{"contacts", arr{obj{{"profile", obj{{"name", tx.From}}}, {"wa_id", from}}}},
					{"messages", arr{obj{
						{"from", from}, {"id", mid}, {"timestamp", "1767225600"},
						{"text", obj{{"body", tx.Body}}}, {"type", "text"},
					}}},
				}},
				{"field", "messages"},
			}}},
		}}},
	}, Want{MessageID: mid, Conversation: from, Contact: from, Name: tx.From, Text: tx.Body}
}

// metaMessaging is Messenger's and Instagram's messages webhook
// (developers.facebook.com/docs/messenger-platform/reference/webhook-events/messages).
func metaMessaging(object, page, midPrefix string) func(ident, Text) (obj, Want) {
	return func(id ident, tx Text) (obj, Want) {
		sender := strconv.Itoa(6789000000 + id.n)
		mid := midPrefix + "corpus-" + id.tag()
		return obj{
			{"object", object},
			{"entry", arr{obj{
				{"id", page},
				{"time", num("1767225600000")},
				{"messaging", arr{obj{
					{"sender", obj{{"id", sender}}},
					{"recipient", obj{{"id", page}}},
					{"timestamp", num("1767225600000")},
					{"message", obj{{"mid", mid}, {"text", tx.Body}}},
				}}},
			}}},
		}, Want{MessageID: mid, Conversation: sender, Contact: sender, Text: tx.Body}
	}
}

// telegram is a Bot API Update with a private text message
// (core.telegram.org/bots/api#update).
func telegram(id ident, tx Text) (obj, Want) {
	update := strconv.Itoa(870000 + id.n)
	user := num(strconv.Itoa(1111000 + id.n))
	return obj{
			{"update_id", num(update)},
			{"message", obj{
				{"message_id", num(strconv.Itoa(id.n))},
				{"from", obj{{"id", user}, {"is_bot", false}, {"first_name", tx.From}, {"username", "ada_corpus"}, {"language_code", "en"}}},
				{"chat", obj{{"id", user}, {"first_name", tx.From}, {"username", "ada_corpus"}, {"type", "private"}}},
				{"date", num("1767225600")},
				{"text", tx.Body},
			}},
		}, Want{MessageID: update, Conversation: string(user), Contact: string(user), Name: tx.From, Text: tx.Body,
			ReplyTo: ReplyTo{Chat: string(user), MessageID: strconv.Itoa(id.n)}}
}

// slackEscape is what Slack does to a message's text: &, < and > become
// entities (api.slack.com/reference/surfaces/formatting#escaping). The
// preset stores the text as Slack sends it.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// slack is an Events API event_callback with a message event
// (api.slack.com/events/message).
func slack(id ident, tx Text) (obj, Want) {
	channel := fmt.Sprintf("D%08d", id.n)
	user := fmt.Sprintf("U%09d", id.n)
	text := slackEscape(tx.Body)
	return obj{
			{"token", "XXYYZZ"},
			{"team_id", "T0001"},
			{"api_app_id", "A0001"},
			{"event", obj{
				{"type", "message"}, {"channel", channel}, {"user", user}, {"text", text},
				{"ts", "1767225600.000200"}, {"event_ts", "1767225600.000200"}, {"channel_type", "im"},
			}},
			{"type", "event_callback"},
			{"authed_users", arr{"U0BOT"}},
			{"event_id", "Ev" + strings.ToUpper(strings.ReplaceAll(id.tag(), "-", ""))},
			{"event_time", num("1767225600")},
		}, Want{MessageID: "Ev" + strings.ToUpper(strings.ReplaceAll(id.tag(), "-", "")), Conversation: channel, Contact: user, Text: text,
			ReplyTo: ReplyTo{Chat: channel, Thread: "1767225600.000200"}}
}

// subject is an email body's subject: non-ASCII and an ampersand.
func subject(id ident) string { return "Re: fish & chips — order " + id.tag() }

// email is the sender's address of an email body: one lead per body.
func email(id ident) string { return fmt.Sprintf("ada+%d@example.com", id.n) }

// postmark is an inbound webhook (postmarkapp.com/developer/webhooks/inbound-webhook).
func postmark(id ident, tx Text) (obj, Want) {
	from := email(id)
	mid := fmt.Sprintf("73e6d360-66eb-11e1-8e72-%012d", id.n)
	subj := subject(id)
	return obj{
			{"FromName", tx.From},
			{"MessageStream", "inbound"},
			{"From", from},
			{"FromFull", obj{{"Email", from}, {"Name", tx.From}, {"MailboxHash", ""}}},
			{"To", `"Support" <support+corpus@inbound.postmarkapp.com>`},
			{"ToFull", arr{obj{{"Email", "support+corpus@inbound.postmarkapp.com"}, {"Name", "Support"}, {"MailboxHash", "corpus"}}}},
			{"Cc", ""},
			{"CcFull", arr{}},
			{"OriginalRecipient", "support+corpus@inbound.postmarkapp.com"},
			{"Subject", subj},
			{"MessageID", mid},
			{"ReplyTo", ""},
			{"MailboxHash", "corpus"},
			{"Date", "Thu, 1 Jan 2026 00:00:00 +0000"},
			{"TextBody", tx.Body + "\n\nOn Wed, Dec 31, 2025 at 9:00 AM Support wrote:\n> Thanks for your order."},
			{"HtmlBody", "<html><body><p>" + htmlEscape(tx.Body) + "</p></body></html>"},
			{"StrippedTextReply", tx.Body},
			{"Tag", ""},
			{"Headers", arr{
				obj{{"Name", "X-Spam-Status"}, {"Value", "No"}},
				obj{{"Name", "Message-ID"}, {"Value", "<CAE-corpus-" + id.tag() + "@mail.gmail.com>"}},
			}},
			{"Attachments", arr{}},
		}, Want{MessageID: mid, Conversation: from, Contact: from, Name: tx.From, Text: tx.Body, Subject: subj,
			ReplyTo: ReplyTo{MessageID: "<CAE-corpus-" + id.tag() + "@mail.gmail.com>"}}
}

var htmlEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace

// typeform is a form_response webhook
// (typeform.com/developers/webhooks/example-payload).
func typeform(id ident, tx Text) (obj, Want) {
	token := fmt.Sprintf("corpus%026d", id.n)
	from := email(id)
	return obj{
		{"event_id", fmt.Sprintf("01JGZ%021d", id.n)},
		{"event_type", "form_response"},
		{"form_response", obj{
			{"form_id", "lT4Z3j"},
			{"token", token},
			{"landed_at", "2026-01-01T00:00:00Z"},
			{"submitted_at", "2026-01-01T00:01:00Z"},
			{"definition", obj{
				{"id", "lT4Z3j"}, {"title", "Contact us"},
				{"fields", arr{
					obj{{"id", "f1"}, {"ref", "name"}, {"type", "short_text"}, {"title", "Your name"}},
					obj{{"id", "f3"}, {"ref", "email"}, {"type", "email"}, {"title", "Email"}},
					obj{{"id", "f4"}, {"ref", "message"}, {"type", "long_text"}, {"title", "How can we help?"}},
				}},
			}},
			{"answers", arr{
				obj{{"type", "text"}, {"text", tx.From}, {"field", obj{{"id", "f1"}, {"type", "short_text"}, {"ref", "name"}}}},
				obj{{"type", "email"}, {"email", from}, {"field", obj{{"id", "f3"}, {"type", "email"}, {"ref", "email"}}}},
				obj{{"type", "text"}, {"text", tx.Body}, {"field", obj{{"id", "f4"}, {"type", "long_text"}, {"ref", "message"}}}},
			}},
		}},
	}, Want{MessageID: token, Conversation: from, Contact: from, Name: tx.From, Text: tx.Body}
}

// generic is the shape of the demo channel (and of a generic channel that
// maps the same fields): a site's contact form posting JSON, with a little
// more than the fields read.
func generic(id ident, tx Text) (obj, Want) {
	mid := "corpus-" + id.tag()
	conv := "conv-" + id.tag()
	from := id.phone("+1555")
	return obj{
		{"id", mid},
		{"conversation_id", conv},
		{"from", from},
		{"name", tx.From},
		{"text", tx.Body},
		{"meta", obj{{"source", "contact form"}, {"page", "https://shop.example/contact?ref=corpus"}, {"tags", arr{"corpus", id.layout}}, {"score", num("0.75")}, {"consent", true}, {"referrer", nil}}},
	}, Want{MessageID: mid, Conversation: conv, Contact: from, Name: tx.From, Text: tx.Body}
}

// param is one form field, in the order the sender writes it.
type param struct{ k, v string }

// encodeForm writes ps in order, each name and value escaped by esc; with
// esc nil, sorted by name as url.Values.Encode writes them ("+" for a space).
func encodeForm(ps []param, esc func(string) string) string {
	if esc == nil {
		v := url.Values{}
		for _, p := range ps {
			v.Add(p.k, p.v)
		}
		return v.Encode()
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = esc(p.k) + "=" + esc(p.v)
	}
	return strings.Join(parts, "&")
}

// encodeURIComponent is JavaScript's: every byte but A-Z a-z 0-9 - _ . ! ~ * ' ( ) percent-encoded.
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func values(ps []param) url.Values {
	v := url.Values{}
	for _, p := range ps {
		v.Add(p.k, p.v)
	}
	return v
}

// twilio is an incoming WhatsApp message through Twilio's Messaging webhook
// (twilio.com/docs/messaging/guides/webhook-request), form-encoded as
// Twilio's own servers do (%20) or as most proxies re-encode it (+, sorted).
func twilio(id ident, tx Text, esc func(string) string) Body {
	sid := fmt.Sprintf("SM%032d", id.n)
	from := "whatsapp:" + id.phone("+55119")
	ps := []param{
		{"SmsMessageSid", sid}, {"NumMedia", "0"}, {"ProfileName", tx.From}, {"WaId", strings.TrimPrefix(from, "whatsapp:+")},
		{"SmsSid", sid}, {"SmsStatus", "received"}, {"Body", tx.Body}, {"To", "whatsapp:+14155238886"}, {"NumSegments", "1"},
		{"MessageSid", sid}, {"AccountSid", "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"}, {"From", from}, {"ApiVersion", "2010-04-01"},
	}
	return Body{
		Preset: id.preset, Layout: id.layout, Text: id.text, ContentType: "application/x-www-form-urlencoded",
		Raw: []byte(encodeForm(ps, esc)), Fields: values(ps),
		Want: Want{MessageID: sid, Conversation: from, Contact: from, Name: tx.From, Text: tx.Body},
	}
}

// mailgunToken is a mailgun body's token, 50 hex characters as Mailgun's
// are, one of its own for each message (handoff spends a token once, as
// Mailgun asks receivers to); the signature covers it and the timestamp.
func mailgunToken(mid string) string {
	sum := sha256.Sum256([]byte(mid))
	return hex.EncodeToString(sum[:])[:50]
}

// mailgun is an inbound route's forward (documentation.mailgun.com,
// "Receiving messages via HTTP through a forward() action"): a form, or
// multipart when the message has attachments.
func mailgun(id ident, tx Text, multi bool) Body {
	sender := email(id)
	mid := "<corpus-" + id.tag() + "@mg.example.com>"
	subj := subject(id)
	token := mailgunToken(mid)
	params := func(ts int64) []param {
		t := strconv.FormatInt(ts, 10)
		return []param{
			{"Message-Id", mid}, {"sender", sender}, {"from", "Ada Customer <" + sender + ">"}, {"recipient", "sales@mg.example.com"},
			{"subject", subj}, {"body-plain", tx.Body + "\r\n\r\n> earlier text\r\n"}, {"stripped-text", tx.Body},
			{"stripped-signature", ""}, {"attachment-count", map[bool]string{true: "1", false: "0"}[multi]},
			{"timestamp", t}, {"token", token}, {"signature", hmacHex(Secret("mailgun"), t+token)},
		}
	}
	b := Body{
		Preset: id.preset, Layout: id.layout, Text: id.text,
		Want: Want{MessageID: mid, Conversation: sender, Contact: sender, Name: "Ada Customer", Text: tx.Body, Subject: subj},
	}
	const boundary = "----MailgunBoundary7MA4YWxkTrZu0gW"
	if multi {
		b.ContentType = "multipart/form-data; boundary=" + boundary
		b.render = func(ts int64) []byte {
			return writeMultipart(boundary, params(ts), &file{"attachment-1", "menu.png", "image/png", "PNG fake image bytes"})
		}
	} else {
		b.ContentType = "application/x-www-form-urlencoded"
		b.render = func(ts int64) []byte { return []byte(encodeForm(params(ts), url.QueryEscape)) }
	}
	b.Raw = b.render(Epoch.Unix())
	b.Fields = values(params(Epoch.Unix()))
	return b
}

// sendgrid is an Inbound Parse post (docs.sendgrid.com/for-developers/parsing-email/setting-up-the-inbound-parse-webhook):
// always multipart, the raw headers in one field, the text with its
// trailing line break.
func sendgrid(id ident, tx Text, attach bool) Body {
	from := "Ada Customer <" + email(id) + ">"
	mid := "<CAB9-corpus-" + id.tag() + "@mail.example.com>"
	subj := subject(id)
	headers := strings.Join([]string{
		"Received: by mx0047p1mdw1.sendgrid.net with SMTP id corpus",
		"Message-ID: " + mid,
		"From: " + from,
		"Subject: " + mime.QEncoding.Encode("UTF-8", subj),
		"To: sales@inbound.example.com",
		"Content-Type: multipart/alternative; boundary=\"000000000000corpus\"",
		"",
	}, "\n")
	ps := []param{
		{"headers", headers}, {"dkim", "{@example.com : pass}"}, {"to", "sales@inbound.example.com"},
		{"from", from}, {"subject", subj}, {"text", tx.Body + "\r\n"},
		{"html", "<div dir=\"auto\">" + htmlEscape(tx.Body) + "</div>\r\n"},
		{"sender_ip", "209.85.220.41"}, {"envelope", `{"to":["sales@inbound.example.com"],"from":"` + email(id) + `"}`},
		{"charsets", `{"to":"UTF-8","html":"UTF-8","subject":"UTF-8","from":"UTF-8","text":"UTF-8"}`}, {"SPF", "pass"},
	}
	var f *file
	if attach {
		ps = append(ps, param{"attachments", "1"}, param{"attachment-info", `{"attachment1":{"filename":"floorplan.pdf","name":"floorplan.pdf","type":"application/pdf"}}`})
		f = &file{"attachment1", "floorplan.pdf", "application/pdf", "%PDF-1.4 not really a pdf, 48 bytes of test data"}
	} else {
		ps = append(ps, param{"attachments", "0"})
	}
	const boundary = "xYzZY"
	return Body{
		Preset: id.preset, Layout: id.layout, Text: id.text, ContentType: "multipart/form-data; boundary=" + boundary,
		Raw: writeMultipart(boundary, ps, f), Fields: values(ps),
		// The lead is the address of the raw From, the name its display name.
		Want: Want{MessageID: mid, Conversation: email(id), Contact: email(id), Name: "Ada Customer", Text: tx.Body, Subject: subj},
	}
}

type file struct{ field, name, ctype, content string }

// writeMultipart writes ps, then f, as multipart/form-data with boundary.
func writeMultipart(boundary string, ps []param, f *file) []byte {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		panic(err)
	}
	for _, p := range ps {
		if err := w.WriteField(p.k, p.v); err != nil {
			panic(err)
		}
	}
	if f != nil {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name=%q; filename=%q`, f.field, f.name)}
		h["Content-Type"] = []string{f.ctype}
		part, err := w.CreatePart(h)
		if err != nil {
			panic(err)
		}
		part.Write([]byte(f.content))
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
