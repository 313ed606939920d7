package drafter

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// openAIStrictMeta is OpenAI's published strict-mode rules as a meta-schema
// (with llama.cpp's anchored patterns and vLLM xgrammar's pattern-or-length).
//
//go:embed testdata/openai-strict.schema.json
var openAIStrictMeta []byte

// oldSchema is the schema handoff sent before: the one real servers refused
// ('minLength' is not permitted; "Pattern must start with '^' and end with
// '$'"). Every oracle below must refuse it, or it is not checking anything.
const oldSchema = `{"type":"object","additionalProperties":false,"required":["reply","intent","name","email","phone","summary","confidence"],"properties":{
"reply":{"type":"string","minLength":1,"pattern":"\\S","maxLength":4000},
"intent":{"type":"string","pattern":"^[a-z][a-z_-]{0,31}$"},
"name":{"type":"string","maxLength":200},
"email":{"type":"string","maxLength":254,"pattern":"^$|^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$"},
"phone":{"type":"string","maxLength":32,"pattern":"^$|^\\+?[0-9 ().-]{7,31}$"},
"summary":{"type":"string","maxLength":500},
"confidence":{"type":"number","minimum":0,"maximum":1}}}`

func compileStrictMeta() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAIStrictMeta))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openai-strict.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("openai-strict.json")
}

// strictSchemaErrors is what a server enforcing the strict rules says of
// schema: the meta-schema's verdict, and every object's properties listed
// under required (which JSON Schema cannot say of itself).
func strictSchemaErrors(schema map[string]any, path string) []string {
	meta, err := compileStrictMeta()
	if err != nil {
		return []string{"meta-schema: " + err.Error()}
	}
	raw, _ := json.Marshal(schema)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	if err := meta.Validate(doc); err != nil {
		errs = append(errs, err.Error())
	}
	var walk func(n map[string]any, at string)
	walk = func(n map[string]any, at string) {
		props, _ := n["properties"].(map[string]any)
		req, _ := n["required"].([]any)
		for k, v := range props {
			if !slices.Contains(req, any(k)) {
				errs = append(errs, "In context="+at+", 'required' is required to be supplied and to be an array including every key in properties. Missing '"+k+"'.")
			}
			if sub, ok := v.(map[string]any); ok {
				walk(sub, at+".properties."+k)
			}
		}
	}
	walk(schema, path)
	return errs
}

func schemaDoc(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSchemaOpenAIStrictRules checks the schema sent against OpenAI's
// published strict rules (testdata/openai-strict.schema.json), and that the
// check refuses the schema that real servers refused.
func TestSchemaOpenAIStrictRules(t *testing.T) {
	if errs := strictSchemaErrors(schemaDoc(t, Schema()), "schema"); len(errs) > 0 {
		t.Errorf("the schema handoff sends breaks OpenAI's strict rules: %v", errs)
	}
	errs := strictSchemaErrors(schemaDoc(t, []byte(oldSchema)), "schema")
	if len(errs) == 0 || !strings.Contains(strings.Join(errs, " "), "not") {
		t.Errorf("the old schema (minLength, unanchored pattern) passed the strict check: %v", errs)
	}
	missing := schemaDoc(t, Schema())
	missing["required"] = []any{"reply"}
	if errs := strictSchemaErrors(missing, "schema"); len(errs) == 0 {
		t.Errorf("a schema with optional keys left out of required passed the strict check")
	}
}

// TestSchemaLlamaCppGrammar runs llama.cpp's own converter
// (examples/json_schema_to_grammar.py, the one Ollama and the llama.cpp
// server use) on the schema handoff sends. The converter is not a package
// that installs from the registries this project reaches, so the test runs
// when HANDOFF_LLAMA_SCHEMA_TO_GRAMMAR names a copy of the script.
func TestSchemaLlamaCppGrammar(t *testing.T) {
	script := os.Getenv("HANDOFF_LLAMA_SCHEMA_TO_GRAMMAR")
	if script == "" {
		t.Skip("HANDOFF_LLAMA_SCHEMA_TO_GRAMMAR is not set: llama.cpp's json_schema_to_grammar.py is not installed here")
	}
	convert := func(schema []byte) (string, error) {
		p := filepath.Join(t.TempDir(), "schema.json")
		if err := os.WriteFile(p, schema, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("python3", script, p).CombinedOutput()
		return string(out), err
	}
	out, err := convert(Schema())
	if err != nil {
		t.Fatalf("llama.cpp refused the schema handoff sends: %v\n%s", err, out)
	}
	if !strings.Contains(out, "root ::=") || !strings.Contains(out, `reply-kv ::= "\"reply\""`) {
		t.Errorf("grammar lacks the root or the reply rule:\n%s", out)
	}
	if out, err := convert([]byte(oldSchema)); err == nil || !strings.Contains(out, `Pattern must start with "^" and end with "$"`) {
		t.Errorf("llama.cpp's converter accepted the old unanchored pattern (err %v):\n%s", err, out)
	}
}

// TestOpenAIRealAnswers: the answers real servers give end in a kept
// reply, a clear refusal, or a retry, each after exactly one model call.
func TestOpenAIRealAnswers(t *testing.T) {
	tests := []struct {
		mode       string
		wantText   string
		wantFields map[string]string
		wantNotes  []string
		check      func(t *testing.T, err error)
	}{
		{mode: fmFenced, wantText: "fenced draft #1", wantFields: map[string]string{"intent": "sales", "name": "Ada", "summary": "s", "confidence": "0.5"}},
		{mode: fmMissingOpt, wantText: "bare draft #1", wantFields: map[string]string{}},
		{mode: fmBadIntent, wantText: "labelled draft #1",
			wantFields: map[string]string{"name": "Ada", "summary": "s", "confidence": "0.8"},
			wantNotes:  []string{`intent dropped: "Support Request" is not one lowercase word`, `email dropped: "ada at example" is not an email address`}},
		{mode: fmStrict, wantText: "strict draft #1", wantFields: map[string]string{"intent": "support", "summary": "s", "confidence": "0.9"}},
		{mode: fmBadConfidence, wantText: "draft #1", wantFields: map[string]string{"intent": "sales", "summary": "s"},
			wantNotes: []string{"confidence dropped: 7 is not between 0 and 1"}},
		{mode: fmExtraKey, wantText: "draft #1", wantFields: map[string]string{"intent": "sales", "summary": "s", "confidence": "0.5"},
			wantNotes: []string{"price ignored: not a key of the answer"}},
		{mode: fmRefusal, check: func(t *testing.T, err error) {
			var r *Refused
			if !errors.As(err, &r) || r.Text != "I'm sorry, I can't help with that request." {
				t.Fatalf("err = %v, want *Refused with the model's words", err)
			}
			if !strings.Contains(err.Error(), "the model refused to draft a reply: I'm sorry") {
				t.Errorf("error %q does not say the model refused, with its words", err)
			}
		}},
		{mode: fmNullContent, check: func(t *testing.T, err error) {
			// No refusal text: an empty answer, retried, not a refusal.
			var inv *InvalidOutput
			var r *Refused
			if !errors.As(err, &inv) || errors.As(err, &r) {
				t.Fatalf("err = %v, want *InvalidOutput (an empty answer the queue retries), not *Refused", err)
			}
			if !strings.Contains(inv.Raw, `"content":null`) || !strings.Contains(err.Error(), "empty") {
				t.Errorf("InvalidOutput = %q (raw %q), want the whole answer kept and the error saying it is empty", err, inv.Raw)
			}
		}},
		{mode: fmRetryAfter, check: func(t *testing.T, err error) {
			var rl *RateLimited
			if !errors.As(err, &rl) || rl.After != 7*time.Second {
				t.Fatalf("err = %v, want *RateLimited after 7s", err)
			}
		}},
		{mode: fmCut, check: func(t *testing.T, err error) {
			var inv *InvalidOutput
			var perm *PermanentError
			var r *Refused
			if err == nil || errors.As(err, &inv) || errors.As(err, &perm) || errors.As(err, &r) {
				t.Fatalf("err = %v, want a plain error the queue retries", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFakeModel(t, tt.mode)
			o := newTestOpenAI(t, f, 5*time.Second)
			out, err := o.Draft(context.Background(), oaInput())
			if n := len(f.Calls()); n != 1 {
				t.Errorf("model called %d times, want exactly 1", n)
			}
			if tt.check != nil {
				tt.check(t, err)
				return
			}
			if err != nil {
				t.Fatalf("Draft: %v", err)
			}
			if out.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", out.Text, tt.wantText)
			}
			if len(out.Fields) != len(tt.wantFields) {
				t.Errorf("Fields = %v, want %v", out.Fields, tt.wantFields)
			}
			for k, v := range tt.wantFields {
				if out.Fields[k] != v {
					t.Errorf("Fields[%s] = %q, want %q", k, out.Fields[k], v)
				}
			}
			if !slices.Equal(out.Notes, tt.wantNotes) {
				t.Errorf("Notes = %q, want %q", out.Notes, tt.wantNotes)
			}
		})
	}
}

// TestOpenAIStructuredModes: what each drafter.structured sends, and a
// plain-text answer where structure was not asked for.
func TestOpenAIStructuredModes(t *testing.T) {
	tests := []struct {
		structured, mode, wantFormat string
		wantErr                      bool
		wantNote                     bool
	}{
		{structured: StructuredSchema, mode: fmProse, wantFormat: "json_schema", wantErr: true},
		{structured: StructuredObject, mode: fmMissingOpt, wantFormat: "json_object"},
		{structured: StructuredNone, mode: fmProse, wantFormat: "", wantNote: true},
		{structured: StructuredNone, mode: fmFenced, wantFormat: ""},
	}
	for _, tt := range tests {
		t.Run(tt.structured+"/"+tt.mode, func(t *testing.T) {
			f := newFakeModel(t, tt.mode)
			o, err := NewOpenAI(OpenAIConfig{BaseURL: f.URL, Model: "m", Structured: tt.structured, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			in := oaInput()
			in.Text = "Hi, invoice please, ada@example.com"
			out, err := o.Draft(context.Background(), in)
			if got := f.Calls()[0].Req.ResponseFormat.Type; got != tt.wantFormat {
				t.Errorf("response_format.type = %q, want %q", got, tt.wantFormat)
			}
			if tt.wantErr {
				var inv *InvalidOutput
				if !errors.As(err, &inv) {
					t.Fatalf("err = %v, want *InvalidOutput (structure was asked for)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Draft: %v", err)
			}
			if out.Structured != tt.structured {
				t.Errorf("Structured = %q, want %q", out.Structured, tt.structured)
			}
			if tt.wantNote {
				if !strings.HasPrefix(out.Text, "Hi Ada, thanks for writing") || out.Fields["email"] != "ada@example.com" {
					t.Errorf("plain answer: Text %q, Fields %v; want the whole answer and the customer's email", out.Text, out.Fields)
				}
				if len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "plain text") {
					t.Errorf("Notes = %q, want one saying the answer was plain text", out.Notes)
				}
			}
		})
	}
	if _, err := NewOpenAI(OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Structured: "xml"}); err == nil {
		t.Errorf("NewOpenAI accepted structured: xml")
	}
}

// TestOpenAICostFactsAndPrompts: the cost is the price times the tokens
// the server reported; a channel's prompt and its client's facts are what
// the model is told, and their hashes say so.
func TestOpenAICostFactsAndPrompts(t *testing.T) {
	f := newFakeModel(t, fmOK)
	o, err := NewOpenAI(OpenAIConfig{
		BaseURL: f.URL, Model: "m", PromptVersion: "p2", Timeout: 5 * time.Second,
		SystemPrompt:   "Default prompt.",
		ChannelPrompts: map[string]string{"sms": "SMS prompt: keep it under 300 characters."},
		Price:          Price{Input: 2.5, Output: 10, Currency: "USD"},
	})
	if err != nil {
		t.Fatal(err)
	}
	webIn := oaInput()
	webIn.Facts = &Facts{Version: 3, Entries: []Fact{{ID: "F1", Text: "Open 9-17 Monday to Friday."}, {ID: "F4", Text: "A site audit costs 400 EUR."}}}
	web, err := o.Draft(context.Background(), webIn)
	if err != nil {
		t.Fatal(err)
	}
	// 11 prompt and 7 output tokens (the fake's usage).
	if want := (11*2.5 + 7*10) / 1e6; math.Abs(web.Cost-want) > 1e-12 || web.Currency != "USD" {
		t.Errorf("cost = %v %s, want %v USD", web.Cost, web.Currency, want)
	}
	sys := f.Calls()[0].Req.Messages[0].Text()
	if !strings.HasPrefix(sys, "Default prompt.") || !strings.Contains(sys, "\n[F1] Open 9-17 Monday to Friday.\n[F4] A site audit costs 400 EUR.") || !strings.Contains(sys, "such as [F2]") {
		t.Errorf("web system prompt = %q, want the default prompt, the facts with their ids and the ask to cite them", sys)
	}
	if web.FactsHash == "" || web.PromptHash == "" || web.FactsVersion != 3 {
		t.Errorf("hashes = %q / %q, facts version %d: want both hashes and version 3", web.PromptHash, web.FactsHash, web.FactsVersion)
	}
	in := oaInput()
	in.Channel = "sms"
	sms, err := o.Draft(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	sys = f.Calls()[1].Req.Messages[0].Text()
	if !strings.HasPrefix(sys, "SMS prompt") || strings.Contains(sys, "400 EUR") {
		t.Errorf("sms system prompt = %q, want its own prompt and no web facts", sys)
	}
	if sms.PromptHash == web.PromptHash || sms.FactsHash != "" || sms.FactsVersion != 0 {
		t.Errorf("sms hashes = %q / %q, web %q: want a different prompt hash and no facts hash", sms.PromptHash, sms.FactsHash, web.PromptHash)
	}
}
