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
	EventKey       string `json:"event_key"`
	Channel        string `json:"channel"`
	ConversationID string `json:"conversation_id"`
	Contact        string `json:"contact,omitempty"`
	Name           string `json:"name,omitempty"`
	// Text is the turn's messages, one after another: what the reply answers.
	Text string `json:"text"`
	// Messages are the turn's messages one by one when it has more than one
	// (a burst: "hi" / "can I book for Friday" / "4 people").
	Messages []string `json:"messages,omitempty"`
	Owner    string   `json:"owner,omitempty"`
	// Instruction is what a person asked of this draft when they had it
	// drafted again ("shorter", "mention the Friday slot").
	Instruction string    `json:"instruction,omitempty"`
	History     []Message `json:"history,omitempty"`
	// Facts are the client's facts the draft is written from (nil: it has
	// none); the model is asked to cite the entries it uses.
	Facts *Facts `json:"facts,omitempty"`
	// CorrelationID is sent as X-Correlation-ID; it is not part of the hashed input.
	CorrelationID string `json:"-"`
}

// Facts are one version of a client's facts, entry by entry.
type Facts struct {
	Version int    `json:"version"`
	Entries []Fact `json:"entries"`
}

// Fact is one entry of the facts: the id a reply cites it by ("F3") and its text.
type Fact struct {
	ID   string `json:"id"`
	Text string `json:"text"`
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
	// PromptHash is the sha256 of the system prompt sent (facts included);
	// FactsHash the client's facts alone ("" when it has none).
	PromptHash, FactsHash string
	// FactsVersion is the facts version the prompt gave (0: none), Cited
	// the entries of it the reply cites, in the order it first cites them;
	// the marks themselves are taken out of Text.
	FactsVersion int
	Cited        []Fact
	// Structured is how the answer's shape was asked for (drafter.structured).
	Structured string
	// Cost is the call's price (drafter.price × tokens), in Currency.
	Cost     float64
	Currency string
	// Notes say what handoff did to the answer: a field dropped for
	// breaking its rule, a plain-text answer taken as the reply.
	Notes []string
}
