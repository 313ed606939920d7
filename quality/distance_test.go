package quality

import (
	"math"
	"strings"
	"testing"

	"github.com/handoff/handoff/testkit/corpus"
)

func TestDistance(t *testing.T) {
	long := corpus.TextNamed("long").Body
	for _, c := range []struct {
		name, a, b string
		want       float64
		approx     bool
	}{
		{"same", "fish & chips", "fish & chips", 0, false},
		{"one rune of emoji text", "Thanks 👍🏽!", "Thanks 👍🏿!", 1.0 / 10, false},
		{"all new", "abc", "xyz", 1, false},
		{"from empty", "", "hi", 1, false},
		{"rtl, a word added", "שלום", "שלום רב", 3.0 / 7, false},
		{"long, one rune changed", long, strings.Replace(long, "<2>", "<3>", 1), 1.0 / corpus.LongRunes, false},
	} {
		got, approx := Distance(c.a, c.b)
		if math.Abs(got-c.want) > 1e-9 || approx != c.approx {
			t.Errorf("%s: Distance = %v (approx %v), want %v (approx %v)", c.name, got, approx, c.want, c.approx)
		}
	}
}

// Past MaxCells the distance is measured over words, and says so: two
// 3,000-rune texts that differ everywhere are 9M cells.
func TestDistanceApproximatesPastTheCap(t *testing.T) {
	a := strings.Repeat("fish chips ", 300)
	b := strings.Repeat("chips fish ", 300) + strings.Repeat("peas ", 10)
	if n := len([]rune(a)) * len([]rune(b)); n <= MaxCells {
		t.Fatalf("the test texts are %d cells, within the cap", n)
	}
	got, approx := Distance(a, b)
	if !approx || got <= 0 || got > 1 {
		t.Errorf("Distance = %v (approx %v), want an approximation in (0, 1]", got, approx)
	}
}

func TestCompareLanguages(t *testing.T) {
	de := "Guten Tag! Vielen Dank für Ihre Nachricht. Wir melden uns so bald wie möglich bei Ihnen."
	en := "Hello! Yes, fish & chips are on today. Two portions will be ready in twenty minutes."
	for _, c := range []struct {
		name, customer, reply string
		differs               bool
	}{
		{"german customer, english reply", de, en, true},
		{"arabic customer, english reply", corpus.TextNamed("arabic").Body, en, true},
		{"hebrew both", corpus.TextNamed("hebrew").Body, "שלום! כן, יש לנו היום דגים וצ'יפס. שתי מנות יהיו מוכנות בעוד עשרים דקות.", false},
		{"english both", corpus.TextNamed("fish").Body, en, false},
		{"short customer", "hi", de, false},
		{"short reply", de, "Danke!", false},
		{"english among emoji, german reply", corpus.TextNamed("emoji").Body, de, true},
		{"emoji only", "👍🏽 👨‍👩‍👧‍👦 🇵🇹 🇯🇵 🏳️‍🌈 🐟 & 🍟", de, false},
	} {
		if got := CompareLanguages(c.customer, c.reply); got.Differs != c.differs {
			t.Errorf("%s: %+v, want differs %v", c.name, got, c.differs)
		}
	}
	if got := LanguageName("deu"); got != "German" {
		t.Errorf("LanguageName(deu) = %q", got)
	}
}

// TestLanguageOfShortMessages: the short messages customers send are read
// as the language they are in — English ones never as another language
// (whatlanggo read the first as Portuguese, and its drafts were held and
// the model told to answer in Portuguese) — and a greeting is not judged.
func TestLanguageOfShortMessages(t *testing.T) {
	for text, want := range map[string]string{
		"Do you also design logos? Our budget is around 800 EUR.":               "eng",
		"Hi! Could you quote a new website for my bakery?":                      "eng",
		"Buy cheap followers now!!! Visit our site.":                            "eng",
		"Can I book a table for two tonight at eight?":                          "eng",
		"What are your opening hours on public holidays?":                       "eng",
		"Please call me back, my number changed last week.":                     "eng",
		"Thanks, that works for me. See you Monday.":                            "eng",
		"Hello, I would like to cancel my order from yesterday please.":         "eng",
		"Do you deliver to Rotterdam? How long does shipping take?":             "eng",
		"Is the fish & chips still available on Sunday? 🐟":                      "eng",
		"Hallo, können Sie mir ein Angebot für eine neue Webseite schicken?":    "deu",
		"Hola, ¿me pueden enviar un presupuesto para una página web nueva?":     "spa",
		"Bonjour, pouvez-vous m'envoyer un devis pour un nouveau site web ?":    "fra",
		"Olá, vocês podem me enviar um orçamento para um site novo?":            "por",
		"Ciao, potete mandarmi un preventivo per un nuovo sito web?":            "ita",
		"Hoi, kunnen jullie een offerte sturen voor een nieuwe website?":        "nld",
		"שלום, אפשר לקבל הצעת מחיר לאתר חדש?":                                   "heb",
		"مرحبا، هل يمكنكم إرسال عرض سعر لموقع جديد؟":                            "ara",
		"Dzień dobry, czy mogą Państwo przesłać ofertę na nową stronę?":         "pol",
		"Merhaba, yeni bir web sitesi için fiyat teklifi gönderebilir misiniz?": "tur",
	} {
		got, ok := Language(text)
		if !ok || got != want {
			t.Errorf("Language(%q) = %q, %v; want %s", text, got, ok, want)
		}
	}
	for _, text := range []string{"hi", "ok thanks", "👍👍👍", "+1 555 249 0978"} {
		if got, ok := Language(text); ok {
			t.Errorf("Language(%q) = %q; want it not judged (too few letters)", text, got)
		}
	}
	for code, want := range map[string]string{"eng": "English", "por": "Portuguese", "nob": "Norwegian", "xyz": "xyz"} {
		if got := LanguageName(code); got != want {
			t.Errorf("LanguageName(%s) = %q, want %q", code, got, want)
		}
	}
}
