package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestDefaultTemplateReadsNaturally: the default template drafter's reply
// greets the customer by name (or "there") and never puts the lead's owner
// — a routing team's name such as "sales" — where a person's name goes.
func TestDefaultTemplateReadsNaturally(t *testing.T) {
	tpl, err := drafter.NewTemplate(config.Default().Drafter.Template, "v1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, owner, want string }{
		{"Ada Lovelace", "sales", "Hi Ada Lovelace, thanks for your message. We will get back to you shortly."},
		{"", "billing", "Hi there, thanks for your message. We will get back to you shortly."},
		{"Zoë 🌸", "", "Hi Zoë 🌸, thanks for your message. We will get back to you shortly."},
	} {
		for _, text := range corpus.Texts() {
			out, err := tpl.Draft(context.Background(), drafter.Input{Channel: "demo", Name: tc.name, Owner: tc.owner, Text: text.Body})
			if err != nil {
				t.Fatal(err)
			}
			if out.Text != tc.want {
				t.Errorf("%s / %q / owner %q: reply %q; want %q", text.Name, tc.name, tc.owner, out.Text, tc.want)
			}
			if tc.owner != "" && strings.Contains(out.Text, tc.owner) {
				t.Errorf("the reply names the owner %q: %q", tc.owner, out.Text)
			}
		}
	}
}
