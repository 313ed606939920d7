package corpus

import (
	"embed"
	"fmt"
)

// examples are providers' documented example payloads, kept as their
// documentation prints them (indentation, escapes and all).
//
//go:embed testdata/*.json
var examples embed.FS

// verbatims lists them by preset, with what the preset reads from each.
var verbatims = map[string][]struct {
	file string
	want Want
}{
	"whatsapp": {{"whatsapp-text.json", Want{MessageID: "wamid.ABGGFlCGg0cvAgo-sJQh43L5Pe4W", Conversation: "16315551181", Contact: "16315551181", Name: "Kerry Fisher", Text: "Hello this is an answer"}}},
	"slack": {{"slack-message.json", Want{MessageID: "Ev9UQ52YNA", Conversation: "C2147483705", Contact: "U2147483697",
		Text: "Hello world, see <https://example.com/docs|the docs> &amp; reply", ReplyTo: ReplyTo{Chat: "C2147483705", Thread: "1355517523.000005"}}}},
	"telegram": {{"telegram-update.json", Want{MessageID: "10000", Conversation: "1111111", Contact: "1111111", Name: "Test Firstname", Text: "/start",
		ReplyTo: ReplyTo{Chat: "1111111", MessageID: "1365"}}}},
	"postmark": {{"postmark-inbound.json", Want{MessageID: "73e6d360-66eb-11e1-8e72-a8904824019b", Conversation: "support@postmarkapp.com",
		Contact: "support@postmarkapp.com", Name: "Postmarkapp Support", Text: "This is the reply text", Subject: "Test subject"}}},
}

// verbatim is preset's verbatim examples as bodies (layout "verbatim").
func verbatim(preset string) []Body {
	var out []Body
	for _, v := range verbatims[preset] {
		raw, err := examples.ReadFile("testdata/" + v.file)
		if err != nil {
			panic(fmt.Sprintf("corpus: %v", err))
		}
		out = append(out, Body{Preset: preset, Layout: "verbatim", Text: v.file, ContentType: "application/json", Raw: raw, Want: v.want})
	}
	return out
}
