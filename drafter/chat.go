package drafter

import (
	"bytes"
	"context"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The one endpoint the drafter calls, OpenAI's chat completions
// (POST {base_url}/chat/completions, as published in OpenAI's API
// reference and served by Ollama, vLLM, llama.cpp's server, LM Studio and
// LiteLLM), spoken over net/http. A client of our own instead of an SDK:
// the official Go SDK alone took 55 s and 2.8 GB of memory to compile,
// more than the small machines agencies self-host on have, for one call.
// It never retries: the job queue owns retries, each one an attempt it
// records.

// defaultBaseURL is OpenAI's own API, used when drafter.base_url is empty.
const defaultBaseURL = "https://api.openai.com/v1"

// maxAnswerBytes bounds what is read of the model server's answer.
const maxAnswerBytes = 8 << 20

// chatRequest is the request body: the fields handoff uses.
type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type responseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *jsonSchemaFormat `json:"json_schema,omitempty"`
}

type jsonSchemaFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// chatResponse is the answer: the fields handoff reads, and the bytes as
// received (raw) for the attempt record.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	raw []byte
}

// apiError is an answer other than 2xx: its status, the server's message
// (OpenAI's {"error":{"message":…}}, or the start of the body) and Retry-After.
type apiError struct {
	Status     int
	Message    string
	RetryAfter time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("the model server answered %d: %s", e.Status, e.Message)
}

// chatClient calls one chat completions endpoint.
type chatClient struct {
	http    *http.Client
	baseURL string
	apiKey  string
	timeout time.Duration
}

// endpoint is base_url + /chat/completions, whatever the slashes.
func (c *chatClient) endpoint() string {
	base := c.baseURL
	if base == "" {
		base = defaultBaseURL
	}
	return strings.TrimRight(base, "/") + "/chat/completions"
}

// complete sends body (a chatRequest, encoded) once and reads the answer.
func (c *chatClient) complete(ctx context.Context, body []byte, correlationID string) (*chatResponse, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	// A reader the transport cannot rewind: nothing below handoff sends
	// the request twice.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(), io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	// Local servers ignore the key, but some proxies in front of them
	// refuse a request without a bearer: send a placeholder.
	key := c.apiKey
	if key == "" {
		key = "none"
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if correlationID != "" {
		req.Header.Set("X-Correlation-ID", correlationID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if len(raw) > maxAnswerBytes {
		return nil, fmt.Errorf("the answer is over %d MiB", maxAnswerBytes>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &apiError{Status: resp.StatusCode, Message: errorMessage(raw), RetryAfter: retryAfter(resp)}
	}
	var out chatResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &InvalidOutput{Raw: string(raw), Err: fmt.Errorf("the answer is not a chat completion: %w", err)}
	}
	out.raw = raw
	return &out, nil
}

// errorMessage is the server's own sentence from an error body.
func errorMessage(raw []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = "no message"
	}
	return msg
}

// text is a choice's content, "" for null.
func text(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
