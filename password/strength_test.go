package password

import (
	"errors"
	"strings"
	"testing"
)

// TestRuleRefusesNamesAndWalks: an admin's password built on the
// product's, a client's or the person's name, or a keyboard walk, is
// refused; a passphrase passes; an approver's rule is the lower score.
func TestRuleRefusesNamesAndWalks(t *testing.T) {
	admin := RuleFor(true, "rosalind", "Acme Ltd")
	for _, pw := range []string{"handoff12345", "acmeltd2026!", "qwertyuiopas", "rosalind2026!"} {
		if err := admin.Check(pw); !errors.Is(err, ErrGuessable) && !errors.Is(err, ErrCommon) {
			t.Errorf("admin password %q: %v, want it refused", pw, err)
		}
	}
	for _, pw := range []string{"violet tractor harbour", "correct horse battery staple"} {
		if err := admin.Check(pw); err != nil {
			t.Errorf("admin password %q: %v, want it taken", pw, err)
		}
	}
	approver := RuleFor(false, "rosalind", "Acme Ltd")
	if approver.MinScore != ApproverScore || admin.MinScore != AdminScore {
		t.Errorf("scores %d and %d", approver.MinScore, admin.MinScore)
	}
	if err := approver.Check("qwertyuiopas"); err == nil {
		t.Error("an approver's keyboard walk was taken")
	}
	if err := approver.Check(Generate()); err != nil {
		t.Errorf("a generated password: %v", err)
	}
}

// TestSealer: a sealed secret holds no plain text, opens with the same key
// for the same person only, and a plain secret reads as it is; without a
// key a sealed one is ErrNoKey.
func TestSealer(t *testing.T) {
	s, err := NewSealer(strings.Repeat("k", MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSealer("short"); err == nil {
		t.Error("a short key was taken")
	}
	const secret = "JBSWY3DPEHPK3PXP"
	sealed := s.Seal(secret, "ann")
	if !Sealed(sealed) || strings.Contains(sealed, secret) {
		t.Fatalf("sealed %q", sealed)
	}
	if got, err := s.Open(sealed, "ann"); err != nil || got != secret {
		t.Errorf("open: %q %v", got, err)
	}
	if _, err := s.Open(sealed, "bob"); err == nil {
		t.Error("ann's sealed secret opened for bob")
	}
	other, _ := NewSealer(strings.Repeat("o", MinKeyLen))
	if _, err := other.Open(sealed, "ann"); err == nil {
		t.Error("another key opened it")
	}
	if got, err := s.Open(secret, "ann"); err != nil || got != secret {
		t.Errorf("a plain secret: %q %v", got, err)
	}
	var none *Sealer
	if _, err := none.Open(sealed, "ann"); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v, want ErrNoKey", err)
	}
	if none.Seal(secret, "ann") != secret {
		t.Error("no key sealed anyway")
	}
}
