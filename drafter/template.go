package drafter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/template"
	"time"
)

// Template drafts from a text/template: no network, deterministic.
type Template struct {
	source        string
	tmpl          *template.Template
	promptVersion string
	delay         time.Duration
}

// NewTemplate parses src. delay, when set, makes every draft take that long
// (drills and crash tests use it to have jobs mid-run).
func NewTemplate(src, promptVersion string, delay time.Duration) (*Template, error) {
	t, err := parseTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("drafter: %w", err)
	}
	return &Template{source: src, tmpl: t, promptVersion: promptVersion, delay: delay}, nil
}

// CheckTemplate returns why src cannot be a reply template, or nil. The
// config package calls it, so that a bad drafter.template stops the server
// at start, by the very rule NewTemplate applies.
func CheckTemplate(src string) error {
	_, err := parseTemplate(src)
	return err
}

// parseTemplate's errors are text/template's, which start "template: ".
func parseTemplate(src string) (*template.Template, error) {
	t, err := template.New("reply").Option("missingkey=zero").Parse(src)
	if err != nil {
		return nil, err
	}
	// A misspelt field ({{.Nmae}}) only fails when executed: find out at start.
	if err := t.Execute(io.Discard, templateData{}); err != nil {
		return nil, err
	}
	return t, nil
}

// templateData is what the template can refer to.
type templateData struct {
	Name, Text, Contact, Channel, Owner, Email, Phone string
	Returning                                         bool
}

// Draft fills the template and extracts contact details from the text.
func (t *Template) Draft(ctx context.Context, in Input) (Output, error) {
	if t.delay > 0 {
		timer := time.NewTimer(t.delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return Output{}, ctx.Err()
		}
	}
	fields := Extract(in.Text)
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = "there"
	} else {
		fields["name"] = name
	}
	owner := in.Owner
	if owner == "" {
		owner = "our team"
	}
	var buf bytes.Buffer
	err := t.tmpl.Execute(&buf, templateData{
		Name: name, Text: in.Text, Contact: in.Contact, Channel: in.Channel, Owner: owner,
		Email: fields["email"], Phone: fields["phone"], Returning: len(in.History) > 0,
	})
	if err != nil {
		return Output{}, fmt.Errorf("drafter: render template: %w", err)
	}
	text := strings.TrimSpace(buf.String())
	return Output{
		Text: text, Fields: fields, Drafter: "template", Template: t.source,
		PromptVersion: t.promptVersion, InputHash: in.Hash(), Raw: text,
	}, nil
}

var (
	// An address as people write it in running text; the trailing dot of a sentence is not part of it.
	emailRe = regexp.MustCompile(`(?i)\b[a-z0-9][a-z0-9._%+\-]*@[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*\.[a-z]{2,}\b`)
	// A phone number: optional +country code, digits in groups separated by spaces, dots, dashes or brackets.
	phoneRe = regexp.MustCompile(`(?:\+|\b00)?\(?\d[\d\s().\-]{6,}\d`)
	// Dates look like numbers with separators too: 2026-11-29, 12.05.2024, 29/11/2026.
	dateRe = regexp.MustCompile(`^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})$`)
)

// Extract finds an email address and a phone number in free text. Phone
// numbers are returned with separators removed ("+44 20 7946 0958" ->
// "+442079460958") and must have 7 to 15 digits (E.164's limit).
func Extract(text string) map[string]string {
	fields := map[string]string{}
	if m := emailRe.FindString(text); m != "" {
		fields["email"] = strings.ToLower(m)
	}
	for _, m := range phoneRe.FindAllString(text, -1) {
		if p, ok := normalizePhone(m); ok {
			fields["phone"] = p
			break
		}
	}
	return fields
}

func normalizePhone(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if dateRe.MatchString(s) {
		return "", false
	}
	var b strings.Builder
	digits := 0
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
			digits++
		case r == '+' && i == 0:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if strings.HasPrefix(out, "00") {
		out = "+" + out[2:]
		digits -= 2
	}
	if digits < 7 || digits > 15 {
		return "", false
	}
	return out, true
}
