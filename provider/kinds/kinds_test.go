package kinds_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/provider/kinds"
)

// TestPresetsAreTheKinds: every preset a kind names exists in hook, and
// every hook preset named after a provider kind is that kind's own.
func TestPresetsAreTheKinds(t *testing.T) {
	for _, k := range kinds.All() {
		if k.Preset != "" && len(k.Presets) > 0 {
			t.Errorf("kind %s names both Preset %q and Presets %v: one or the other", k.Name, k.Preset, k.Presets)
		}
		for _, p := range k.PresetNames() {
			if _, ok := hook.LookupPreset(p); !ok {
				t.Errorf("kind %s names preset %q, which hook does not have (it has %v)", k.Name, p, hook.PresetNames())
			}
		}
	}
	for _, name := range hook.PresetNames() {
		if k, ok := kinds.Lookup(name); ok && !slices.Contains(k.PresetNames(), name) {
			t.Errorf("hook has a preset %q named after the %s kind, whose declaration names presets %v", name, k.Name, k.PresetNames())
		}
	}
	if got := kinds.Meta.PresetNames(); !slices.Equal(got, []string{"messenger", "instagram"}) {
		t.Errorf("the meta kind reads presets %v, want messenger and instagram", got)
	}
}

// TestTextLength counts as Twilio counts a Body: UTF-16 code units.
func TestTextLength(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0}, {"hello", 5}, {"Jürgen", 6}, {"你好", 2}, {"ok 👍", 5}, {strings.Repeat("a", 1600), 1600},
	} {
		if got := kinds.TextLength(tc.text); got != tc.want {
			t.Errorf("TextLength(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

// TestDeclarationsAreWhole: every kind fills its row, names each key once
// and none of the common ones, and a key marked Only is no other kind's.
func TestDeclarationsAreWhole(t *testing.T) {
	only := map[string]string{}
	seen := map[string]bool{}
	for _, k := range kinds.All() {
		if k.Name == "" || seen[k.Name] {
			t.Errorf("kind %q is unnamed or declared twice", k.Name)
		}
		seen[k.Name] = true
		if got, ok := kinds.Lookup(k.Name); !ok || got.Name != k.Name {
			t.Errorf("Lookup(%q) = %q, %v", k.Name, got.Name, ok)
		}
		if r := k.Row; r.ResendSafe == "" || r.Lookup == "" || r.Receipts == "" || r.Unknown == "" {
			t.Errorf("kind %s declares row %+v: every column must be filled", k.Name, r)
		}
		keys := map[string]bool{}
		for _, key := range k.Keys {
			if keys[key.Name] || slices.Contains(kinds.Common, key.Name) {
				t.Errorf("kind %s declares key %s twice or as its own though every provider has it", k.Name, key.Name)
			}
			keys[key.Name] = true
			if key.Only != "" {
				only[key.Name] = k.Name
			}
		}
	}
	for _, k := range kinds.All() {
		for _, key := range k.Keys {
			if owner, ok := only[key.Name]; ok && owner != k.Name {
				t.Errorf("kind %s takes %s, which only %s may take", k.Name, key.Name, owner)
			}
		}
	}
	if _, ok := kinds.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a kind`)
	}
}

// TestREADMEKeyTableIsDeclared: every key the README's provider key table
// gives a kind is one that kind declares (or one every provider has).
func TestREADMEKeyTableIsDeclared(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "| key | kinds | meaning |"
	text := string(raw)
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("README.md has no table starting %q", head)
	}
	rows := 0
	for _, l := range strings.Split(text[i:], "\n")[2:] {
		if !strings.HasPrefix(l, "| `") {
			break
		}
		cells := strings.Split(l, " | ")
		if len(cells) < 3 {
			t.Fatalf("README key row %q has no kinds column", l)
		}
		rows++
		var keys []string
		for j, part := range strings.Split(cells[0], "`") {
			if j%2 == 1 {
				keys = append(keys, part)
			}
		}
		for _, name := range strings.Split(cells[1], ", ") {
			for _, key := range keys {
				if name == "all" {
					if !slices.Contains(kinds.Common, key) {
						t.Errorf("README gives every provider %s, which is not a common key", key)
					}
					continue
				}
				k, ok := kinds.Lookup(name)
				if !ok {
					t.Errorf("README's key table names kind %q, which is not declared", name)
					continue
				}
				if _, takes := k.Key(key); !takes {
					t.Errorf("README gives kind %s the key %s, which its declaration does not take", name, key)
				}
			}
		}
	}
	if rows == 0 {
		t.Error("README's key table has no rows")
	}
}

// TestMaxTextIsTheProvidersDocumentedLimit: each kind's longest text is
// the one its provider's API reference gives (a reply past it is refused
// at approval, so a wrong figure either sends what the provider refuses or
// refuses what it takes); a kind whose provider documents none has none.
func TestMaxTextIsTheProvidersDocumentedLimit(t *testing.T) {
	documented := map[string]int{
		"twilio":   1600, // Messages resource, Body (error 21617 beyond it)
		"meta":     2000, // Send API, message.text
		"whatsapp": 4096, // Cloud API, text.body
		"telegram": 4096, // Bot API sendMessage, text after entities parsing
	}
	for _, k := range kinds.All() {
		if k.MaxText != documented[k.Name] {
			t.Errorf("kind %s declares MaxText %d; its provider documents %d", k.Name, k.MaxText, documented[k.Name])
		}
	}
}
