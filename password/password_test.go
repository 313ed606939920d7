package password

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestMain runs after the package's init and before any test: nothing may
// have made the dummy hash yet, or every command would pay for it at start.
func TestMain(m *testing.M) {
	if dummy.hash != nil {
		fmt.Fprintln(os.Stderr, "password: the dummy hash was made at init; make it on first use")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestHash(t *testing.T) {
	tests := []struct {
		name string
		pw   string
		want error // nil: hashed
	}{
		{"empty", "", ErrTooShort},
		{"one short", strings.Repeat("a", MinLen-1), ErrTooShort},
		{"shortest", strings.Repeat("a", MinLen), nil},
		{"longest", strings.Repeat("a", MaxLen), nil},
		{"one too long", strings.Repeat("a", MaxLen+1), ErrTooLong},
		{"bytes, not letters: 5 two-byte letters", strings.Repeat("é", 5), nil},
		{"bytes, not letters: 37 two-byte letters", strings.Repeat("é", 37), ErrTooLong},
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
			if cost, err := bcrypt.Cost(h); err != nil || cost != bcrypt.DefaultCost {
				t.Errorf("cost of the hash = %d, %v; want %d", cost, err, bcrypt.DefaultCost)
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
		ErrTooShort: "the password must be at least 10 characters",
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
	if cost, err := bcrypt.Cost(dummy.get()); err != nil || cost != bcrypt.DefaultCost {
		t.Errorf("cost of the dummy hash = %d, %v; want %d like a real one", cost, err, bcrypt.DefaultCost)
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
