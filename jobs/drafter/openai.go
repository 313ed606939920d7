package drafter

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaJSON is the contract of the model's answer; it is sent to servers
// that support structured output and always checked here, whatever the
// server claims, so nothing unvalidated is ever routed on.
//
//go:embed schema.json
var schemaJSON []byte

// OpenAI drafts with any OpenAI-compatible chat completions endpoint
// (OpenAI, Ollama, vLLM, llama.cpp's server, LiteLLM).
type OpenAI struct {
	client        openai.Client
	model         string
	promptVersion string
	systemPrompt  string
	schema        *jsonschema.Schema
	schemaDoc     map[string]any
}

// OpenAIConfig configures NewOpenAI.
type OpenAIConfig struct {
	BaseURL       string
	APIKey        string
	Model         string
	PromptVersion string
	SystemPrompt  string
	Timeout       time.Duration
	HTTPClient    *http.Client // nil: a client with Timeout
}

// defaultSystemPrompt is used when the config gives none.
const defaultSystemPrompt = "You draft replies for a small agency's customer inbox. A person reviews every draft before it is sent. " +
	"Be brief, friendly and concrete; never promise prices, dates or actions the agency has not confirmed. " +
	"Extract the customer's name, email and phone only if they appear in the conversation."

// NewOpenAI returns a drafter for the configured endpoint.
func NewOpenAI(c OpenAIConfig) (*OpenAI, error) {
	var doc map[string]any
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		return nil, fmt.Errorf("drafter: schema: %w", err)
	}
	comp := jsonschema.NewCompiler()
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("drafter: schema: %w", err)
	}
	if err := comp.AddResource("draft.json", schemaDoc); err != nil {
		return nil, fmt.Errorf("drafter: schema: %w", err)
	}
	sch, err := comp.Compile("draft.json")
	if err != nil {
		return nil, fmt.Errorf("drafter: schema: %w", err)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: c.Timeout}
	}
	opts := []option.RequestOption{
		option.WithBaseURL(c.BaseURL),
		option.WithHTTPClient(hc),
		// The job queue owns retries (with backoff, attempts recorded and
		// a dead-letter list); the SDK's own retries would hide them.
		option.WithMaxRetries(0),
		option.WithRequestTimeout(c.Timeout),
	}
	if c.APIKey != "" {
		opts = append(opts, option.WithAPIKey(c.APIKey))
	} else {
		opts = append(opts, option.WithAPIKey("none")) // local servers ignore it; the SDK wants one
	}
	delete(doc, "$schema")
	delete(doc, "title")
	sp := c.SystemPrompt
	if sp == "" {
		sp = defaultSystemPrompt
	}
	return &OpenAI{
		client: openai.NewClient(opts...), model: c.Model, promptVersion: c.PromptVersion,
		systemPrompt: sp, schema: sch, schemaDoc: doc,
	}, nil
}

// answer is the validated shape of the model's JSON.
type answer struct {
	Reply      string  `json:"reply"`
	Intent     string  `json:"intent"`
	Name       string  `json:"name"`
	Email      string  `json:"email"`
	Phone      string  `json:"phone"`
	Summary    string  `json:"summary"`
	Confidence float64 `json:"confidence"`
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

// Draft asks the model for a reply and the extracted fields, and validates its answer.
func (o *OpenAI) Draft(ctx context.Context, in Input) (Output, error) {
	params := openai.ChatCompletionNewParams{
		Model:    o.model,
		Messages: o.messages(in),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name: "handoff_draft", Schema: o.schemaDoc, Strict: openai.Bool(true),
				},
			},
		},
	}
	sent, err := json.Marshal(params)
	if err != nil {
		return Output{}, fmt.Errorf("drafter: encode request: %w", err)
	}
	var reqOpts []option.RequestOption
	if in.CorrelationID != "" {
		reqOpts = append(reqOpts, option.WithHeader("X-Correlation-ID", in.CorrelationID))
	}
	resp, err := o.client.Chat.Completions.New(ctx, params, reqOpts...)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && permanentStatus(apiErr.StatusCode) {
			return Output{}, &PermanentError{Err: fmt.Errorf("the model server refused the request (%d): %s", apiErr.StatusCode, apiErr.Message)}
		}
		return Output{}, fmt.Errorf("call the model: %w", err)
	}
	if len(resp.Choices) == 0 {
		return Output{}, &InvalidOutput{Raw: resp.RawJSON(), Err: errors.New("the answer has no choices")}
	}
	raw := resp.Choices[0].Message.Content
	a, err := o.validate(raw)
	if err != nil {
		return Output{}, &InvalidOutput{Raw: raw, Err: err}
	}
	fields := map[string]string{"intent": a.Intent, "summary": a.Summary, "confidence": strconv.FormatFloat(a.Confidence, 'f', -1, 64)}
	phone := a.Phone
	if p, ok := normalizePhone(phone); ok {
		phone = p // the same form the template drafter stores
	}
	for k, v := range map[string]string{"name": a.Name, "email": strings.ToLower(a.Email), "phone": phone} {
		if strings.TrimSpace(v) != "" {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return Output{
		Text: strings.TrimSpace(a.Reply), Fields: fields, Drafter: "openai", Model: o.model,
		PromptVersion: o.promptVersion, InputHash: hashBytes(sent), Raw: raw,
		PromptTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens,
	}, nil
}

// validate parses raw and checks it against the schema.
func (o *OpenAI) validate(raw string) (answer, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return answer{}, fmt.Errorf("not JSON: %w", err)
	}
	if err := o.schema.Validate(doc); err != nil {
		return answer{}, fmt.Errorf("breaks the schema: %w", err)
	}
	var a answer
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return answer{}, err
	}
	return a, nil
}

// messages is the prompt: the system prompt, the earlier conversation
// (bounded by the caller, newest last), then the new message.
func (o *OpenAI) messages(in Input) []openai.ChatCompletionMessageParamUnion {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(o.systemPrompt +
		"\nAnswer with one JSON object with the keys reply, intent, name, email, phone, summary and confidence.")}
	for _, m := range in.History {
		if m.From == "agent" {
			msgs = append(msgs, openai.AssistantMessage(m.Text))
		} else {
			msgs = append(msgs, openai.UserMessage(m.Text))
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
	if len(in.History) > 0 {
		fmt.Fprintf(&b, "This is message %d of the conversation.\n", countCustomer(in.History)+1)
	}
	fmt.Fprintf(&b, "Message:\n%s", in.Text)
	return append(msgs, openai.UserMessage(b.String()))
}

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
