package quality

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The kinds of figure the guard looks for.
const (
	KindURL     = "url"
	KindEmail   = "email"
	KindPhone   = "phone"
	KindDate    = "date"
	KindTime    = "time"
	KindPrice   = "price"
	KindPercent = "percent"
	KindAmount  = "amount" // a number written with decimals or thousands separators
)

// Figure is one figure a draft states.
type Figure struct {
	Kind string
	Text string // as written in the draft
	keys []string
}

// Unsupported are the figures of draft that none of sources (the client's
// facts, the conversation's messages and replies, the contact) holds, in
// the order they appear, each once. A figure is held when any reading of
// it matches any reading of a source's: "1,200.00" and "1200" are one
// amount, "€12" and "12 EUR" one price (and a price is held by the bare
// number in the facts too), "5pm" and "17:00" one time, "12 March" and
// "12/03" one date, "+44 20 7946 0958" and "020 7946 0958" one phone
// number (the shorter ends the longer); a URL or an address is held when a
// source contains it, scheme and "www." aside, in any case. A bare
// integer ("2 people", "#7") is no figure: counts are too common, and too
// often the customer's own, to flag.
func Unsupported(draft string, sources ...string) []Figure {
	held := map[string]bool{}
	var lower strings.Builder
	for _, s := range sources {
		for _, f := range scan(s, true) {
			for _, k := range f.keys {
				held[k] = true
			}
		}
		lower.WriteString(strings.ToLower(s))
		lower.WriteByte('\n')
	}
	text := lower.String()
	var phones []string
	for k := range held {
		if p, ok := strings.CutPrefix(k, "phone:"); ok {
			phones = append(phones, p)
		}
	}
	var out []Figure
	seen := map[string]bool{}
	for _, f := range scan(draft, false) {
		ok := slices.ContainsFunc(f.keys, func(k string) bool { return held[k] })
		switch f.Kind {
		case KindURL, KindEmail:
			ok = strings.Contains(text, bareURL(f.Text))
		case KindPhone:
			ok = slices.ContainsFunc(phones, func(p string) bool { return samePhone(p, f.keys[0][len("phone:"):]) })
		}
		// A figure written in a source as it is in the draft is held,
		// whatever its readings: a source is scanned as a source (bare
		// numbers too), which may cut its text into other figures than
		// the draft's.
		ok = ok || verbatim(text, strings.ToLower(f.Text))
		if !ok && !seen[f.Text] {
			seen[f.Text] = true
			out = append(out, f)
		}
	}
	return out
}

// verbatim says whether fig occurs in text as a whole figure: not inside
// a longer run of letters or digits ("€4" is not in "€45").
func verbatim(text, fig string) bool {
	if fig == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(text[from:], fig)
		if i < 0 {
			return false
		}
		i += from
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		after, _ := utf8.DecodeRuneInString(text[i+len(fig):])
		first, _ := utf8.DecodeRuneInString(fig)
		last, _ := utf8.DecodeLastRuneInString(fig)
		if !(word(first) && i > 0 && word(before)) && !(word(last) && i+len(fig) < len(text) && word(after)) {
			return true
		}
		from = i + 1
	}
}

// word is a letter or a digit: what a figure may not be cut from.
func word(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

var (
	urlRE   = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>"'` + "`" + `]+`)
	emailRE = regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`)
	// Dates: 2026-03-12; 12/03/2026, 12.03.26, 12-03-2026; 12 March
	// (12th of March, 2026); March 12(th, 2026).
	isoDateRE   = regexp.MustCompile(`\b(\d{4})-(\d{1,2})-(\d{1,2})\b`)
	numDateRE   = regexp.MustCompile(`\b(\d{1,2})([./-])(\d{1,2})([./-])(\d{2}|\d{4})\b`)
	months      = `(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)`
	dayMonthRE  = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+` + months + `\b(?:,?\s+\d{4})?`)
	monthDayRE  = regexp.MustCompile(`(?i)\b` + months + `\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+\d{4})?`)
	clockRE     = regexp.MustCompile(`(?i)\b(\d{1,2}):(\d{2})(?:\s*([ap])(?:\.m\.|m\b))?`)
	meridiemRE  = regexp.MustCompile(`(?i)\b(\d{1,2})(?:\.(\d{2}))?\s*([ap])(?:\.m\.|m\b)`)
	hourRE      = regexp.MustCompile(`\b(\d{1,2})h(\d{2})?\b`)
	num         = `\d{1,3}(?:[,.\x{00A0} ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?`
	currencies  = `[€$£¥₹]|\b(?:EUR|USD|GBP|CHF|JPY|INR|AUD|CAD|SEK|NOK|DKK|PLN|CZK|ILS|AED|SAR)\b`
	currencyAft = currencies + `|\b(?:euros?|dollars?|pounds?)\b`
	priceBefore = regexp.MustCompile(`(?i)(` + currencies + `)\s?(` + num + `)(?:,-)?`)
	priceAfter  = regexp.MustCompile(`(?i)\b(` + num + `)\s?(` + currencyAft + `)`)
	percentRE   = regexp.MustCompile(`\b(` + num + `)\s?%`)
	phoneRE     = regexp.MustCompile(`(?:\+|\b)\d[\d\s().\-/]{5,}\d\b`)
	numberRE    = regexp.MustCompile(`\b` + num)
)

// scan finds the figures of s, each with the readings it matches by. A
// source (all) also yields every bare number, as an amount and as a price
// of no currency, so a draft's "€12" is held by facts that say "12".
func scan(s string, all bool) []Figure {
	work := []byte(s)
	type found struct {
		at int
		f  Figure
	}
	var out []found
	take := func(re *regexp.Regexp, kind string, keys func(m []string) []string) {
		for _, ix := range re.FindAllSubmatchIndex(work, -1) {
			m := make([]string, len(ix)/2)
			for i := range m {
				if ix[2*i] >= 0 {
					m[i] = string(work[ix[2*i]:ix[2*i+1]])
				}
			}
			text := s[ix[0]:ix[1]]
			if kind == KindURL {
				text = strings.TrimRight(text, ".,;:!?)]}")
			}
			k := keys(m)
			if k == nil {
				continue
			}
			out = append(out, found{ix[0], Figure{Kind: kind, Text: strings.TrimSpace(text), keys: k}})
			for i := ix[0]; i < ix[0]+len(text); i++ {
				work[i] = ' ' // a figure is read once, as the first kind that takes it
			}
		}
	}
	take(urlRE, KindURL, func([]string) []string { return []string{} })
	take(emailRE, KindEmail, func([]string) []string { return []string{} })
	take(isoDateRE, KindDate, func(m []string) []string { return dateKeys(m[3], m[2], false) })
	take(numDateRE, KindDate, func(m []string) []string {
		if m[2] != m[4] {
			return nil
		}
		return dateKeys(m[1], m[3], true)
	})
	take(dayMonthRE, KindDate, func(m []string) []string { return dateKeys(m[1], monthNumber(m[2]), false) })
	take(monthDayRE, KindDate, func(m []string) []string { return dateKeys(m[2], monthNumber(m[1]), false) })
	take(clockRE, KindTime, func(m []string) []string { return timeKeys(m[1], m[2], m[3]) })
	take(meridiemRE, KindTime, func(m []string) []string { return timeKeys(m[1], m[2], m[3]) })
	take(hourRE, KindTime, func(m []string) []string { return timeKeys(m[1], m[2], "") })
	take(priceBefore, KindPrice, func(m []string) []string { return priceKeys(m[2], m[1], all) })
	take(priceAfter, KindPrice, func(m []string) []string { return priceKeys(m[1], m[2], all) })
	take(percentRE, KindPercent, func(m []string) []string { return numberKeys(m[1]) })
	take(phoneRE, KindPhone, func(m []string) []string {
		d := digits(m[0])
		if len(d) < 7 || len(d) > 15 {
			return nil
		}
		return []string{"phone:" + strings.TrimLeft(d, "0")}
	})
	take(numberRE, KindAmount, func(m []string) []string {
		if !all && !strings.ContainsAny(m[0], ".,  ") {
			return nil // a bare integer
		}
		keys := numberKeys(m[0])
		if all {
			for _, k := range keys {
				keys = append(keys, "price:"+strings.TrimPrefix(k, "num:")+":")
			}
		}
		return append(keys, decimalTimeKeys(m[0])...)
	})
	slices.SortStableFunc(out, func(a, b found) int { return a.at - b.at })
	figs := make([]Figure, len(out))
	for i, f := range out {
		figs[i] = f.f
	}
	return figs
}

// values are the numbers a written number may mean: "1.200" is 1200 or
// 1.2, "1,200.00" 1200, "1.200,50" 1200.5, "12,50" 12.5.
func values(s string) []string {
	s = strings.NewReplacer(" ", "", "\u00a0", "").Replace(s)
	var cands []string
	lastDot, lastComma := strings.LastIndexByte(s, '.'), strings.LastIndexByte(s, ',')
	switch {
	case lastDot < 0 && lastComma < 0:
		cands = []string{s}
	case lastDot >= 0 && lastComma >= 0 && lastDot > lastComma: // 1,200.50
		cands = []string{strings.ReplaceAll(s, ",", "")}
	case lastDot >= 0 && lastComma >= 0: // 1.200,50
		cands = []string{strings.ReplaceAll(strings.ReplaceAll(s, ".", ""), ",", ".")}
	default: // one kind of separator: a decimal point, or thousands
		sep := "."
		if lastComma >= 0 {
			sep = ","
		}
		cands = []string{strings.ReplaceAll(s, sep, "")}
		if strings.Count(s, sep) == 1 {
			cands = append(cands, strings.ReplaceAll(s, sep, "."))
		}
	}
	var out []string
	for _, c := range cands {
		f, err := strconv.ParseFloat(c, 64)
		if err != nil {
			continue
		}
		out = append(out, strconv.FormatFloat(f, 'f', -1, 64))
	}
	return out
}

func numberKeys(s string) []string {
	var out []string
	for _, v := range values(s) {
		out = append(out, "num:"+v)
	}
	return out
}

// currencyOf names a currency symbol or word by its code.
func currencyOf(s string) string {
	switch strings.ToLower(s) {
	case "€", "eur", "euro", "euros":
		return "EUR"
	case "$", "usd", "dollar", "dollars":
		return "USD"
	case "£", "gbp", "pound", "pounds":
		return "GBP"
	case "¥", "jpy":
		return "JPY"
	case "₹", "inr":
		return "INR"
	}
	return strings.ToUpper(s)
}

// priceKeys: a draft's price is held by the same value in the same
// currency, or by the value with no currency in a source (what the
// source's bare numbers yield); a source's price yields its currency's.
func priceKeys(n, cur string, source bool) []string {
	c := currencyOf(cur)
	var out []string
	for _, v := range values(n) {
		out = append(out, "price:"+v+":"+c)
		if source {
			out = append(out, "num:"+v) // a draft's "35.00" is held by a source's "€35"
		} else {
			out = append(out, "price:"+v+":")
		}
	}
	return out
}

func dateKeys(day, month string, either bool) []string {
	d, err1 := strconv.Atoi(day)
	m, err2 := strconv.Atoi(month)
	if err1 != nil || err2 != nil {
		return nil
	}
	var out []string
	if d >= 1 && d <= 31 && m >= 1 && m <= 12 {
		out = append(out, "date:"+strconv.Itoa(m)+"-"+strconv.Itoa(d))
	}
	if either && m >= 1 && m <= 31 && d >= 1 && d <= 12 { // 03/12: the 12th of March too
		out = append(out, "date:"+strconv.Itoa(d)+"-"+strconv.Itoa(m))
	}
	if out == nil {
		return nil
	}
	return out
}

func monthNumber(name string) string {
	for i, m := range []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"} {
		if strings.HasPrefix(strings.ToLower(name), m) {
			return strconv.Itoa(i + 1)
		}
	}
	return ""
}

// timeKeys are the readings of a time: "5pm" is 17:00; "5:00" without a
// meridiem 05:00 or 17:00.
func timeKeys(hour, minute, meridiem string) []string {
	h, err := strconv.Atoi(hour)
	if err != nil || h > 24 {
		return nil
	}
	m := 0
	if minute != "" {
		if m, err = strconv.Atoi(minute); err != nil || m > 59 {
			return nil
		}
	}
	var hours []int
	switch strings.ToLower(meridiem) {
	case "a":
		hours = []int{h % 12}
	case "p":
		hours = []int{h%12 + 12}
	default:
		hours = []int{h % 24}
		if h < 12 {
			hours = append(hours, h+12)
		}
	}
	var out []string
	for _, h := range hours {
		out = append(out, "time:"+strconv.Itoa(h)+":"+strconv.Itoa(m))
	}
	return out
}

// decimalTimeKeys reads "12.30" as a time too, as it is written in Britain.
func decimalTimeKeys(s string) []string {
	h, m, ok := strings.Cut(s, ".")
	if !ok || len(m) != 2 || len(h) > 2 {
		return nil
	}
	return timeKeys(h, m, "")
}

// samePhone says two numbers (digits, leading zeros trimmed) are one: the
// shorter, of at least 7 digits, ends the longer ("+44 20 7946 0958" and
// "020 7946 0958"; "+1 555 0100" and "555 0100").
func samePhone(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	return len(b) >= 6 && strings.HasSuffix(a, b)
}

func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// bareURL is a URL or an address as compared: lower case, without its
// scheme, "www." and a trailing slash.
func bareURL(s string) string {
	s = strings.ToLower(s)
	for _, p := range []string{"https://", "http://", "www."} {
		s = strings.TrimPrefix(s, p)
	}
	return strings.TrimSuffix(s, "/")
}
