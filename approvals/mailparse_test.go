package approvals

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/handoff/handoff/testkit/corpus"
)

// The shapes real mail programs give a reply: the person's words, then
// what the program adds under them. Each is filled with every corpus text.
var replyShapes = []struct {
	name       string
	text, html func(words string) string
}{
	{"gmail", func(w string) string {
		return w + "\r\n\r\nOn Wed, Dec 2, 2026 at 9:00 AM Handoff <approvals+d01JD.abc@reply.example.com> wrote:\r\n\r\n> Ada wrote (Acme · web):\r\n> Draft reply: Hi Ada & Bob <3\r\n"
	}, nil},
	{"gmail-folded", func(w string) string {
		return w + "\n\nOn Wed, Dec 2, 2026 at 9:00 AM Handoff Approvals <\napprovals+d01JDXYZ.k3v7q2m9x4c8b6na@reply.example.com> wrote:\n\n> Draft reply:\n"
	}, nil},
	{"apple-mail", func(w string) string {
		return w + "\n\nSent from my iPhone\n\n> On 2 Dec 2026, at 09:00, Handoff <approvals@reply.example.com> wrote:\n> \n> Draft reply\n"
	}, nil},
	{"outlook", func(w string) string {
		return w + "\r\n\r\n________________________________\r\nFrom: Handoff <approvals+d01.x@reply.example.com>\r\nSent: Wednesday, December 2, 2026 9:00 AM\r\nTo: Dana <dana@acme.test>\r\nSubject: Approve a reply to Ada\r\n\r\nAda wrote:\r\n"
	}, nil},
	{"outlook-original", func(w string) string {
		return w + "\n\n-----Original Message-----\nFrom: Handoff\nSent: Wednesday\nSubject: Approve\n\nDraft reply\n"
	}, nil},
	{"signature", func(w string) string {
		return w + "\n\n-- \nDana Reyes · Acme & Co <support>\n+1 555 0100\n"
	}, nil},
	{"french", func(w string) string {
		return w + "\n\nLe mer. 2 déc. 2026 à 09:00, Handoff <approvals+d01.x@reply.example.com> a écrit :\n> Brouillon\n"
	}, nil},
	{"german", func(w string) string {
		return w + "\n\nAm Mi., 2. Dez. 2026 um 09:00 Uhr schrieb Handoff <approvals@reply.example.com>:\n> Entwurf\n"
	}, nil},
	{"outlook-german", func(w string) string {
		return w + "\n\nVon: Handoff <approvals@reply.example.com>\nGesendet: Mittwoch, 2. Dezember 2026 09:00\nAn: Dana\nBetreff: Approve\n"
	}, nil},
	{"html-only-gmail", nil, func(w string) string {
		return `<div dir="ltr">` + strings.ReplaceAll(htmlEscapeForTest(w), "\n", "<br>") + `</div><br><div class="gmail_quote"><div dir="ltr" class="gmail_attr">On Wed, Dec 2, 2026 at 9:00 AM Handoff wrote:<br></div><blockquote class="gmail_quote">Draft reply: Hi Ada</blockquote></div>`
	}},
	{"html-only-outlook", nil, func(w string) string {
		return `<html><head><style>p{margin:0}</style></head><body><p>` + strings.ReplaceAll(htmlEscapeForTest(w), "\n", "<br/>") + `</p><hr style="display:inline-block;width:98%"><div id="divRplyFwdMsg" dir="ltr"><b>From:</b> Handoff<br><b>Sent:</b> Wednesday</div><div>Draft reply</div></body></html>`
	}},
	{"bare", func(w string) string { return w }, nil},
}

var htmlEscapeForTest = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace

// normalized is what ReplyText gives of the words themselves: line breaks
// as \n, trimmed; in HTML, each line's runs of spaces as one.
func normalized(w string, html bool) string {
	w = strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(w, "\r\n", "\n"), "\r", "\n"))
	if html {
		lines := strings.Split(w, "\n")
		for i, l := range lines {
			lines[i] = strings.Join(strings.Fields(l), " ")
		}
		w = strings.TrimSpace(strings.Join(lines, "\n"))
	}
	return w
}

// TestReplyText: the person's words come out of every shape of reply, for
// every corpus text (emoji, RTL, & < >, newlines, 2,000 characters), and
// nothing of what the mail program added under them does.
func TestReplyText(t *testing.T) {
	n := 0
	for _, shape := range replyShapes {
		for _, tx := range corpus.Texts() {
			n++
			text, html := "", ""
			if shape.text != nil {
				text = shape.text(tx.Body)
			}
			if shape.html != nil {
				html = shape.html(tx.Body)
			}
			got := ReplyText(text, html)
			want := normalized(tx.Body, shape.html != nil)
			if got != want {
				t.Errorf("%s/%s:\n got %q\nwant %q", shape.name, tx.Name, got, want)
			}
		}
	}
	if n < 25 {
		t.Fatalf("%d replies; the table needs at least 25", n)
	}
}

// TestReplyVerdict: the words that approve and reject — a rejection word
// then punctuation and more text rejecting with that text as the reason —
// and everything else as the person's own reply.
func TestReplyVerdict(t *testing.T) {
	for _, c := range []struct {
		words  string
		act    Action
		text   string
		reason string
	}{
		{"ok", Approve, "", ""}, {"OK.", Approve, "", ""}, {"Yes!", Approve, "", ""}, {"  approve\n", Approve, "", ""}, {"ok 👍", Approve, "", ""},
		{"Okay", Approve, "", ""}, {"👍", Approve, "", ""}, {"LGTM", Approve, "", ""},
		{"no", Reject, "", ""}, {"No.", Reject, "", ""}, {"REJECT", Reject, "", ""}, {"❌", Reject, "", ""},
		{"ok but say we open at 9", Write, "ok but say we open at 9", ""},
		{"No problem, Ada — see you Friday & thanks <3", Write, "No problem, Ada — see you Friday & thanks <3", ""},
		{"مرحباً، نعم", Write, "مرحباً، نعم", ""},
		{"yes\n\nand add the parking info", Write, "yes\n\nand add the parking info", ""},
		// A rejection word, punctuation, a reason: rejected, saying why.
		{"No, too pushy", Reject, "", "too pushy"},
		{"no. Wrong price & the <b>tone</b> is off", Reject, "", "Wrong price & the <b>tone</b> is off"},
		{"Reject: ask for the order number first", Reject, "", "ask for the order number first"},
		{"REJECTED - مرحباً لا", Reject, "", "مرحباً لا"},
		{"No!!! we are closed on Fridays 🐟", Reject, "", "we are closed on Fridays 🐟"},
		{"no — it quotes last year's prices", Reject, "", "it quotes last year's prices"},
		{"Don't send; she already called", Reject, "", "she already called"},
		{"No\n\nToo long, make it two lines", Reject, "", "Too long, make it two lines"},
		{"👎 too formal", Reject, "", "too formal"},
		{"no , spelling", Reject, "", "spelling"},
		// No punctuation after the word, or not the word at all: a reply to send.
		{"No problem, we'll have it ready Friday", Write, "No problem, we'll have it ready Friday", ""},
		{"Nothing to add, thanks!", Write, "Nothing to add, thanks!", ""},
		{"Rejection slips are in the post.", Write, "Rejection slips are in the post.", ""},
		{"N. Smith will call you", Write, "N. Smith will call you", ""},
		{"OK, see you Friday!", Write, "OK, see you Friday!", ""},
		{"Noé will call you", Write, "Noé will call you", ""},
		{"no, ", Reject, "", ""},
		{"No...", Reject, "", ""},
	} {
		v, ok := ReplyVerdict(c.words)
		if !ok || v.Action != c.act || v.Text != c.text || v.Reason != c.reason {
			t.Errorf("ReplyVerdict(%q) = %+v, %v; want %s %q reason %q", c.words, v, ok, c.act, c.text, c.reason)
		}
	}
	if v, ok := ReplyVerdict(ReplyText("> only a quote\n> of the card\n", "")); ok {
		t.Errorf("a reply with no words of its own = %+v, want nothing asked", v)
	}
}

// FuzzReplyText: whatever a mail holds, the words taken are valid UTF-8,
// part of the mail (for plain text), hold no quoted "> " line, are taken
// the same from themselves, and read as a verdict without a panic.
func FuzzReplyText(f *testing.F) {
	for _, shape := range replyShapes {
		for _, tx := range corpus.Texts() {
			if shape.text != nil {
				f.Add(shape.text(tx.Body), "")
			} else {
				f.Add("", shape.html(tx.Body))
			}
		}
	}
	f.Add("On Monday\nI wrote:\n", "")
	f.Add("", "<p>a<blockquote>b<blockquote>c</p></blockquote>d")
	f.Fuzz(func(t *testing.T, text, html string) {
		got := ReplyText(text, html)
		if !utf8.ValidString(got) {
			t.Fatalf("ReplyText gave invalid UTF-8 %q", got)
		}
		if strings.TrimSpace(text) != "" {
			src := strings.ReplaceAll(strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\r\n", "\n"), "\r", "\n")
			if !strings.Contains(src, got) {
				t.Fatalf("ReplyText(%q) = %q, which is not in the mail", text, got)
			}
		}
		for _, l := range strings.Split(got, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), ">") {
				t.Fatalf("ReplyText(%q, %q) kept the quoted line %q", text, html, l)
			}
		}
		if again := ReplyText(got, ""); again != got && len(text) < maxReplyBytes {
			t.Fatalf("ReplyText is not stable: %q, then %q", got, again)
		}
		if v, ok := ReplyVerdict(got); ok && v.Action == Write && v.Text != strings.TrimSpace(got) {
			t.Fatalf("ReplyVerdict(%q) = %+v: the reply's text changed", got, v)
		}
	})
}
