package drafter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// answerJSON is a whole answer, pretty-printed as models write it, with a
// non-ASCII reply.
const answerJSON = `{
  "reply": "Grüße, Jürgen — we can do Friday at 10 👋",
  "intent": "sales",
  "name": "Jürgen Müller",
  "email": null,
  "phone": null,
  "summary": "wants a Friday slot",
  "confidence": 0.8
}`

const wantReply = "Grüße, Jürgen — we can do Friday at 10 👋"

// TestParseAnswerFenceAnywhere: the first fenced JSON object is the answer
// wherever the fence stands — a line before it, a line after it, CRLF, an
// upper-case tag, no tag, a fence of something else first, a fence the
// model never closed.
func TestParseAnswerFenceAnywhere(t *testing.T) {
	compact := new(bytes.Buffer)
	if err := json.Compact(compact, []byte(answerJSON)); err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"bare":              answerJSON,
		"fence alone":       "```json\n" + answerJSON + "\n```",
		"line before":       "Here is the JSON you asked for:\n```json\n" + answerJSON + "\n```",
		"line after":        "```json\n" + answerJSON + "\n```\nLet me know if you need anything else.",
		"lines both sides":  "Sure!\n\n```json\n" + answerJSON + "\n```\n\nHope this helps.",
		"crlf":              strings.ReplaceAll("Sure:\n```json\n"+answerJSON+"\n```\nBye", "\n", "\r\n"),
		"upper-case tag":    "```JSON\n" + compact.String() + "\n```",
		"no tag":            "Answer:\n```\n" + compact.String() + "\n```",
		"close on the line": "```json\n" + compact.String() + "```",
		"code fence first":  "First the code:\n```python\nprint('hi')\n```\nThen the answer:\n```json\n" + answerJSON + "\n```",
		"never closed":      "Here it is:\n```json\n" + answerJSON,
		"tag and spaces":    "```json  \n" + answerJSON + "\n```  ",
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := parseAnswer(raw)
			if err != nil {
				t.Fatalf("parseAnswer(%q): %v", raw, err)
			}
			if a.Reply != wantReply || a.Fields["name"] != "Jürgen Müller" || a.Fields["intent"] != "sales" {
				t.Errorf("reply %q, fields %v; want %q and the fields", a.Reply, a.Fields, wantReply)
			}
		})
	}
	// What is not a fenced JSON object stays invalid: the check can fail.
	for _, raw := range []string{
		"Here is the JSON:\n```json\n{\"reply\": \"cut\n```",
		"```python\nprint('hi')\n```",
		"Sure! Here is draft #1: {\"reply\": ",
	} {
		if a, err := parseAnswer(raw); err == nil {
			t.Errorf("parseAnswer(%q) = %+v, want an error", raw, a)
		}
	}
}

// TestProse: what a server without structured output may send the
// customer as it is, and what looks like JSON or code and never is.
func TestProse(t *testing.T) {
	ok := map[string]string{
		"Hi Ada, we are open until 17:00 today.":               "Hi Ada, we are open until 17:00 today.",
		"  Hallo Jürgen,\n\nwir melden uns morgen. {Grüße}  ":  "Hallo Jürgen,\n\nwir melden uns morgen. {Grüße}",
		"```\nHi Ada, we can do Friday.\n```":                  "Hi Ada, we can do Friday.",
		"Prices start at 400 EUR (see the list [1]).":          "Prices start at 400 EUR (see the list [1]).",
		"Use the code {SPRING} at checkout: it takes 10% off.": "Use the code {SPRING} at checkout: it takes 10% off.",
	}
	for raw, want := range ok {
		if got, isProse := prose(raw); !isProse || got != want {
			t.Errorf("prose(%q) = %q, %v; want %q, true", raw, got, isProse, want)
		}
	}
	for _, raw := range []string{
		`{"reply": "Hi Ada`,
		"Sure! Here is draft #1: {\"reply\": ",
		"Here you go: { \"reply\" : \"Hi\" }",
		"```json\n{\"reply\": \"Hi\"\n```",
		"Here is the JSON:\n```json\n{\"reply\": \"cut\n```\nThanks",
		`["Hi Ada"]`,
		"Some text\n```\ncode\n```\nmore text",
		"   ",
	} {
		if got, isProse := prose(raw); isProse {
			t.Errorf("prose(%q) = %q, true; want it refused as a reply", raw, got)
		}
	}
}

// contentServer is a chat completions server answering every call with
// one fixed message (content, or null when content is nil), recording the
// request bodies.
type contentServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newContentServer(t *testing.T, content *string, refusal *string) *contentServer {
	t.Helper()
	cs := &contentServer{}
	cs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cs.mu.Lock()
		cs.bodies = append(cs.bodies, body)
		cs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content, "refusal": refusal}}},
			"usage": map[string]any{"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
		})
	}))
	t.Cleanup(cs.srv.Close)
	return cs
}

func (cs *contentServer) calls() [][]byte {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Clone(cs.bodies)
}

func draftWith(t *testing.T, structured string, content, refusal *string) (Output, error, *contentServer) {
	t.Helper()
	cs := newContentServer(t, content, refusal)
	o, err := NewOpenAI(OpenAIConfig{BaseURL: cs.srv.URL + "/v1", Model: "m", Structured: structured, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in := oaInput()
	in.Text = "Can we book Friday? ada@example.com"
	out, err := o.Draft(context.Background(), in)
	if n := len(cs.calls()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
	return out, err, cs
}

func ptr(s string) *string { return &s }

// TestOpenAIFenceWithLinesInEveryMode: a fenced answer with a line before
// and after it is the answer in every mode, not a retry, and in none mode
// not a reply made of raw JSON.
func TestOpenAIFenceWithLinesInEveryMode(t *testing.T) {
	content := "Here is the answer:\n```json\n" + answerJSON + "\n```\nLet me know if you need changes."
	for _, mode := range []string{StructuredSchema, StructuredObject, StructuredNone} {
		t.Run(mode, func(t *testing.T) {
			out, err, _ := draftWith(t, mode, &content, nil)
			if err != nil {
				t.Fatalf("Draft: %v", err)
			}
			if out.Text != wantReply || out.Fields["summary"] != "wants a Friday slot" || len(out.Notes) != 0 {
				t.Errorf("Text %q, Fields %v, Notes %q; want the fenced answer's reply and fields, no notes", out.Text, out.Fields, out.Notes)
			}
		})
	}
}

// TestOpenAINoneModeNeverRepliesWithJSON: in none mode an answer that
// looks like JSON but is not a valid one is an *InvalidOutput the queue
// retries, never the customer's reply; prose still is the reply.
func TestOpenAINoneModeNeverRepliesWithJSON(t *testing.T) {
	bad := []string{
		`{"reply": "Hi Ada, we can do Fri`,
		"Sure! Here is draft #1: {\"reply\": ",
		"```json\n{\"intent\":\"sales\",\"summary\":\"no reply key\"}\n```",
		"Here is the JSON:\n```json\n{\"reply\": \"cut off\n```\nThanks!",
		`{"reply": "   ", "intent": "sales"}`,
		`["Hi Ada"]`,
	}
	for _, content := range bad {
		t.Run(content, func(t *testing.T) {
			out, err, _ := draftWith(t, StructuredNone, &content, nil)
			var inv *InvalidOutput
			if !errors.As(err, &inv) {
				t.Fatalf("Draft = (text %q, err %v), want *InvalidOutput", out.Text, err)
			}
			if inv.Raw != content || out.Text != "" {
				t.Errorf("Raw %q, Text %q; want the raw answer kept and no reply", inv.Raw, out.Text)
			}
		})
	}
	prose := "Hallo Jürgen, Freitag um 10 passt. Bis dann!"
	out, err, _ := draftWith(t, StructuredNone, &prose, nil)
	if err != nil || out.Text != prose || out.Fields["email"] != "ada@example.com" {
		t.Errorf("prose answer: (text %q, fields %v, err %v), want it as the reply with the customer's email", out.Text, out.Fields, err)
	}
}

// TestOpenAIEmptyAnswerIsRetried: a 200 with content null (or "") and no
// refusal is an empty answer, retried; a refusal still ends the job.
func TestOpenAIEmptyAnswerIsRetried(t *testing.T) {
	for name, content := range map[string]*string{"null": nil, "empty": ptr(""), "spaces": ptr(" \n ")} {
		for _, mode := range []string{StructuredSchema, StructuredNone} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				_, err, _ := draftWith(t, mode, content, nil)
				var inv *InvalidOutput
				var r *Refused
				if !errors.As(err, &inv) || errors.As(err, &r) {
					t.Fatalf("err = %v, want *InvalidOutput and not *Refused", err)
				}
				if !strings.Contains(err.Error(), "empty") || !strings.Contains(inv.Raw, `"choices"`) {
					t.Errorf("err %q, raw %q; want it called empty, with the whole answer kept", err, inv.Raw)
				}
			})
		}
	}
	_, err, _ := draftWith(t, StructuredSchema, nil, ptr("I can't help with that."))
	var r *Refused
	if !errors.As(err, &r) || r.Text != "I can't help with that." {
		t.Errorf("err = %v, want *Refused with the model's words", err)
	}
}

// TestOpenAISchemaSentReplyFirst reads the request's bytes: the schema
// inside response_format is schema.json byte for byte (compacted), its
// properties in schema.json's order with reply first, the order
// grammar-based servers make the model write them in.
func TestOpenAISchemaSentReplyFirst(t *testing.T) {
	content := answerJSON
	_, err, cs := draftWith(t, StructuredSchema, &content, nil)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		ResponseFormat struct {
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	body := cs.calls()[0]
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, Schema()); err != nil {
		t.Fatal(err)
	}
	if got := req.ResponseFormat.JSONSchema.Schema; !bytes.Equal(got, want.Bytes()) {
		t.Errorf("schema sent:\n%s\nwant schema.json compacted:\n%s", got, want.Bytes())
	}
	order := propertyOrder(t, req.ResponseFormat.JSONSchema.Schema)
	wantOrder := []string{"reply", "intent", "name", "email", "phone", "summary", "confidence"}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("properties sent in the order %q, want %q", order, wantOrder)
	}
}

// propertyOrder lists the keys of the object's "properties" as they stand
// in the bytes (a map would lose the order).
func propertyOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(obj["properties"]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("properties is not an object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
