package config_test

import (
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
)

// TestCanary: drafter.canary reads into a candidate of its own version,
// and each mistake stops the start with its key named.
func TestCanary(t *testing.T) {
	c, err := config.Parse([]byte(`
clients:
  - {id: acme, name: Acme}
  - {id: bolt, name: Bolt}
channels:
  - {name: a, client: acme, fields: {message_id: /id}}
  - {name: b, client: bolt, fields: {message_id: /id}}
drafter:
  prompt_version: v1
  canary: {prompt_version: v2, template: "Hello {{.Name}} from B", share: 0.2, clients: [acme]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cn := c.Drafter.Canary
	if cn == nil || cn.PromptVersion != "v2" || cn.Share != 0.2 || !cn.Runs("acme") || cn.Runs("bolt") {
		t.Fatalf("canary = %+v", cn)
	}
	if b := cn.Candidate(c.Drafter); b.PromptVersion != "v2" || b.Template != "Hello {{.Name}} from B" || b.Canary != nil || b.Kind != c.Drafter.Kind {
		t.Errorf("candidate = %+v", b)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"canary: {share: 0.1}", "drafter.canary.prompt_version: missing"},
		{"canary: {prompt_version: v2}", "drafter.canary.share: missing"},
		{"canary: {prompt_version: v1, share: 0.1}", `drafter.canary.prompt_version: "v1" is drafter.prompt_version too`},
		{"canary: {prompt_version: v2, share: 0}", "drafter.canary.share: must be above 0 and at most 1"},
		{"canary: {prompt_version: v2, share: 1.5}", "drafter.canary.share: must be above 0 and at most 1"},
		{"canary: {prompt_version: v2, share: 0.1, clients: [nope]}", `drafter.canary.clients[0]: client "nope" is not defined`},
		{"canary: {prompt_version: v2, share: 0.1, template: \"{{.Nmae}}\"}", "drafter.canary.template: not a valid text/template"},
		{"canary: {prompt_version: v2, share: 0.1, colour: red}", `drafter.canary: unknown key "colour"`},
	} {
		_, err := config.Parse([]byte("drafter:\n  prompt_version: v1\n  "+tt.yaml+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want it to contain %q", tt.yaml, err, tt.want)
		}
	}
}
