package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
)

func TestParseDrafting(t *testing.T) {
	dir := t.TempDir()
	facts := filepath.Join(dir, "acme.md")
	if err := os.WriteFile(facts, []byte("# Acme\nOpen 9-17.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(dir, "all.txt")
	if err := os.WriteFile(global, []byte("We answer within a day."), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := `
clients:
  - {id: acme, facts_file: ` + facts + `, daily_budget: 2.5}
  - {id: bolt}
channels:
  - {name: web, client: acme, fields: {message_id: /id}}
  - {name: sms, client: bolt, fields: {message_id: /id}}
drafter:
  kind: openai
  base_url: http://127.0.0.1:11434/v1
  model: m
  structured: json_object
  price: {input: 0.15, output: 0.6, currency: EUR}
  daily_budget: 1
  facts_file: ` + global + `
  context_tokens: 500
  channel_prompts: {sms: "Keep it under 300 characters."}
`
	c := mustParse(t, yaml, env(nil))
	d := c.Drafter
	if d.Structured != "json_object" || d.Price != (config.Price{Input: 0.15, Output: 0.6, Currency: "EUR"}) || d.ContextTokens != 500 {
		t.Errorf("drafter = structured %q price %+v context %d", d.Structured, d.Price, d.ContextTokens)
	}
	if path, got := c.FactsFileOf("acme"); got != "# Acme\nOpen 9-17." || path == global {
		t.Errorf("FactsFileOf(acme) = %q %q, want acme's facts", path, got)
	}
	if path, got := c.FactsFileOf("bolt"); got != "We answer within a day." || path != global {
		t.Errorf("FactsFileOf(bolt) = %q %q, want the global facts", path, got)
	}
	if c.BudgetOf("acme") != 2.5 || c.BudgetOf("bolt") != 1 {
		t.Errorf("budgets = %v / %v, want 2.5 / 1", c.BudgetOf("acme"), c.BudgetOf("bolt"))
	}
	if d.ChannelPrompts["sms"] != "Keep it under 300 characters." {
		t.Errorf("channel prompts = %v", d.ChannelPrompts)
	}
	if def := config.Default().Drafter; def.Structured != "json_schema" || def.ContextTokens != 1000 {
		t.Errorf("defaults: structured %q context %d, want json_schema 1000", def.Structured, def.ContextTokens)
	}

	const ch = "channels:\n  - name: web\n    fields: {message_id: /id}\n"
	bad := []struct{ yaml, want string }{
		{ch + "drafter: {structured: xml}\n", `drafter.structured`},
		{ch + "drafter: {price: {input: -1}}\n", `drafter.price.input: must not be negative`},
		{ch + "drafter: {daily_budget: lots}\n", `drafter.daily_budget: "lots" is not a number`},
		{ch + "drafter: {facts_file: " + filepath.Join(dir, "missing.md") + "}\n", `drafter.facts_file: cannot read the facts file`},
		{ch + "drafter: {channel_prompts: {sms: hi}}\n", `drafter.channel_prompts.sms: "sms" is not a channel`},
		{ch + "drafter: {context_tokens: -5}\n", `drafter.context_tokens: must be between 0 and 100000`},
	}
	for _, tt := range bad {
		_, err := config.Parse([]byte(tt.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tt.yaml, err, tt.want)
		}
	}
}
