// Package drafter turns one inbound message into a reply draft and the fields
// extracted from it. The built-in template drafter needs no network; the
// OpenAI-compatible one calls a model.
package drafter

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Message is one earlier message of the conversation, given as context.
type Message struct {
	From string `json:"from"` // "customer" or "agent"
	Text string `json:"text"`
}

// Input is everything a drafter may see. It is hashed into Output.InputHash,
// so it must hold no secrets.
type Input struct {
	EventKey       string    `json:"event_key"`
	Channel        string    `json:"channel"`
	ConversationID string    `json:"conversation_id"`
	Contact        string    `json:"contact,omitempty"`
	Name           string    `json:"name,omitempty"`
	Text           string    `json:"text"`
	Owner          string    `json:"owner,omitempty"`
	History        []Message `json:"history,omitempty"`
	// CorrelationID is sent as X-Correlation-ID; it is not part of the hashed input.
	CorrelationID string `json:"-"`
}

// Hash is a stable digest of the exact input, recorded with the draft.
func (in Input) Hash() string {
	raw, _ := json.Marshal(in) // a struct of strings always marshals
	return hashBytes(raw)
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Output is a drafter's answer: the reply, the fields it extracted and what
// produced them.
type Output struct {
	Text          string
	Fields        map[string]string // name, email, phone, intent, summary, confidence
	Drafter       string            // "template" or "openai"
	Model         string
	Template      string
	PromptVersion string
	InputHash     string
	Raw           string // the model's raw answer, or the rendered template
	PromptTokens  int64  // as the server reported them; 0 when it did not
	OutputTokens  int64
}
