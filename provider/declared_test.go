package provider_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
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
// built provider reports. Each kind is built from the smallest entry config
// takes for it; a column that starts "no" is false, "yes" true, and
// "with `key`" false without the key and true with it.
func TestCapabilitiesMatchDeclarations(t *testing.T) {
	minimal := map[string]string{
		"http":     `url: "https://crm.example/in"`,
		"sandbox":  ``,
		"twilio":   `account_sid: AC0123456789abcdef0123456789abcdef, auth_token_env: T, from: "+15550001111"`,
		"whatsapp": `phone_number_id: "1234567890", token_env: T`,
		"meta":     `token_env: T`,
		"telegram": `token_env: T`,
		"slack":    `token_env: T`,
		"smtp":     `host: mail.example, from: "hello@agency.example"`,
	}
	// values for the keys a "with `key`" column names
	values := map[string]string{"lookup_url": `"https://crm.example/m?ref={ref}"`}
	build := func(kind, keys string) provider.Capabilities {
		t.Helper()
		entry := "name: p, kind: " + kind
		if keys != "" {
			entry += ", " + keys
		}
		cfg, err := config.Parse([]byte("providers: [{"+entry+"}]"), func(string) string { return "v" })
		if err != nil {
			t.Fatalf("kind %s: %v", kind, err)
		}
		ps, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: noSandbox{}})
		if err != nil {
			t.Fatalf("kind %s: Open: %v", kind, err)
		}
		return ps["p"].Capabilities()
	}
	for _, d := range provider.Declarations() {
		keys, ok := minimal[d.Kind]
		if !ok {
			t.Errorf("kind %s has no minimal entry in this test: add one", d.Kind)
			continue
		}
		caps := build(d.Kind, keys)
		for _, col := range []struct {
			name, text string
			got        func(provider.Capabilities) bool
		}{
			{"resend safe", d.ResendSafe, func(c provider.Capabilities) bool { return c.IdempotencyKey }},
			{"lookup", d.Lookup, func(c provider.Capabilities) bool { return c.Lookup }},
			{"receipts", d.Receipts, func(c provider.Capabilities) bool { return c.Receipts }},
		} {
			if col.text == "" || d.Unknown == "" {
				t.Errorf("kind %s declares %+v: every column must be filled", d.Kind, d)
			}
			key, with := strings.CutPrefix(col.text, "with `")
			if with {
				key, _, _ = strings.Cut(key, "`")
				if !strings.Contains(key, ":") {
					key += ": " + values[key]
				}
			}
			if want := !strings.HasPrefix(col.text, "no") && !with; col.got(caps) != want {
				t.Errorf("kind %s: %s is %v, but its column says %q", d.Kind, col.name, col.got(caps), col.text)
			}
			if with {
				if c := build(d.Kind, strings.TrimPrefix(keys+", "+key, ", ")); !col.got(c) {
					t.Errorf("kind %s with %s: %s is false, but its column says %q", d.Kind, key, col.name, col.text)
				}
			}
		}
	}
}

// noSandbox stands in for the store; these tests never send to the sandbox.
type noSandbox struct{ provider.SandboxStore }

// TestEveryDeclaredKindIsBuilt: the kinds config accepts (the
// declarations) are the kinds Open can build, and no other.
func TestEveryDeclaredKindIsBuilt(t *testing.T) {
	want := kinds.Names()
	slices.Sort(want)
	if got := provider.Kinds(); !slices.Equal(got, want) {
		t.Errorf("provider builds %v; provider/kinds declares %v", got, want)
	}
}
