package drafter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// llamaVerdicts is what testdata/llamacpp/grammar.mjs found: node-llama-cpp
// converted schema.json to a GBNF grammar (schema.gbnf), llama.cpp's
// grammar parser parsed it, and its matcher accepted or refused each answer.
type llamaVerdicts struct {
	NodeLlamaCpp         string          `json:"node_llama_cpp"`
	LlamaCpp             string          `json:"llama_cpp"`
	SchemaSHA256         string          `json:"schema_sha256"`
	GrammarParses        bool            `json:"grammar_parses"`
	BrokenGrammarRefused bool            `json:"broken_grammar_refused"`
	Accepts              map[string]bool `json:"accepts"`
}

// TestSchemaLlamaCppGrammarVector holds the schema handoff sends to the
// grammar llama.cpp's parser accepted for it, without node: the committed
// verdicts name the schema's hash, so a schema changed without running
// grammar.mjs again fails here (the test command runs it when node is
// installed, and fails when its output differs from the committed one).
func TestSchemaLlamaCppGrammarVector(t *testing.T) {
	dir := filepath.Join("testdata", "llamacpp")
	raw, err := os.ReadFile(filepath.Join(dir, "verdicts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v llamaVerdicts
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if got := hashBytes(Schema()); v.SchemaSHA256 != got {
		t.Fatalf("testdata/llamacpp was made from a schema with sha256 %s, schema.json is %s: run grammar.mjs again (see its header)", v.SchemaSHA256, got)
	}
	if !v.GrammarParses || !v.BrokenGrammarRefused {
		t.Errorf("llama.cpp's parser: schema grammar parses %v, a broken grammar refused %v; want both", v.GrammarParses, v.BrokenGrammarRefused)
	}
	want := map[string]bool{
		"reply_first": true, "reply_first_non_ascii": true,
		"confidence_first": false, "reply_missing": false, "reply_null": false, "extra_key": false,
	}
	for name, w := range want {
		got, ok := v.Accepts[name]
		if !ok || got != w {
			t.Errorf("llama.cpp's matcher on the %s answer: accepted %v (recorded %v), want %v", name, got, ok, w)
		}
	}
	gbnf, err := os.ReadFile(filepath.Join(dir, "schema.gbnf"))
	if err != nil {
		t.Fatal(err)
	}
	var root string
	for _, line := range strings.Split(string(gbnf), "\n") {
		if strings.HasPrefix(line, "root ::= ") {
			root = line
		}
	}
	if root == "" {
		t.Fatalf("schema.gbnf has no root rule:\n%s", gbnf)
	}
	// The grammar makes the model write the keys in the order the root
	// rule lists them: the schema's order, reply first.
	var keys []string
	for _, m := range regexp.MustCompile(`"\\"([a-z_]+)\\""`).FindAllStringSubmatch(root, -1) {
		keys = append(keys, m[1])
	}
	if got := propertyOrder(t, Schema()); !slices.Equal(keys, got) || keys[0] != "reply" {
		t.Errorf("the grammar's root rule writes the keys %q, want the schema's order %q, reply first", keys, got)
	}
}
