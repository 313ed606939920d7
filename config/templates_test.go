package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider/kinds"
)

// TestTemplates: a whatsapp provider's templates are read by name,
// language and parameters, and every mistake is one sentence at its key.
func TestTemplates(t *testing.T) {
	env := func(string) string { return "v" }
	entry := func(templates string) string {
		return `providers: [{name: wa, kind: whatsapp, phone_number_id: "1", token_env: T, templates: ` + templates + `}]`
	}
	cfg, err := config.Parse([]byte(entry(`[{name: follow_up, language: en_US, parameters: ["{name}", "our spring offer"]}, {name: hello, language: de}]`)), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []kinds.Template{
		{Name: "follow_up", Language: "en_US", Parameters: []string{"{name}", "our spring offer"}},
		{Name: "hello", Language: "de"},
	}
	if got := cfg.Providers[0].Templates; !reflect.DeepEqual(got, want) {
		t.Fatalf("templates = %+v, want %+v", got, want)
	}
	if tp, ok := cfg.Providers[0].Template("hello"); !ok || tp.Language != "de" {
		t.Errorf("Template(hello) = %+v, %v", tp, ok)
	}
	for _, tc := range []struct{ file, want string }{
		{entry(`[{name: Follow-Up, language: en_US}]`), `providers[0].templates[0].name: "Follow-Up" is not a WhatsApp template name`},
		{entry(`[{name: a, language: en_US}, {name: a, language: de}]`), `providers[0].templates[1].name: duplicate template name "a"`},
		{entry(`[{name: a, language: english}]`), `providers[0].templates[0].language: "english" is not a template language code`},
		{entry(`[{name: a}]`), `providers[0].templates[0].language: missing; every template needs its language`},
		{entry(`[{language: en}]`), `providers[0].templates[0].name: missing; every template needs its name`},
		{entry(`[{name: a, language: en, parameters: [""]}]`), `providers[0].templates[0].parameters[0]: a template parameter must not be empty`},
		{entry(`[{name: a, language: en, parameters: ["two\nlines"]}]`), `parameters[0]: a template parameter must not hold line breaks`},
		{entry(`[{name: a, language: en, parameters: ["a      b"]}]`), `more than four spaces in a row`},
		{entry(`[{name: a, language: en, parameters: ["{first_name}"]}]`), `{first_name} is not a parameter handoff fills in (use {name}`},
		{entry(`[{name: a, language: en, params: []}]`), `unknown key "params"`},
		{entry(`{name: a}`), `providers[0].templates: must be a list`},
		{`providers: [{name: fb, kind: meta, token_env: T, templates: []}]`, `only a whatsapp provider takes templates`},
	} {
		_, err := config.Parse([]byte(tc.file), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant an error saying %q", tc.file, err, tc.want)
		}
	}
}
