package config

import "testing"

// TestProviderByName: Provider finds a listed provider by its name, as
// the file holds it; a name not listed is not found.
func TestProviderByName(t *testing.T) {
	c := &Config{Providers: []Provider{{Name: "sms", Kind: "twilio"}, {Name: "mail", Kind: "smtp"}}}
	for _, tc := range []struct {
		name, kind string
		found      bool
	}{
		{"sms", "twilio", true},
		{"mail", "smtp", true},
		{"sandbox", "", false},
		{"", "", false},
	} {
		p, ok := c.Provider(tc.name)
		if ok != tc.found || (ok && (p.Name != tc.name || p.Kind != tc.kind)) {
			t.Errorf("Provider(%q) = %+v, %v; want kind %q, found %v", tc.name, p, ok, tc.kind, tc.found)
		}
	}
	if p, _ := c.Provider("mail"); p != &c.Providers[1] {
		t.Error("Provider returns a copy, not the config's own entry")
	}
}
