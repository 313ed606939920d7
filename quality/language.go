package quality

import (
	"unicode"

	"github.com/abadojack/whatlanggo"
)

// MinLetters is how many letters a text needs before its language is
// taken as known: whatlanggo's confidence on a greeting ("hi", "ok
// thanks") means little, and a flag on it would only be noise.
const MinLetters = 30

// Language is the language of text as an ISO 639-3 code ("deu"), and
// whether it is known: the text has MinLetters letters and whatlanggo
// calls its answer reliable.
func Language(text string) (code string, ok bool) {
	if letters(text) < MinLetters {
		return "", false
	}
	info := whatlanggo.Detect(text)
	if info.Lang < 0 || !info.IsReliable() {
		return "", false
	}
	return info.Lang.Iso6393(), true
}

// LanguageName is the English name of an ISO 639-3 code ("German"), or
// the code itself when whatlanggo does not know it.
func LanguageName(code string) string {
	if code == "" {
		return ""
	}
	if l := whatlanggo.CodeToLang(code); l >= 0 && l.Iso6393() == code {
		return l.String()
	}
	return code
}

// LanguageCheck is the reply's language against the customer's.
type LanguageCheck struct {
	Customer, Reply string // ISO 639-3, "" when not known
	Differs         bool   // both known, and not the same
}

// CompareLanguages detects the language of the customer's message and of
// the reply. They differ only when both are known: a short text or an
// unsure detection never flags a reply.
func CompareLanguages(customer, reply string) LanguageCheck {
	var c LanguageCheck
	var okC, okR bool
	c.Customer, okC = Language(customer)
	c.Reply, okR = Language(reply)
	c.Differs = okC && okR && c.Customer != c.Reply
	return c
}

func letters(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			n++
		}
	}
	return n
}
