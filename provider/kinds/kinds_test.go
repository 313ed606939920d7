package kinds_test

import (
	"slices"
	"testing"

	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/provider/kinds"
)

// TestPresetsAreTheKinds: every preset a kind names exists in hook, and
// every hook preset named after a provider kind is that kind's own.
func TestPresetsAreTheKinds(t *testing.T) {
	for _, k := range kinds.All() {
		if k.Preset == "" {
			continue
		}
		if _, ok := hook.LookupPreset(k.Preset); !ok {
			t.Errorf("kind %s names preset %q, which hook does not have (it has %v)", k.Name, k.Preset, hook.PresetNames())
		}
	}
	for _, name := range hook.PresetNames() {
		if k, ok := kinds.Lookup(name); ok && k.Preset != name {
			t.Errorf("hook has a preset %q named after the %s kind, whose declaration names preset %q", name, k.Name, k.Preset)
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
