package drafter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
)

// ---- a fake OpenAI-compatible server ----

// How the fake model answers.
const (
	fmOK            = "ok"             // a valid answer, different on every call ("draft #N")
	fmStatus500     = "500"            // a server error
	fmStatus401     = "401"            // a wrong key
	fmStatus429     = "429"            // rate limited: retrying can help
	fmStall         = "stall"          // accepts, then never answers until the request's context ends
	fmBadJSON       = "bad-json"       // content that is not JSON
	fmBadConfidence = "bad-confidence" // JSON that breaks the schema: confidence 7
	fmMissingReply  = "missing-reply"  // JSON that breaks the schema: no reply
	fmExtraKey      = "extra-key"      // JSON that breaks the schema: a key the schema does not allow
	fmNoChoices     = "no-choices"     // a completion with no choices at all
	fmBlankReply    = "blank-reply"    // a reply of only spaces: passes minLength, nothing after trimming
	// How real servers answer (answers_test.go).
	fmFenced      = "fenced"       // the JSON inside a ```json fence
	fmRefusal     = "refusal"      // OpenAI's message.refusal, content null
	fmNullContent = "null-content" // content null, no refusal text
	fmMissingOpt  = "missing-opt"  // only reply, the optional keys left out (json_object servers)
	fmBadIntent   = "bad-intent"   // intent "Support Request", email off-pattern: the reply is fine
	fmStrict      = "strict"       // enforces OpenAI's strict-schema rules: 400 for a schema breaking them
	fmRetryAfter  = "retry-after"  // 429 with Retry-After: 7
	fmCut         = "cut"          // the answer's body cut off halfway, connection closed
	fmProse       = "prose"        // plain text, no JSON (a server without structured output)
)

// newFakeModel is a fake model (testkit.Model) answering every call as
// mode says; a valid answer is different on every call, so a reused
// draft is told from a new one.
func newFakeModel(t *testing.T, mode string) *testkit.Model {
	t.Helper()
	f := testkit.NewModel(t)
	f.Answer(func(c testkit.ModelCall) testkit.Reply { return fmAnswer(mode, c) })
	return f
}

// fmAnswer is the answer to call c in mode.
func fmAnswer(mode string, c testkit.ModelCall) testkit.Reply {
	n := c.N
	reply := testkit.JSONReply
	switch mode {
	case fmStatus500:
		return testkit.ErrorReply(http.StatusInternalServerError, "the model crashed", "server_error")
	case fmStatus401:
		return testkit.ErrorReply(http.StatusUnauthorized, "Incorrect API key provided", "invalid_request_error")
	case fmStatus429:
		return testkit.ErrorReply(http.StatusTooManyRequests, "slow down", "rate_limit_error")
	case fmStall:
		return testkit.Reply{Hang: true}
	case fmRetryAfter:
		return testkit.RateLimited("7", "Rate limit reached for requests")
	case fmCut:
		return testkit.Reply{Cut: true}
	case fmRefusal:
		return testkit.RefusalReply("I'm sorry, I can't help with that request.")
	case fmNullContent:
		return testkit.NullReply()
	case fmStrict:
		if errs := strictSchemaErrors(c.Req.ResponseFormat.JSONSchema.Schema, "response_format.json_schema.schema"); len(errs) > 0 {
			return testkit.ErrorReply(http.StatusBadRequest, "Invalid schema for response_format 'handoff_draft': "+errs[0], "invalid_request_error")
		}
		return reply(fmt.Sprintf(`{"reply":"strict draft #%d","intent":"support","name":null,"email":null,"phone":null,"summary":"s","confidence":0.9}`, n))
	case fmFenced:
		return testkit.FencedReply(fmt.Sprintf(`{"reply":"fenced draft #%d","intent":"sales","name":"Ada","email":null,"phone":null,"summary":"s","confidence":0.5}`, n))
	case fmMissingOpt:
		return reply(fmt.Sprintf(`{"reply":"bare draft #%d"}`, n))
	case fmBadIntent:
		return reply(fmt.Sprintf(`{"reply":"labelled draft #%d","intent":"Support Request","name":"Ada","email":"ada at example","phone":null,"summary":"s","confidence":0.8}`, n))
	case fmProse:
		return reply(fmt.Sprintf("Hi Ada, thanks for writing, draft #%d. We will look at the invoice today.", n))
	case fmNoChoices:
		return testkit.Reply{NoChoices: true, PromptTokens: 11}
	case fmOK:
		return reply(fmt.Sprintf(`{"reply":"draft #%d","intent":"support","name":" Ada Lovelace ","email":"Ada@Example.COM","phone":"+44 20 7946 0958","summary":"wants help (call %d)","confidence":0.75}`, n, n))
	case fmBadJSON:
		return reply(fmt.Sprintf("Sure! Here is draft #%d: {\"reply\": ", n))
	case fmBadConfidence:
		return reply(fmt.Sprintf(`{"reply":"draft #%d","intent":"sales","name":"","email":"","phone":"","summary":"s","confidence":7}`, n))
	case fmMissingReply:
		return reply(fmt.Sprintf(`{"intent":"sales","name":"","email":"","phone":"","summary":"call %d","confidence":0.5}`, n))
	case fmExtraKey:
		return reply(fmt.Sprintf(`{"reply":"draft #%d","intent":"sales","name":"","email":"","phone":"","summary":"s","confidence":0.5,"price":"free"}`, n))
	case fmBlankReply:
		return reply(`{"reply":"   ","intent":"sales","name":"","email":"","phone":"","summary":"s","confidence":0.5}`)
	}
	return testkit.ErrorReply(http.StatusTeapot, "unknown fake mode "+mode, "test_error")
}

// newTestOpenAI is a drafter against f.
func newTestOpenAI(t *testing.T, f *testkit.Model, timeout time.Duration) *OpenAI {
	t.Helper()
	o, err := NewOpenAI(OpenAIConfig{
		BaseURL: f.URL, APIKey: "sk-test-123", Model: "m", PromptVersion: "p1",
		SystemPrompt: "You are the test prompt.", Timeout: timeout,
	})
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	return o
}

// oaInput is a message with two earlier messages of context.
func oaInput() Input {
	return Input{
		EventKey: "web:m2", Channel: "web", ConversationID: "conv-1", Contact: "+15550001234", Name: "Ada",
		Text: "Can you also fix the invoice?", Owner: "sales", CorrelationID: "01JCORRELATION0000000000000",
		History: []Message{
			{From: "customer", Text: "My site is down."},
			{From: "agent", Text: "Sorry to hear it, we are on it."},
		},
	}
}

// ---- tests ----

func TestOpenAIRequest(t *testing.T) {
	f := newFakeModel(t, fmOK)
	o := newTestOpenAI(t, f, 5*time.Second)
	in := oaInput()
	if _, err := o.Draft(context.Background(), in); err != nil {
		t.Fatalf("Draft: %v", err)
	}
	calls := f.Calls()
	if len(calls) != 1 {
		t.Fatalf("model called %d times, want 1", len(calls))
	}
	c := calls[0]
	if got := c.Header.Get("Authorization"); got != "Bearer sk-test-123" {
		t.Errorf("Authorization = %q, want %q", got, "Bearer sk-test-123")
	}
	if got := c.Header.Get("X-Correlation-ID"); got != in.CorrelationID {
		t.Errorf("X-Correlation-ID = %q, want %q", got, in.CorrelationID)
	}
	req := c.Req
	if req.Model != "m" {
		t.Errorf("model = %q, want m", req.Model)
	}
	// system, the two history messages, the new message: newest last.
	wantRoles := []string{"system", "user", "assistant", "user"}
	if len(req.Messages) != len(wantRoles) {
		t.Fatalf("got %d messages, want %d: %s", len(req.Messages), len(wantRoles), c.Body)
	}
	for i, role := range wantRoles {
		if req.Messages[i].Role != role {
			t.Errorf("message %d role = %q, want %q", i, req.Messages[i].Role, role)
		}
	}
	if got := req.Messages[0].Text(); !strings.HasPrefix(got, "You are the test prompt.") {
		t.Errorf("system message = %q, want the configured prompt first", got)
	}
	if got := req.Messages[1].Text(); got != "My site is down." {
		t.Errorf("history message 1 = %q", got)
	}
	if got := req.Messages[2].Text(); got != "Sorry to hear it, we are on it." {
		t.Errorf("history message 2 = %q", got)
	}
	last := req.Messages[3].Text()
	for _, want := range []string{"Channel: web", "Sender name: Ada", "Sender contact: +15550001234", "message 2 of the conversation", "Message:\nCan you also fix the invoice?"} {
		if !strings.Contains(last, want) {
			t.Errorf("new message %q lacks %q", last, want)
		}
	}
	rf := req.ResponseFormat
	if rf.Type != "json_schema" || rf.JSONSchema.Name != "handoff_draft" || !rf.JSONSchema.Strict {
		t.Errorf("response_format = %+v, want a strict json_schema named handoff_draft", rf)
	}
	props, _ := rf.JSONSchema.Schema["properties"].(map[string]any)
	for _, k := range []string{"reply", "intent", "name", "email", "phone", "summary", "confidence"} {
		if _, ok := props[k]; !ok {
			t.Errorf("schema sent has no property %q: %v", k, rf.JSONSchema.Schema)
		}
	}
	if rf.JSONSchema.Schema["additionalProperties"] != false {
		t.Errorf("schema sent allows additional properties: %v", rf.JSONSchema.Schema)
	}
	if _, ok := rf.JSONSchema.Schema["$schema"]; ok {
		t.Errorf("schema sent still has $schema, which strict servers refuse")
	}
	// Grammar-based servers (llama.cpp, xgrammar) make the model write the
	// properties in the order sent: reply first, never after confidence.
	body := string(c.Body)
	props0 := strings.Index(body, `"properties":{`)
	if props0 < 0 {
		t.Fatalf("request has no schema properties: %s", body)
	}
	if first := body[props0+len(`"properties":{`):]; !strings.HasPrefix(first, `"reply"`) {
		t.Errorf("schema properties sent start with %.40q, want \"reply\" first", first)
	}
}

func TestOpenAINoKeyStillSendsABearer(t *testing.T) {
	f := newFakeModel(t, fmOK)
	o, err := NewOpenAI(OpenAIConfig{BaseURL: f.URL, Model: "m", PromptVersion: "p1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in := oaInput()
	in.CorrelationID = ""
	if _, err := o.Draft(context.Background(), in); err != nil {
		t.Fatalf("Draft: %v", err)
	}
	c := f.Calls()[0]
	if got := c.Header.Get("Authorization"); got != "Bearer none" {
		t.Errorf("Authorization without a key = %q, want a placeholder bearer", got)
	}
	if got, ok := c.Header["X-Correlation-Id"]; ok {
		t.Errorf("X-Correlation-ID sent without a correlation id: %q", got)
	}
	if got := c.Req.Messages[0].Text(); !strings.HasPrefix(got, defaultSystemPrompt) {
		t.Errorf("system message = %q, want the default prompt", got)
	}
}

func TestOpenAIValidOutput(t *testing.T) {
	f := newFakeModel(t, fmOK)
	o := newTestOpenAI(t, f, 5*time.Second)
	in := oaInput()
	out, err := o.Draft(context.Background(), in)
	if err != nil {
		t.Fatalf("Draft: %v", err)
	}
	if out.Text != "draft #1" {
		t.Errorf("Text = %q, want %q", out.Text, "draft #1")
	}
	wantFields := map[string]string{
		"intent": "support", "name": "Ada Lovelace", "email": "ada@example.com",
		"phone": "+442079460958" /* normalised like the template drafter does */, "summary": "wants help (call 1)", "confidence": "0.75",
	}
	if len(out.Fields) != len(wantFields) {
		t.Errorf("Fields = %v, want %v", out.Fields, wantFields)
	}
	for k, v := range wantFields {
		if out.Fields[k] != v {
			t.Errorf("Fields[%s] = %q, want %q", k, out.Fields[k], v)
		}
	}
	if out.Drafter != "openai" || out.Model != "m" || out.PromptVersion != "p1" {
		t.Errorf("provenance = %q %q %q, want openai m p1", out.Drafter, out.Model, out.PromptVersion)
	}
	if out.PromptTokens != 11 || out.OutputTokens != 7 {
		t.Errorf("tokens = %d/%d, want 11/7", out.PromptTokens, out.OutputTokens)
	}
	if out.Raw != f.Content(1) {
		t.Errorf("Raw = %q, want the model's answer %q", out.Raw, f.Content(1))
	}
	if len(out.InputHash) != 64 {
		t.Errorf("InputHash = %q, want a sha256 hex digest", out.InputHash)
	}

	// The hash names the input, not the call: the same input (even under
	// another correlation id) hashes the same although the model answers
	// differently; a different input hashes differently.
	same := in
	same.CorrelationID = "01JOTHERCORRELATION00000000"
	again, err := o.Draft(context.Background(), same)
	if err != nil {
		t.Fatalf("Draft again: %v", err)
	}
	if again.Text != "draft #2" {
		t.Errorf("second answer = %q, want the fake's next reply %q", again.Text, "draft #2")
	}
	if again.InputHash != out.InputHash {
		t.Errorf("same input hashed %s then %s", out.InputHash, again.InputHash)
	}
	changes := []struct {
		name   string
		change func(*Input)
	}{
		{"text", func(in *Input) { in.Text += "!" }},
		{"history", func(in *Input) { in.History = in.History[:1] }},
		{"name", func(in *Input) { in.Name = "Grace" }},
		{"contact", func(in *Input) { in.Contact = "+15550009999" }},
		{"channel", func(in *Input) { in.Channel = "sms" }},
	}
	for _, tt := range changes {
		t.Run(tt.name, func(t *testing.T) {
			other := oaInput()
			tt.change(&other)
			o2, err := o.Draft(context.Background(), other)
			if err != nil {
				t.Fatalf("Draft: %v", err)
			}
			if o2.InputHash == out.InputHash {
				t.Errorf("a different %s hashed the same: %s", tt.name, o2.InputHash)
			}
		})
	}
}

func TestOpenAIErrors(t *testing.T) {
	tests := []struct {
		mode      string
		invalid   bool // *InvalidOutput with the raw answer
		permanent bool // *PermanentError
		wantErr   string
	}{
		{mode: fmBadJSON, invalid: true, wantErr: "not JSON"},
		{mode: fmMissingReply, invalid: true, wantErr: "schema"},
		{mode: fmNoChoices, invalid: true, wantErr: "no choices"},
		{mode: fmStatus401, permanent: true, wantErr: "401"},
		{mode: fmStatus500, wantErr: "500"},
		{mode: fmStatus429, wantErr: "429"},
		{mode: fmStall},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFakeModel(t, tt.mode)
			// A long timeout leaves room for any retry below handoff (an
			// SDK's or the transport's), so that one would be counted below.
			timeout := 10 * time.Second
			if tt.mode == fmStall {
				timeout = 300 * time.Millisecond
			}
			o := newTestOpenAI(t, f, timeout)
			started := time.Now()
			out, err := o.Draft(context.Background(), oaInput())
			if err == nil {
				t.Fatalf("Draft = %+v, nil error; want a failure", out)
			}
			if tt.mode == fmStall && time.Since(started) > 5*time.Second {
				t.Errorf("a stalled model held Draft for %v with a 300ms timeout", time.Since(started))
			}
			var inv *InvalidOutput
			var perm *PermanentError
			if got := errors.As(err, &inv); got != tt.invalid {
				t.Errorf("errors.As(*InvalidOutput) = %v, want %v (err %v)", got, tt.invalid, err)
			}
			if got := errors.As(err, &perm); got != tt.permanent {
				t.Errorf("errors.As(*PermanentError) = %v, want %v (err %v)", got, tt.permanent, err)
			}
			if tt.invalid && inv != nil && tt.mode != fmNoChoices && inv.Raw != f.Content(1) {
				t.Errorf("InvalidOutput.Raw = %q, want what the model said: %q", inv.Raw, f.Content(1))
			}
			if tt.mode == fmNoChoices && inv != nil && !strings.Contains(inv.Raw, `"choices"`) {
				t.Errorf("InvalidOutput.Raw = %q, want the whole answer", inv.Raw)
			}
			if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			// The job queue owns retries: nothing below it may retry.
			if n := len(f.Calls()); n != 1 {
				t.Errorf("model called %d times for one Draft, want exactly 1 (no hidden retries)", n)
			}
		})
	}
}

func TestOpenAIContextEndsStalledCall(t *testing.T) {
	f := newFakeModel(t, fmStall)
	o := newTestOpenAI(t, f, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := o.Draft(ctx, oaInput())
	var inv *InvalidOutput
	var perm *PermanentError
	if err == nil || errors.As(err, &inv) || errors.As(err, &perm) {
		t.Fatalf("Draft on a stalled model = %v, want a plain (retryable) error", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
}

// TestOpenAIBlankReplyIsInvalid: a reply of only spaces passes the schema's
// minLength but is nothing once trimmed; it must not become an empty draft
// that a person could approve and send.
func TestOpenAIBlankReplyIsInvalid(t *testing.T) {
	f := newFakeModel(t, fmBlankReply)
	o := newTestOpenAI(t, f, 5*time.Second)
	out, err := o.Draft(context.Background(), oaInput())
	var inv *InvalidOutput
	if !errors.As(err, &inv) {
		t.Fatalf("Draft with a blank reply = (text %q, err %v), want *InvalidOutput", out.Text, err)
	}
	if inv.Raw != f.Content(1) {
		t.Errorf("Raw = %q, want %q", inv.Raw, f.Content(1))
	}
}

// A keep-alive connection that the server closes after reading the
// request, before any answer byte, is the case net/http's transport would
// resend on its own if it judged the request replayable. The call must
// fail once, the server having seen it once: the queue alone resends.
func TestOpenAIReusedConnectionDroppedIsNotResent(t *testing.T) {
	f := testkit.NewModel(t)
	f.Queue(testkit.JSONReply(`{"reply":"Hi Ada","intent":"support","name":null,"email":null,"phone":null,"summary":"s","confidence":0.9}`))
	f.Always(testkit.Reply{Drop: true})
	o, err := NewOpenAI(OpenAIConfig{BaseURL: f.URL, Model: "m", PromptVersion: "p1", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Draft(context.Background(), oaInput()); err != nil {
		t.Fatalf("first Draft: %v", err)
	}
	if _, err := o.Draft(context.Background(), oaInput()); err == nil {
		t.Fatal("second Draft on a dropped connection succeeded, want an error")
	}
	if calls := len(f.Calls()); calls != 2 {
		t.Errorf("the server saw %d requests for 2 Drafts, want 2 (no resend below the queue)", calls)
	}
	if n := f.Conns(); n != 1 {
		t.Errorf("%d connections opened, want 1: the second call must have reused the first's connection to test the resend rule", n)
	}
}
