package password

import (
	"errors"
	"strings"
	"unicode"

	"github.com/trustelem/zxcvbn"
)

// Product is the product's name, which no password may be built on.
const Product = "handoff"

// The zxcvbn scores (0 to 4) a new password must reach: an admin holds
// the install (its users, backups, restores and erasures), so theirs must
// be "safely unguessable" (3, about 10^8 guesses and more); an approver's
// "somewhat guarded" (2, about 10^6), which the login's lockout keeps out
// of reach online.
const (
	AdminScore    = 3
	ApproverScore = 2
)

// ErrGuessable is a password zxcvbn finds easy to guess: built on the
// product's, a client's or the person's name, a keyboard walk, a date, a
// dictionary word with small changes.
var ErrGuessable = errors.New("the password is easy to guess (it is built on a name, a keyboard walk, a date or a common word); choose a longer one, such as four unrelated words")

// Rule is what a new password is checked against beyond Valid: the
// score it must reach and the words it must not be built on (zxcvbn's
// user inputs: the product's name, the clients' ids and names, the
// person's name and owner).
type Rule struct {
	MinScore int
	Inputs   []string
}

// RuleFor is the rule for a person of the given role (admin: AdminScore,
// anyone else ApproverScore), with the product's name and words added to
// its inputs; a name of several words is added whole, without its spaces
// and word by word.
func RuleFor(admin bool, words ...string) Rule {
	r := Rule{MinScore: ApproverScore}
	if admin {
		r.MinScore = AdminScore
	}
	seen := map[string]bool{}
	add := func(w string) {
		w = strings.ToLower(strings.TrimSpace(w))
		if len(w) >= 3 && !seen[w] {
			seen[w] = true
			r.Inputs = append(r.Inputs, w)
		}
	}
	add(Product)
	for _, w := range words {
		add(w)
		add(strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				return r
			}
			return -1
		}, w))
		for _, part := range strings.FieldsFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			add(part)
		}
	}
	return r
}

// Check checks a new password against Valid and then the rule's score.
func (r Rule) Check(pw string) error {
	if err := Valid(pw); err != nil {
		return err
	}
	if zxcvbn.PasswordStrength(pw, r.Inputs).Score < r.MinScore {
		return ErrGuessable
	}
	return nil
}

// Hash checks a new password against the rule (Check) and hashes it.
func (r Rule) Hash(pw string) ([]byte, error) {
	if err := r.Check(pw); err != nil {
		return nil, err
	}
	return Hash(pw)
}
