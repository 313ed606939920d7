// Package password holds the rules for people's passwords: how long one may
// be, which are too common (common.go), how it is hashed (bcrypt), and how a
// login compares it; and the second factor (totp.go). It returns plain
// errors, so the dashboard answers them as 400s and the command line prints
// the same sentence.
package password

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// MinLen is the shortest password accepted, in characters.
const MinLen = 12

// MaxLen is the longest password accepted, in bytes: bcrypt reads no further.
const MaxLen = 72

// The errors of Hash are sentences for the person who chose the password.
var (
	ErrTooShort = fmt.Errorf("the password must be at least %d characters", MinLen)
	ErrTooLong  = fmt.Errorf("the password must be at most %d bytes (bcrypt's limit)", MaxLen)
	ErrCommon   = errors.New("the password is a common one (or a common one with digits or symbols added, or a repeated pattern); choose another, such as four unrelated words")
)

// Valid checks a new password against the rules: MinLen characters,
// MaxLen bytes, not a common password.
func Valid(pw string) error {
	if utf8.RuneCountInString(pw) < MinLen {
		return ErrTooShort
	}
	if len(pw) > MaxLen {
		return ErrTooLong
	}
	if Common(pw) {
		return ErrCommon
	}
	return nil
}

// Hash checks a new password (Valid) and hashes it with bcrypt.
func Hash(pw string) ([]byte, error) {
	if err := Valid(pw); err != nil {
		return nil, err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost())
	if err != nil {
		return nil, fmt.Errorf("password: hash: %w", err)
	}
	return h, nil
}

// cost is the bcrypt cost of every hash this process makes: DefaultCost
// (10). A test binary (testing.Testing) hashes at bcrypt.MinCost instead:
// under the race detector one DefaultCost hash takes 0.7 to 2.8 s on two
// cores, and the dashboard's tests make hundreds, which was most of the
// suite's time. The handoff binary never is a test binary; e2e's
// TestStoredHashesCostDefault reads the cost off hashes the real binary
// stored, so this cannot slip into a build.
func cost() int {
	if testing.Testing() {
		return bcrypt.MinCost
	}
	return bcrypt.DefaultCost
}

// Generate returns a random password for a new account: 20 characters of
// URL-safe base64, 120 bits.
func Generate() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Check reports whether pw matches hash. An empty hash (a name that is not a
// user) is compared with a dummy hash and fails, so that a login costs the
// same whether or not the name exists and timing does not tell which do.
func Check(hash []byte, pw string) bool {
	if len(hash) == 0 {
		_ = bcrypt.CompareHashAndPassword(dummy.get(), []byte(pw))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pw)) == nil
}

// dummy is made on first use, not at init: a bcrypt hash takes tens of
// milliseconds, which every command (version, the container's health check)
// used to pay at start although only a login needs it.
var dummy lazyHash

type lazyHash struct {
	once sync.Once
	hash []byte
}

func (l *lazyHash) get() []byte {
	l.once.Do(func() {
		// Only a cost out of range fails, and cost() is in range.
		l.hash, _ = bcrypt.GenerateFromPassword([]byte("handoff-dummy-password"), cost())
	})
	return l.hash
}
