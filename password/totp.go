package password

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"fmt"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// The second factor is TOTP (RFC 6238) as every authenticator app reads
// it: SHA-1, six digits, 30-second steps, one step of clock skew either
// way. github.com/pquerna/otp makes the secret and the codes.
const (
	totpPeriod = 30
	totpSkew   = 1
	// RecoveryCount recovery codes are made at enrolment, each usable once.
	RecoveryCount = 10
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Skew: totpSkew, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// NewTOTP makes a second-factor secret for account: the base32 secret, and
// the otpauth:// URI an authenticator app reads (typed or as a QR code).
func NewTOTP(issuer, account string) (secret, uri string, err error) {
	k, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: account, Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return "", "", fmt.Errorf("password: make a TOTP secret: %w", err)
	}
	return k.Secret(), k.URL(), nil
}

// CheckTOTP reports whether code is the secret's code for a step near now
// that is newer than last (the step of the last code accepted, 0 for
// none), so a code seen once never works again; step is the one it
// matched, to store as the new last.
func CheckTOTP(secret, code string, now time.Time, last int64) (step int64, ok bool) {
	code = strings.TrimSpace(code)
	if len(code) != 6 {
		return 0, false
	}
	now0 := now.Unix() / totpPeriod
	for d := int64(-totpSkew); d <= totpSkew; d++ {
		s := now0 + d
		if s <= last {
			continue
		}
		want, err := totp.GenerateCodeCustom(secret, time.Unix(s*totpPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return s, true
		}
	}
	return 0, false
}

// TOTPCode is the secret's code at t (for tests and the drill).
func TOTPCode(secret string, t time.Time) (string, error) {
	return totp.GenerateCodeCustom(secret, t, totpOpts)
}

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// RecoveryCodes makes RecoveryCount recovery codes, to show once, and
// their hashes, to store. Each code is 50 random bits ("abcde-fghij"), so
// a plain SHA-256 is enough to keep a copied database from using them.
func RecoveryCodes() (codes []string, hashes [][]byte) {
	for range RecoveryCount {
		b := make([]byte, 7)
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
		s := strings.ToLower(recoveryEncoding.EncodeToString(b))[:10]
		code := s[:5] + "-" + s[5:]
		codes = append(codes, code)
		hashes = append(hashes, recoveryHash(code))
	}
	return codes, hashes
}

// UseRecovery finds code among the stored hashes and returns them without
// it: ok is false when code is none of them.
func UseRecovery(hashes [][]byte, code string) (rest [][]byte, ok bool) {
	h := recoveryHash(code)
	for i, stored := range hashes {
		if subtle.ConstantTimeCompare(stored, h) == 1 {
			rest = append(append([][]byte{}, hashes[:i]...), hashes[i+1:]...)
			return rest, true
		}
	}
	return hashes, false
}

// recoveryHash hashes a code as typed: case, spaces and the dash do not
// matter.
func recoveryHash(code string) []byte {
	norm := strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(code)))
	sum := sha256.Sum256([]byte("handoff-recovery:" + norm))
	return sum[:]
}
