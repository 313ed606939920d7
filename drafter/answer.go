package drafter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The rules of an answer that no model server can be relied on to enforce.
// OpenAI's strict structured outputs reject minLength, maxLength and (for
// most models) pattern; llama.cpp's grammar converter (Ollama, LM Studio's
// llama.cpp engine) wants every pattern anchored and reads inner anchors as
// literals; vLLM's xgrammar refuses pattern together with a length bound.
// So schema.json says only types, and handoff checks the rest here, after
// the answer, whatever the server claims to have enforced (README, "What
// each model server supports").
const (
	maxReply   = 4000
	maxName    = 200
	maxEmail   = 254
	maxPhone   = 32
	maxSummary = 500
)

var (
	intentRe = regexp.MustCompile(`^[a-z][a-z_-]{0,31}$`)
	emailAns = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
	phoneAns = regexp.MustCompile(`^\+?[0-9 ().-]{7,31}$`)
	// fenceRe is one markdown code fence: its opening line (``` and an
	// optional language tag), then its body up to the closing ``` or, for
	// an answer cut short, the end.
	fenceRe = regexp.MustCompile("(?s)```[a-zA-Z0-9_+-]*[ \t]*\r?\n(.*?)(?:```|\\z)")
	// jsonKeyRe is the start of a JSON object: an opening brace and a key.
	jsonKeyRe = regexp.MustCompile(`\{\s*"[^"\n]*"\s*:`)
)

// optionalKeys are the answer's keys besides reply, in the order notes name them.
var optionalKeys = []string{"intent", "name", "email", "phone", "summary", "confidence"}

// answer is a checked model answer: the reply, the fields that passed
// their rule, and a note for each one that did not.
type answer struct {
	Reply  string
	Fields map[string]string
	Notes  []string
}

// unfence returns the JSON object inside the first markdown code fence
// (```json … ```) that holds one, wherever it stands: models add fences
// even when told not to, and a line before or after them ("Here is the
// JSON:"). Without such a fence it returns raw, trimmed.
func unfence(raw string) string {
	s := strings.TrimSpace(raw)
	for _, m := range fenceRe.FindAllStringSubmatch(s, -1) {
		if body := strings.TrimSpace(m[1]); strings.HasPrefix(body, "{") {
			return body
		}
	}
	return s
}

// prose returns the answer as a plain-text reply, or false when it looks
// like JSON or code (a brace and a key, an opening bracket, a code fence):
// such an answer is a broken JSON answer, never a message to send the
// customer. One fence around the whole answer is taken off first.
func prose(raw string) (string, bool) {
	s := strings.TrimSpace(raw)
	if m := fenceRe.FindStringSubmatchIndex(s); m != nil && m[0] == 0 && m[1] == len(s) {
		s = strings.TrimSpace(s[m[2]:m[3]])
	}
	if s == "" || strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") ||
		strings.Contains(s, "```") || jsonKeyRe.MatchString(s) {
		return "", false
	}
	return s, true
}

// parseAnswer reads the model's JSON answer. Only the reply is required: a
// reply that is missing, not a string or blank makes the answer invalid. An
// optional field that is missing or null is left empty; one that breaks its
// rule is dropped with a note, never taking the good reply with it.
func parseAnswer(raw string) (answer, error) {
	s := unfence(raw)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return answer{}, fmt.Errorf("not JSON: %w", err)
		}
		return answer{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if obj == nil {
		return answer{}, errors.New("not a JSON object: null")
	}
	var a answer
	rawReply, ok := obj["reply"]
	if !ok {
		return answer{}, errors.New(`breaks the schema: the answer has no "reply"`)
	}
	if err := json.Unmarshal(rawReply, &a.Reply); err != nil || string(rawReply) == "null" {
		return answer{}, fmt.Errorf(`breaks the schema: "reply" is %s, not a string`, clip(string(rawReply)))
	}
	a.Reply = strings.TrimSpace(a.Reply)
	if a.Reply == "" {
		return answer{}, errors.New(`breaks the schema: "reply" is blank`)
	}
	if n := utf8.RuneCountInString(a.Reply); n > maxReply {
		return answer{}, fmt.Errorf(`breaks the schema: "reply" is %d characters, more than %d`, n, maxReply)
	}
	a.Fields = map[string]string{}
	for _, k := range optionalKeys {
		v, ok := obj[k]
		if !ok || string(v) == "null" {
			continue
		}
		val, err := checkField(k, v)
		if err != nil {
			a.Notes = append(a.Notes, fmt.Sprintf("%s dropped: %s", k, err))
			continue
		}
		if val != "" {
			a.Fields[k] = val
		}
	}
	for k := range obj {
		if k != "reply" && !isOptional(k) {
			a.Notes = append(a.Notes, fmt.Sprintf("%s ignored: not a key of the answer", clip(k)))
		}
	}
	return a, nil
}

func isOptional(k string) bool {
	for _, o := range optionalKeys {
		if o == k {
			return true
		}
	}
	return false
}

// checkField returns field k's stored value, or why it breaks its rule.
func checkField(k string, v json.RawMessage) (string, error) {
	if k == "confidence" {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return "", fmt.Errorf("%s is not a number", clip(string(v)))
		}
		if math.IsNaN(f) || f < 0 || f > 1 {
			return "", fmt.Errorf("%s is not between 0 and 1", clip(string(v)))
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", clip(string(v)))
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	limit := map[string]int{"name": maxName, "email": maxEmail, "phone": maxPhone, "summary": maxSummary, "intent": 32}[k]
	if n := utf8.RuneCountInString(s); n > limit {
		return "", fmt.Errorf("%d characters, more than %d", n, limit)
	}
	switch k {
	case "intent":
		if !intentRe.MatchString(s) {
			return "", fmt.Errorf("%q is not one lowercase word", s)
		}
	case "email":
		if !emailAns.MatchString(s) {
			return "", fmt.Errorf("%q is not an email address", s)
		}
		s = strings.ToLower(s)
	case "phone":
		if !phoneAns.MatchString(s) {
			return "", fmt.Errorf("%q is not a phone number", s)
		}
		if p, ok := normalizePhone(s); ok {
			s = p // the same form the template drafter stores
		}
	}
	return s, nil
}

// clip shortens a value quoted in a note.
func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
