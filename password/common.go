package password

import (
	"strings"
	"sync"
	"unicode"

	"github.com/trustelem/zxcvbn/frequency"
)

// Common reports whether pw is one of the 30,000 most common passwords, or
// one of them (four letters or more) with digits or symbols added before
// or after, or a short
// pattern repeated ("abcabcabcabc"), or nothing but digits and symbols, all
// compared in lower case. The list is zxcvbn's (Dropbox, MIT licence, as
// ported to Go by github.com/trustelem/zxcvbn): the most frequent passwords of
// Mark Burnett's 10 million leaked passwords, most frequent first.
func Common(pw string) bool {
	lower := strings.ToLower(pw)
	if repeated(lower) {
		return true
	}
	base := strings.TrimFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) })
	if base == "" {
		return true
	}
	set := common.get()
	_, whole := set[lower]
	// A word of three letters or fewer is no base: "7391a06284b5" is not "a".
	_, trimmed := set[base]
	return whole || trimmed && len(base) > 3
}

// repeated reports whether s is one shorter string written over and over.
func repeated(s string) bool {
	for n := 1; n <= len(s)/2; n++ {
		if len(s)%n == 0 && strings.Repeat(s[:n], len(s)/n) == s {
			return true
		}
	}
	return false
}

// common is built on first use, like the dummy hash: only a new password
// needs it, not every command at start.
var common lazySet

type lazySet struct {
	once sync.Once
	set  map[string]struct{}
}

func (l *lazySet) get() map[string]struct{} {
	l.once.Do(func() {
		words := frequency.FrequencyLists["passwords"]
		l.set = make(map[string]struct{}, len(words))
		for _, w := range words {
			l.set[strings.ToLower(w)] = struct{}{}
		}
	})
	return l.set
}
