package approvals

import (
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/html"
)

// A reply by mail carries the person's words on top and, under them, what
// their mail program quoted: the card they answer, a signature. ReplyText
// keeps the words only; ReplyVerdict reads them as approve, reject or a
// reply of their own.

// maxReplyBytes bounds the text a reply is parsed from (a mail's body can
// be long; a person's answer is not).
const maxReplyBytes = 256 << 10

var (
	// "On Wed, 2 Dec 2026 at 09:00, Handoff <approvals+…> wrote:" and
	// its translations, on one line or folded over the next two.
	quoteHeader = regexp.MustCompile(`(?i)^(on|am|le|el|il|op|em|den|w dniu|в|el día)\s.{0,300}(wrote|schrieb|a écrit|escribió|ha scritto|schreef|escreveu|skrev|napisał|написал\(а\)|написал|написала)(\s*|\s.{0,200}):\s*$`)
	// Outlook and others: "-----Original Message-----", a row of
	// underscores before the From: block.
	originalMessage = regexp.MustCompile(`(?i)^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|mensaje original|forwarded message)\s*-{2,}\s*$`)
	underscores     = regexp.MustCompile(`^\s*_{8,}\s*$`)
	// The header block Outlook quotes: From: then Sent:/Date:/To:/Subject:.
	headerLine = regexp.MustCompile(`(?i)^\s*\*?(from|von|de|van|от)\s*:\*?\s+\S`)
	headerNext = regexp.MustCompile(`(?i)^\s*\*?(sent|date|to|subject|gesendet|datum|an|betreff|envoyé|date|à|objet|enviado|fecha|para|asunto)\s*:\*?`)
	mobileSig  = regexp.MustCompile(`(?i)^\s*(sent from my|get outlook for|envoyé de mon|von meinem|enviado desde mi)\b`)
)

// ReplyText is the person's own words in a reply by mail: the plain text
// (else the HTML's text) up to the quoted history — a line "On … wrote:"
// (folded or not, in the common languages), a quoted "> " line, the
// signature delimiter "-- ", Outlook's "-----Original Message-----" or
// "From:/Sent:" block, a mobile client's "Sent from my …" — with the
// surrounding blank lines trimmed.
func ReplyText(text, htmlBody string) string {
	if strings.TrimSpace(text) == "" && strings.TrimSpace(htmlBody) != "" {
		text = htmlText(htmlBody)
	}
	if len(text) > maxReplyBytes {
		text = text[:maxReplyBytes]
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(text, "\n")
	end := len(lines)
walk:
	for i, l := range lines {
		t := strings.TrimRightFunc(l, unicode.IsSpace)
		bare := strings.TrimLeftFunc(t, func(r rune) bool { return unicode.IsSpace(r) || r == '\u200f' || r == '\u200e' })
		switch {
		case strings.HasPrefix(bare, ">"),
			t == "--" || t == "-- " || l == "-- ",
			originalMessage.MatchString(t),
			mobileSig.MatchString(bare):
			end = i
			break walk
		case underscores.MatchString(t) && nextIs(lines, i+1, headerLine):
			end = i
			break walk
		case headerLine.MatchString(bare) && nextIs(lines, i+1, headerNext):
			end = i
			break walk
		case quoteStarts(lines, i):
			end = i
			break walk
		}
	}
	return strings.TrimSpace(strings.Join(lines[:end], "\n"))
}

// nextIs reports whether the first non-blank line from i matches re.
func nextIs(lines []string, i int, re *regexp.Regexp) bool {
	for ; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "" {
			return re.MatchString(strings.TrimSpace(lines[i]))
		}
	}
	return false
}

// quoteStarts reports whether lines[i] begins a quote header, alone or
// folded over the next two lines (Gmail folds a long one).
func quoteStarts(lines []string, i int) bool {
	joined := ""
	for j := i; j < len(lines) && j < i+3; j++ {
		l := strings.TrimSpace(lines[j])
		if l == "" && j > i {
			return false
		}
		if joined != "" {
			joined += " "
		}
		joined += l
		if quoteHeader.MatchString(joined) {
			return true
		}
	}
	return false
}

// htmlText is the text of an HTML-only mail: blocks and <br> as line
// breaks, quoted parts (<blockquote>, Gmail's gmail_quote, Outlook's
// divRplyFwdMsg, Apple's type=cite) left out, scripts and styles dropped.
func htmlText(body string) string {
	z := html.NewTokenizer(strings.NewReader(body))
	var b strings.Builder
	skip := 0 // depth inside a quoted or invisible element
	var stack []bool
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			if skip == 0 {
				b.WriteString(strings.Join(strings.Fields(string(z.Text())), " "))
				if t := z.Text(); len(t) > 0 && unicode.IsSpace(rune(t[len(t)-1])) {
					b.WriteByte(' ')
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			quoted := tag == "blockquote" || tag == "script" || tag == "style" || tag == "head"
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				key, val := string(k), strings.ToLower(string(v))
				if (key == "class" && (strings.Contains(val, "gmail_quote") || strings.Contains(val, "moz-cite-prefix") || strings.Contains(val, "yahoo_quoted"))) ||
					(key == "id" && (strings.Contains(val, "divrplyfwdmsg") || strings.Contains(val, "appendonsend"))) ||
					(key == "type" && val == "cite") {
					quoted = true
				}
			}
			switch tag {
			case "br":
				if skip == 0 {
					b.WriteByte('\n')
				}
				continue
			case "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "table":
				if skip == 0 {
					b.WriteByte('\n')
				}
			case "hr":
				if skip == 0 {
					b.WriteString("\n--\n") // what follows a rule is a signature or a quote
				}
				continue
			case "img", "meta", "link", "input", "wbr":
				continue // void elements: no end tag follows
			}
			if tt == html.SelfClosingTagToken {
				continue
			}
			stack = append(stack, quoted)
			if quoted {
				skip++
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "table":
				if skip == 0 {
					b.WriteByte('\n')
				}
			}
			if n := len(stack); n > 0 {
				if stack[n-1] {
					skip--
				}
				stack = stack[:n-1]
			}
		}
	}
}

// Verdict is what a reply by mail asks.
type Verdict struct {
	Action Action // Approve, Reject or Write
	Text   string // Write: the person's reply
	Reason string // Reject: why, when the reply said ("No, too pushy")
}

var (
	approveWords = map[string]bool{"ok": true, "okay": true, "yes": true, "y": true, "approve": true, "approved": true, "lgtm": true, "👍": true, "✅": true, "send": true, "send it": true}
	rejectWords  = map[string]bool{"no": true, "n": true, "reject": true, "rejected": true, "👎": true, "❌": true, "don't send": true, "do not send": true}
	// rejectLeads are the rejection words a reply may begin with and go on
	// after punctuation to say why ("No, too pushy"): "n" is not one (a
	// name's initial), nor is a word that goes on without punctuation ("No
	// problem, see you Friday" is a reply to send).
	rejectLeads = []string{"do not send", "don't send", "don’t send", "rejected", "reject", "no", "👎", "❌"}
)

// rejectMarks are the punctuation after a leading rejection word that
// makes the rest its reason (a line break does too).
const rejectMarks = ",.;:!-–—…"

// ReplyVerdict reads a reply's words (docs/contract.md, "Deciding by
// mail"):
//
//   - "ok", "yes", "approve", 👍 … alone (any case, with trailing
//     punctuation) approve the draft as written;
//   - "no", "reject", 👎 … alone reject it;
//   - a reply that begins with a rejection word followed by punctuation
//     (, . ; : ! - – — …) or a line break, then more text, rejects it with
//     that text as the reason: "No, too pushy", "Reject: wrong price",
//     "no - we are closed that day";
//   - anything else is the person's own reply, sent as it is ("OK, see you
//     Friday!", "No problem, it is ready").
//
// The rule errs towards sending nothing: a reply meant for the customer
// that begins "No," or "No." rejects the draft, and the person writes the
// reply in the dashboard or begins it another way. An empty reply asks
// nothing (ok false).
func ReplyVerdict(words string) (Verdict, bool) {
	words = strings.TrimSpace(words)
	if words == "" {
		return Verdict{}, false
	}
	key := strings.ToLower(strings.Join(strings.Fields(words), " "))
	key = strings.TrimRightFunc(key, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) || r == '\uFE0F' })
	if approveWords[key] || approveWords[strings.TrimSpace(strings.TrimSuffix(key, "👍"))] {
		return Verdict{Action: Approve}, true
	}
	if rejectWords[key] {
		return Verdict{Action: Reject}, true
	}
	if reason, ok := rejectReason(words); ok {
		return Verdict{Action: Reject, Reason: reason}, true
	}
	return Verdict{Action: Write, Text: words}, true
}

// rejectReason reads words as a leading rejection word, punctuation (or
// a line break) and a reason; ok false when they are not that.
func rejectReason(words string) (string, bool) {
	for _, lead := range rejectLeads {
		if len(words) < len(lead) || !strings.EqualFold(words[:len(lead)], lead) {
			continue
		}
		rest := strings.TrimLeft(words[len(lead):], "\uFE0F")
		trimmed := strings.TrimLeft(rest, " \t")
		emoji := !unicode.IsLetter([]rune(lead)[0])
		switch {
		case trimmed == "":
			return "", false
		case trimmed[0] == '\n' || trimmed[0] == '\r':
		case strings.ContainsRune(rejectMarks, []rune(trimmed)[0]):
		case emoji && trimmed != rest:
			// 👎 then a space: the emoji is no word of a sentence.
		default:
			return "", false // "No problem…", "Nothing…", "Rejection…"
		}
		reason := strings.TrimSpace(strings.TrimLeftFunc(trimmed, func(r rune) bool {
			return unicode.IsSpace(r) || strings.ContainsRune(rejectMarks, r)
		}))
		return reason, reason != ""
	}
	return "", false
}
