package password

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestMain runs after the package's init and before any test: nothing may
// have made the dummy hash yet, or every command would pay for it at start.
func TestMain(m *testing.M) {
	if dummy.hash != nil {
		fmt.Fprintln(os.Stderr, "password: the dummy hash was made at init; make it on first use")
		os.Exit(1)
	}
	if common.set != nil {
		fmt.Fprintln(os.Stderr, "password: the common list was built at init; build it on first use")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// long72 is a 72-byte passphrase.
const long72 = "the quick brown fox jumps over the lazy dog while seven owls watch twice"

func TestHash(t *testing.T) {
	if len(long72) != MaxLen {
		t.Fatalf("long72 has %d bytes, want %d", len(long72), MaxLen)
	}
	tests := []struct {
		name string
		pw   string
		want error // nil: hashed
	}{
		{"empty", "", ErrTooShort},
		{"one short", "ab3-xk9-qw7", ErrTooShort},
		{"shortest", "ab3-xk9-qw7z", nil},
		{"longest", long72, nil},
		{"one too long", long72 + "z", ErrTooLong},
		{"letters, not bytes: 12 two-byte letters", "éàüöñçåøßæœí", nil},
		{"letters, not bytes: 11 two-byte letters", "éàüöñçåøßæœ", ErrTooShort},
		{"bytes for the upper bound: 37 two-byte letters", strings.Repeat("é", 37), ErrTooLong},
		{"common", "password1234", ErrCommon},
		{"common, with case", "Qwertyuiop12", ErrCommon},
		{"common, with symbols around", "!!monkey2024!!", ErrCommon},
		{"a common long one", "1qaz2wsx3edc4rfv", ErrCommon},
		{"repeated", "aaaaaaaaaaaa", ErrCommon},
		{"repeated pattern", "abcabcabcabc", ErrCommon},
		{"only digits", "123456789012", ErrCommon},
		{"a passphrase", "correct horse battery", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Hash(tt.pw)
			if tt.want != nil {
				if !errors.Is(err, tt.want) || h != nil {
					t.Fatalf("Hash = %q, %v; want %v", h, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Hash = %v, want a hash", err)
			}
			// A test binary hashes at MinCost (cost's comment); the real
			// binary's DefaultCost is proven by e2e on a stored hash.
			if cost, err := bcrypt.Cost(h); err != nil || cost != bcrypt.MinCost {
				t.Errorf("cost of the hash in a test binary = %d, %v; want %d", cost, err, bcrypt.MinCost)
			}
			if !Check(h, tt.pw) {
				t.Errorf("Check(Hash(pw), pw) = false, want true")
			}
		})
	}
}

// TestErrorSentences holds what a person sees, on the dashboard and on the
// command line alike.
func TestErrorSentences(t *testing.T) {
	for err, want := range map[error]string{
		ErrTooShort: "the password must be at least 12 characters",
		ErrTooLong:  "the password must be at most 72 bytes (bcrypt's limit)",
	} {
		if err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
	}
}

func TestCheck(t *testing.T) {
	const pw = "correct horse battery"
	h, err := Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		hash []byte
		pw   string
		want bool
	}{
		{"right", h, pw, true},
		{"wrong", h, pw + "!", false},
		{"empty password", h, "", false},
		{"no hash: not a user", nil, pw, false},
		{"no hash, the dummy's own password", nil, "handoff-dummy-password", false},
		{"damaged hash", []byte("$2a$10$short"), pw, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.hash, tt.pw); got != tt.want {
				t.Errorf("Check = %v, want %v", got, tt.want)
			}
		})
	}
	// A name that is not a user must cost a real comparison.
	dh, _ := Hash("violet tractor harbour")
	if got, want := mustCost(t, dummy.get()), mustCost(t, dh); got != want {
		t.Errorf("cost of the dummy hash = %d; want %d like a real one", got, want)
	}
}

func TestGenerate(t *testing.T) {
	a, b := Generate(), Generate()
	if a == b {
		t.Errorf("Generate twice = %q both times", a)
	}
	for _, pw := range []string{a, b} {
		if len(pw) != 20 || strings.Trim(pw, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Errorf("Generate = %q, want 20 URL-safe base64 characters", pw)
		}
		if len(pw) < MinLen || len(pw) > MaxLen {
			t.Errorf("Generate = %q (%d bytes), want a length Hash accepts", pw, len(pw))
		}
	}
}

// TestCommonList: zxcvbn's list, and no false alarm on random text.
func TestCommonList(t *testing.T) {
	if n := len(common.get()); n < 25000 {
		t.Errorf("the common list holds %d passwords, want zxcvbn's 30,000 or so", n)
	}
	for _, pw := range []string{"123456", "password", "dragon", "trustno1"} {
		if !Common(pw) {
			t.Errorf("Common(%q) = false, want true", pw)
		}
	}
	// Random text with a stray short word between digits is not "common".
	for _, pw := range []string{"7391a06284b5", "bench-password-not-secret", "ann-password", "correct horse battery staple"} {
		if Common(pw) {
			t.Errorf("Common(%q) = true, want false", pw)
		}
	}
}

func TestTOTP(t *testing.T) {
	secret, uri, err := NewTOTP("handoff", "ann")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(uri, "otpauth://totp/handoff:ann?") || !strings.Contains(uri, "secret="+secret) {
		t.Errorf("uri %q, want an otpauth URI with the secret", uri)
	}
	now := time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)
	code, err := TOTPCode(secret, now)
	if err != nil {
		t.Fatal(err)
	}
	step, ok := CheckTOTP(secret, code, now, 0)
	if !ok || step != now.Unix()/30 {
		t.Fatalf("CheckTOTP(the code now) = %d, %v; want step %d", step, ok, now.Unix()/30)
	}
	if _, ok := CheckTOTP(secret, code, now, step); ok {
		t.Errorf("the same code after its step was used: accepted, want refused")
	}
	if _, ok := CheckTOTP(secret, code, now.Add(30*time.Second), 0); !ok {
		t.Errorf("a code one step late: refused, want accepted (one step of skew)")
	}
	if _, ok := CheckTOTP(secret, code, now.Add(90*time.Second), 0); ok {
		t.Errorf("a code three steps late: accepted, want refused")
	}
	for _, bad := range []string{"", "12345", "1234567", "abcdef"} {
		if _, ok := CheckTOTP(secret, bad, now, 0); ok {
			t.Errorf("CheckTOTP(%q) accepted", bad)
		}
	}
	if other, _, _ := NewTOTP("handoff", "ann"); other == secret {
		t.Errorf("two secrets are the same")
	}
}

func TestRecoveryCodes(t *testing.T) {
	codes, hashes := RecoveryCodes()
	if len(codes) != RecoveryCount || len(hashes) != RecoveryCount {
		t.Fatalf("%d codes, %d hashes; want %d", len(codes), len(hashes), RecoveryCount)
	}
	seen := map[string]bool{}
	for _, c := range codes {
		if len(c) != 11 || c[5] != '-' || seen[c] {
			t.Errorf("code %q: want a fresh xxxxx-xxxxx", c)
		}
		seen[c] = true
	}
	rest, ok := UseRecovery(hashes, " "+strings.ToUpper(strings.ReplaceAll(codes[2], "-", ""))+" ")
	if !ok || len(rest) != RecoveryCount-1 {
		t.Fatalf("UseRecovery(code 2, typed loosely) = %d left, %v", len(rest), ok)
	}
	if _, ok := UseRecovery(rest, codes[2]); ok {
		t.Errorf("a used code worked again")
	}
	if len(hashes) != RecoveryCount {
		t.Errorf("UseRecovery changed the slice it was given")
	}
	if _, ok := UseRecovery(hashes, "aaaaa-bbbbb"); ok {
		t.Errorf("a made-up code worked")
	}
}

func mustCost(t *testing.T, h []byte) int {
	t.Helper()
	c, err := bcrypt.Cost(h)
	if err != nil {
		t.Fatalf("bcrypt.Cost(%q): %v", h, err)
	}
	return c
}
