package drafter

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/quality"
)

// schemaJSON is the shape of the model's answer sent to servers with
// structured output: types only, every key required and the optional ones
// nullable, which OpenAI's strict mode, llama.cpp's grammar converter and
// vLLM's xgrammar and guidance backends all accept. The rules they cannot
// all express are checked by parseAnswer, whatever the server enforced.
//
//go:embed schema.json
var schemaJSON []byte

// Schema is the response schema handoff sends (a copy), for tests and docs.
func Schema() []byte { return append([]byte(nil), schemaJSON...) }

// The values of drafter.structured: how the answer's shape is asked for.
const (
	StructuredSchema = "json_schema" // response_format json_schema, strict: OpenAI, Ollama, vLLM, llama.cpp, LM Studio
	StructuredObject = "json_object" // response_format json_object: any JSON, the keys asked for in the prompt
	StructuredNone   = "none"        // no response_format; a plain-text answer is taken as the reply
)

// Price is what a model's tokens cost, per million.
type Price struct {
	Input, Output float64
	Currency      string
}

// Cost is the price of a call that used the given tokens.
func (p Price) Cost(in, out int64) float64 {
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6
}

// OpenAI drafts with any OpenAI-compatible chat completions endpoint
// (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, LiteLLM).
type OpenAI struct {
	client         *chatClient
	model          string
	promptVersion  string
	systemPrompt   string
	channelPrompts map[string]string
	structured     string
	price          Price
}

// OpenAIConfig configures NewOpenAI.
type OpenAIConfig struct {
	BaseURL       string
	APIKey        string
	Model         string
	PromptVersion string
	SystemPrompt  string
	// ChannelPrompts replace SystemPrompt on the channels they name.
	ChannelPrompts map[string]string
	// Structured is how the answer's shape is asked for; "" is json_schema.
	Structured string
	Price      Price
	Timeout    time.Duration
	HTTPClient *http.Client // nil: a client with Timeout
}

// defaultSystemPrompt is used when the config gives none.
const defaultSystemPrompt = "You draft replies for a small agency's customer inbox. A person reviews every draft before it is sent. " +
	"Be brief, friendly and concrete; never promise prices, dates or actions the agency has not confirmed. " +
	"Extract the customer's name, email and phone only if they appear in the conversation."

// NewOpenAI returns a drafter for the configured endpoint.
func NewOpenAI(c OpenAIConfig) (*OpenAI, error) {
	if !json.Valid(schemaJSON) {
		return nil, errors.New("drafter: schema.json is not valid JSON")
	}
	switch c.Structured {
	case "":
		c.Structured = StructuredSchema
	case StructuredSchema, StructuredObject, StructuredNone:
	default:
		return nil, fmt.Errorf("drafter: structured %q is not json_schema, json_object or none", c.Structured)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: c.Timeout}
	}
	sp := c.SystemPrompt
	if sp == "" {
		sp = defaultSystemPrompt
	}
	return &OpenAI{
		client: &chatClient{http: hc, baseURL: c.BaseURL, apiKey: c.APIKey, timeout: c.Timeout},
		model:  c.Model, promptVersion: c.PromptVersion,
		systemPrompt: sp, channelPrompts: c.ChannelPrompts,
		structured: c.Structured, price: c.Price,
	}, nil
}

// InvalidOutput is a model answer that is not JSON or breaks the schema. It
// keeps the raw answer for the attempt record.
type InvalidOutput struct {
	Raw string
	Err error
}

func (e *InvalidOutput) Error() string { return "the model's answer is not valid: " + e.Err.Error() }
func (e *InvalidOutput) Unwrap() error { return e.Err }

// PermanentError is a refusal that retrying cannot fix (bad request, wrong key, unknown model).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Refused is a model that declined to draft (OpenAI's message.refusal):
// asking again gives the same answer, so the job ends with the model's own
// words for a person to read. An answer with no content and no refusal is
// not one: it is an *InvalidOutput, retried.
type Refused struct {
	Text string
	Raw  string
}

func (e *Refused) Error() string {
	if e.Text == "" {
		return "the model refused to draft a reply and gave no reason"
	}
	return "the model refused to draft a reply: " + e.Text
}

// RateLimited is a 429: the server said when to come back (After, 0 when
// it did not).
type RateLimited struct {
	After time.Duration
	Err   error
}

func (e *RateLimited) Error() string { return e.Err.Error() }
func (e *RateLimited) Unwrap() error { return e.Err }

// Draft asks the model for a reply and the extracted fields, and checks its answer.
func (o *OpenAI) Draft(ctx context.Context, in Input) (Output, error) {
	system := o.system(in.Channel, in.Facts)
	req := chatRequest{Model: o.model, Messages: o.messages(system, in)}
	switch o.structured {
	case StructuredSchema:
		// schema.json goes out byte for byte, its properties in the order
		// written there (reply first), which grammar-based servers follow.
		req.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: &jsonSchemaFormat{
			Name: "handoff_draft", Schema: json.RawMessage(schemaJSON), Strict: true,
		}}
	case StructuredObject:
		req.ResponseFormat = &responseFormat{Type: "json_object"}
	}
	sent, err := json.Marshal(req)
	if err != nil {
		return Output{}, fmt.Errorf("drafter: encode request: %w", err)
	}
	out := Output{
		Drafter: "openai", Model: o.model, PromptVersion: o.promptVersion, InputHash: hashBytes(sent),
		PromptHash: hashBytes([]byte(system)), Structured: o.structured, Currency: o.price.Currency,
	}
	if f := factsPrompt(in.Facts); f != "" {
		out.FactsHash, out.FactsVersion = hashBytes([]byte(f)), in.Facts.Version
	}
	resp, err := o.client.complete(ctx, sent, in.CorrelationID)
	if err != nil {
		var apiErr *apiError
		if errors.As(err, &apiErr) {
			if apiErr.Status == http.StatusTooManyRequests {
				return out, &RateLimited{After: apiErr.RetryAfter, Err: fmt.Errorf("the model server is rate limiting (429): %s", apiErr.Message)}
			}
			if permanentStatus(apiErr.Status) {
				return out, &PermanentError{Err: fmt.Errorf("the model server refused the request (%d): %s", apiErr.Status, apiErr.Message)}
			}
		}
		return out, fmt.Errorf("call the model: %w", err)
	}
	out.PromptTokens, out.OutputTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	out.Cost = o.price.Cost(out.PromptTokens, out.OutputTokens)
	if len(resp.Choices) == 0 {
		return out, &InvalidOutput{Raw: string(resp.raw), Err: errors.New("the answer has no choices")}
	}
	msg := resp.Choices[0].Message
	raw := text(msg.Content)
	out.Raw = raw
	if r := strings.TrimSpace(text(msg.Refusal)); r != "" {
		return out, &Refused{Text: r, Raw: string(resp.raw)}
	}
	if strings.TrimSpace(raw) == "" {
		// No content and no refusal is not a refusal (a refusal says so in
		// message.refusal): an empty answer, which the queue asks again.
		why := "the answer is empty: no content and no refusal"
		if resp.Choices[0].FinishReason == "length" {
			why = "the answer is empty: the model ran out of tokens"
		}
		return out, &InvalidOutput{Raw: string(resp.raw), Err: errors.New(why)}
	}
	a, err := parseAnswer(raw)
	if err != nil && o.structured == StructuredNone {
		// A server without structured output answered in prose: that is
		// the reply, and the contact details come from the customer's words.
		// An answer that looks like JSON is a broken answer, asked again,
		// never a reply the customer would receive as raw JSON.
		if text, ok := prose(raw); ok {
			a = answer{Reply: text, Fields: Extract(in.Text), Notes: []string{
				"the model answered in plain text, not JSON: the reply is its whole answer; email and phone were taken from the customer's messages, the other fields are empty"}}
			err = nil
		} else {
			err = fmt.Errorf("the answer looks like JSON, so it is not taken as a plain-text reply: %w", err)
		}
	}
	if err != nil {
		return out, &InvalidOutput{Raw: raw, Err: err}
	}
	out.Text, out.Fields, out.Notes = a.Reply, a.Fields, a.Notes
	if out.FactsHash != "" { // the prompt gave facts, and asked for their marks
		var unknown []string
		out.Text, out.Cited, unknown = Cite(a.Reply, in.Facts)
		if len(unknown) > 0 {
			which := "the facts"
			if in.Facts.Version > 0 {
				which = fmt.Sprintf("facts version %d", in.Facts.Version)
			}
			out.Notes = append(out.Notes, fmt.Sprintf("the reply cited %s, not in %s: the marks were taken out", strings.Join(unknown, ", "), which))
		}
	}
	return out, nil
}

// system is the system prompt of a channel's drafts: the channel's own
// prompt or the default one, then the client's facts, each entry with
// the id the reply cites it by.
func (o *OpenAI) system(channel string, facts *Facts) string {
	sp := o.systemPrompt
	if p := o.channelPrompts[channel]; p != "" {
		sp = p
	}
	if f := factsPrompt(facts); f != "" {
		sp += "\n\nFacts about the business (hours, prices, policies), each with its id in square brackets. Use only these; say a person will confirm anything they do not cover. " +
			"Right after each sentence of the reply that uses a fact, write the fact's id in square brackets, such as [F2] (several: [F1][F4]); these marks are taken out before anyone reads the reply.\n" + f
	}
	return sp
}

// retryAfter reads a Retry-After header (seconds or an HTTP date); 0 when
// there is none or it cannot be read.
func retryAfter(r *http.Response) time.Duration {
	if r == nil {
		return 0
	}
	v := strings.TrimSpace(r.Header.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// messages is the prompt: the system prompt, the earlier conversation
// (bounded by the caller, newest last), then the turn's message or messages.
func (o *OpenAI) messages(system string, in Input) []chatMessage {
	msgs := []chatMessage{{Role: "system", Content: system + answerShape}}
	for _, m := range in.History {
		if m.From == "agent" {
			msgs = append(msgs, chatMessage{Role: "assistant", Content: m.Text})
		} else {
			msgs = append(msgs, chatMessage{Role: "user", Content: m.Text})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Channel: %s\n", in.Channel)
	if in.Name != "" {
		fmt.Fprintf(&b, "Sender name: %s\n", in.Name)
	}
	if in.Contact != "" {
		fmt.Fprintf(&b, "Sender contact: %s\n", in.Contact)
	}
	switch n := countCustomer(in.History); {
	case n > 0 && len(in.Messages) > 1:
		fmt.Fprintf(&b, "These are messages %d to %d of the conversation.\n", n+1, n+len(in.Messages))
	case n > 0:
		fmt.Fprintf(&b, "This is message %d of the conversation.\n", n+1)
	}
	// The reply is in the customer's language: the guard flags one that
	// is not (review.Guard), so the model is told which, when it is known.
	if code, ok := quality.Language(in.Text); ok {
		fmt.Fprintf(&b, "The sender writes in %s: write the reply in %s.\n", quality.LanguageName(code), quality.LanguageName(code))
	} else {
		b.WriteString("Write the reply in the language the sender writes in.\n")
	}
	if in.Instruction != "" {
		// A person asked for this draft again, and said how it should differ.
		fmt.Fprintf(&b, "The person reviewing the reply asks: %s\n", in.Instruction)
	}
	if len(in.Messages) > 1 {
		// A burst is one turn: one reply answers every message of it.
		fmt.Fprintf(&b, "The sender wrote %d messages in a row; answer them together in one reply.\n", len(in.Messages))
		for i, m := range in.Messages {
			fmt.Fprintf(&b, "Message %d:\n%s\n", i+1, m)
		}
		return append(msgs, chatMessage{Role: "user", Content: strings.TrimSuffix(b.String(), "\n")})
	}
	fmt.Fprintf(&b, "Message:\n%s", in.Text)
	return append(msgs, chatMessage{Role: "user", Content: b.String()})
}

// answerShape tells the model the answer's keys and rules: servers without
// structured output only have this to go by.
const answerShape = "\nAnswer with one JSON object, and nothing else, with the keys reply (the reply to send, at most 4000 characters), " +
	"intent (one lowercase word: sales, support, billing, complaint, spam or other), name, email, phone (the customer's, or null when they gave none), " +
	"summary (one sentence for the person who handles the request) and confidence (a number from 0 to 1)."

func countCustomer(h []Message) int {
	n := 0
	for _, m := range h {
		if m.From != "agent" {
			n++
		}
	}
	return n
}

// permanentStatus is a 4xx that retrying cannot fix; 408, 409 and 429 can pass.
func permanentStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusConflict && code != http.StatusTooManyRequests
}
