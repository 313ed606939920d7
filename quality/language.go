package quality

import (
	"strings"
	"sync"
	"unicode"

	"github.com/pemistahl/lingua-go"
)

// MinLetters is how many letters a text needs before its language is
// taken as known: on a greeting ("hi", "ok thanks") any detection means
// little, and a flag on it would only be noise.
const MinLetters = 20

// Languages are the languages the guard tells apart: those an agency's
// customers write in most, in Europe and beyond. A text in another one is
// detected as the nearest of these, or as none when no language stands
// out, which never flags a reply. Each costs about 1 MB of memory, loaded
// the first time a text of its script is checked.
var Languages = []lingua.Language{
	lingua.English, lingua.German, lingua.French, lingua.Spanish, lingua.Portuguese, lingua.Italian,
	lingua.Dutch, lingua.Polish, lingua.Czech, lingua.Slovak, lingua.Hungarian, lingua.Romanian,
	lingua.Croatian, lingua.Slovene, lingua.Swedish, lingua.Danish, lingua.Bokmal, lingua.Finnish,
	lingua.Estonian, lingua.Latvian, lingua.Lithuanian, lingua.Greek, lingua.Turkish, lingua.Russian,
	lingua.Ukrainian, lingua.Bulgarian, lingua.Serbian, lingua.Hebrew, lingua.Arabic, lingua.Persian,
	lingua.Hindi, lingua.Chinese, lingua.Japanese, lingua.Korean, lingua.Vietnamese, lingua.Thai,
	lingua.Indonesian, lingua.Malay, lingua.Tagalog, lingua.Catalan, lingua.Albanian, lingua.Afrikaans,
}

// minDistance is how far the likeliest language must stand ahead of the
// next (lingua's relative distance) for a detection to count: below it
// the text is as much one language as another, and says nothing.
const minDistance = 0.25

// detector is built once, at the first check: lingua's detector loads
// each language's trigram model when a text first needs it (low accuracy
// mode: trigrams only, which is what keeps it to about 1 MB a language; on
// the short texts customers send it still tells English from Portuguese,
// where whatlanggo, tried first, called "Do you also design logos? Our
// budget is around 800 EUR." Portuguese with full confidence).
var detector = sync.OnceValue(func() lingua.LanguageDetector {
	return lingua.NewLanguageDetectorBuilder().
		FromLanguages(Languages...).
		WithLowAccuracyMode().
		WithMinimumRelativeDistance(minDistance).
		Build()
})

// Language is the language of text as an ISO 639-3 code ("deu"), and
// whether it is known: the text has MinLetters letters and one language
// stands out (minDistance).
func Language(text string) (code string, ok bool) {
	if letters(text) < MinLetters {
		return "", false
	}
	l, ok := detector().DetectLanguageOf(text)
	if !ok || l == lingua.Unknown {
		return "", false
	}
	return strings.ToLower(l.IsoCode639_3().String()), true
}

// LanguageName is the English name of an ISO 639-3 code ("German"), or
// the code itself when it names none of the languages lingua knows.
func LanguageName(code string) string {
	if code == "" {
		return ""
	}
	l := lingua.GetLanguageFromIsoCode639_3(lingua.GetIsoCode639_3FromValue(strings.ToUpper(code)))
	if l == lingua.Unknown {
		return code
	}
	if l == lingua.Bokmal {
		return "Norwegian"
	}
	return titleCase(l.String())
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return s[:1] + strings.ToLower(s[1:])
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
