package provider_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/provider/kinds"
)

// TestREADMETableMatchesTheKinds: the README's table of what each provider
// can prove is the kinds' own declarations, row for row.
func TestREADMETableMatchesTheKinds(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "| provider | resend safe? | lookup by our reference? | receipts? | what handoff does with an unknown outcome |"
	text := string(raw)
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("README.md has no table starting %q", head)
	}
	lines := strings.Split(text[i:], "\n")[2:]
	got := map[string]string{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "| `") {
			break
		}
		kind := strings.TrimPrefix(strings.SplitN(l, "`", 3)[1], "")
		got[kind] = l
	}
	for _, d := range provider.Declarations() {
		want := row(d)
		if got[d.Kind] != want {
			t.Errorf("README row for %s:\n got %s\nwant %s", d.Kind, got[d.Kind], want)
		}
		delete(got, d.Kind)
	}
	for k := range got {
		t.Errorf("README lists kind %s, which the binary does not know", k)
	}
}

func row(d provider.Declared) string {
	return "| `" + d.Kind + "` | " + d.ResendSafe + " | " + d.Lookup + " | " + d.Receipts + " | " + d.Unknown + " |"
}

// TestCapabilitiesMatchDeclarations: what a kind declares is what its
// built provider reports.
func TestCapabilitiesMatchDeclarations(t *testing.T) {
	for _, d := range provider.Declarations() {
		if d.ResendSafe == "" || d.Lookup == "" || d.Receipts == "" || d.Unknown == "" {
			t.Errorf("kind %s declares %+v: every column must be filled", d.Kind, d)
		}
		yes := func(s string) bool { return !strings.HasPrefix(s, "no") }
		if d.Kind == "twilio" || d.Kind == "whatsapp" || d.Kind == "telegram" || d.Kind == "slack" {
			if yes(d.ResendSafe) || yes(d.Lookup) {
				t.Errorf("kind %s declares a key or lookup it does not have", d.Kind)
			}
		}
	}
}

// TestEveryDeclaredKindIsBuilt: the kinds config accepts (the
// declarations) are the kinds Open can build, and no other.
func TestEveryDeclaredKindIsBuilt(t *testing.T) {
	want := kinds.Names()
	slices.Sort(want)
	if got := provider.Kinds(); !slices.Equal(got, want) {
		t.Errorf("provider builds %v; provider/kinds declares %v", got, want)
	}
}
