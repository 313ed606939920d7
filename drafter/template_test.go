package drafter

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"
)

const replyTemplate = "Hi {{.Name}}, thanks for your message. {{.Owner}} will get back to you shortly.{{if .Phone}} We will call {{.Phone}}.{{end}}"

func TestTemplateDraft(t *testing.T) {
	tests := []struct {
		name       string
		in         Input
		wantText   string
		wantFields map[string]string
	}{
		{
			name:       "with name",
			in:         Input{EventKey: "web:1", Channel: "web", Name: "Ada", Text: "Do you ship to Leeds?"},
			wantText:   "Hi Ada, thanks for your message. our team will get back to you shortly.",
			wantFields: map[string]string{"name": "Ada"},
		},
		{
			name:       "without name",
			in:         Input{EventKey: "web:2", Channel: "web", Text: "Do you ship to Leeds?"},
			wantText:   "Hi there, thanks for your message. our team will get back to you shortly.",
			wantFields: map[string]string{},
		},
		{
			name:       "blank name",
			in:         Input{EventKey: "web:3", Channel: "web", Name: "   ", Text: "hello"},
			wantText:   "Hi there, thanks for your message. our team will get back to you shortly.",
			wantFields: map[string]string{},
		},
		{
			name:       "name trimmed, owner and phone",
			in:         Input{EventKey: "web:4", Channel: "web", Name: "  Grace ", Owner: "sales", Text: "Call me on +44 20 7946 0958 or grace@example.com."},
			wantText:   "Hi Grace, thanks for your message. sales will get back to you shortly. We will call +442079460958.",
			wantFields: map[string]string{"name": "Grace", "phone": "+442079460958", "email": "grace@example.com"},
		},
	}
	tpl, err := NewTemplate(replyTemplate, "v1", 0)
	if err != nil {
		t.Fatalf("NewTemplate: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tpl.Draft(context.Background(), tt.in)
			if err != nil {
				t.Fatalf("Draft: %v", err)
			}
			if out.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", out.Text, tt.wantText)
			}
			if !maps.Equal(out.Fields, tt.wantFields) {
				t.Errorf("Fields = %v, want %v", out.Fields, tt.wantFields)
			}
			if out.Drafter != "template" || out.Template != replyTemplate || out.PromptVersion != "v1" || out.Raw != out.Text {
				t.Errorf("provenance = drafter %q template %q prompt %q raw %q, want template, the source, v1, the text",
					out.Drafter, out.Template, out.PromptVersion, out.Raw)
			}
			if out.InputHash != tt.in.Hash() || len(out.InputHash) != 64 {
				t.Errorf("InputHash = %q, want the input's hash %q", out.InputHash, tt.in.Hash())
			}
			again, err := tpl.Draft(context.Background(), tt.in)
			if err != nil || again.Text != out.Text || again.InputHash != out.InputHash {
				t.Errorf("second Draft = %q %s %v, want the same output", again.Text, again.InputHash, err)
			}
		})
	}
}

func TestInputHashDependsOnInput(t *testing.T) {
	a := Input{EventKey: "web:1", Text: "hello"}
	b := a
	b.Text = "hello!"
	c := a
	c.CorrelationID = "corr-1" // not part of the hashed input
	if a.Hash() == b.Hash() {
		t.Errorf("Hash of different texts is the same: %s", a.Hash())
	}
	if a.Hash() != c.Hash() {
		t.Errorf("Hash changed with CorrelationID: %s vs %s", a.Hash(), c.Hash())
	}
}

func TestNewTemplateRejectsBadTemplates(t *testing.T) {
	for _, src := range []string{"Hi {{.Name", "Hi {{.Nmae}}", "{{template \"nope\"}}"} {
		t.Run(src, func(t *testing.T) {
			if _, err := NewTemplate(src, "v1", 0); err == nil {
				t.Errorf("NewTemplate(%q) = nil error, want one", src)
			}
			if err := CheckTemplate(src); err == nil {
				t.Errorf("CheckTemplate(%q) = nil, want the error NewTemplate gives", src)
			}
		})
	}
}

func TestCheckTemplateAcceptsEveryField(t *testing.T) {
	src := replyTemplate + "{{.Text}}{{.Contact}}{{.Channel}}{{.Email}}{{if .Returning}}again{{end}}"
	if err := CheckTemplate(src); err != nil {
		t.Errorf("CheckTemplate: %v; want nil", err)
	}
}

func TestTemplateDelayEndsWithContext(t *testing.T) {
	tpl, err := NewTemplate("Hi {{.Name}}", "v1", time.Hour)
	if err != nil {
		t.Fatalf("NewTemplate: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tpl.Draft(ctx, Input{Text: "hi"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "canceled") {
			t.Errorf("Draft with a cancelled context = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Draft did not return within 10s of its context ending (delay 1h)")
	}
}

func TestExtract(t *testing.T) {
	tests := []struct {
		name, text   string
		email, phone string // "" means the field must be absent
	}{
		// Phones as people write them.
		{"UK international", "Please call me on +44 20 7946 0958 tomorrow.", "", "+442079460958"},
		{"US brackets", "my cell is (555) 123-4567", "", "5551234567"},
		{"US dashes", "Reach me at +1-555-123-4567!", "", "+15551234567"},
		{"00 prefix", "Tel. 0049 30 1234567", "", "+49301234567"},
		{"French pairs", "Numéro: +33 1 23 45 67 89", "", "+33123456789"},
		{"national UK", "ring 020 7946 0958 after 5", "", "02079460958"},
		// Emails in running text.
		{"trailing period", "You can write to ada.l@example.co.uk.", "ada.l@example.co.uk", ""},
		{"uppercase", "EMAIL: ADA.LOVELACE@EXAMPLE.COM", "ada.lovelace@example.com", ""},
		{"in brackets", "Ada (ada+leads@example.org) asked", "ada+leads@example.org", ""},
		{"both", "I'm Ada, ada@example.com, +44 20 7946 0958.", "ada@example.com", "+442079460958"},
		// Not phones, not emails.
		{"ISO date", "Can we meet on 2026-11-29?", "", ""},
		{"dotted date", "I placed it on 12.05.2024 and nothing came", "", ""},
		{"slashed date", "delivery 29/11/2026 please", "", ""},
		{"order number", "about order #12345", "", ""},
		{"too long", "tracking 1234567890123456789", "", ""},
		{"no domain dot", "x@y", "", ""},
		{"bare at", "meet @ 5pm", "", ""},
		{"date then phone", "Order of 2026-11-29: call +44 20 7946 0958", "", "+442079460958"},
		{"empty", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Extract(tt.text)
			if got == nil {
				t.Fatalf("Extract(%q) = nil map", tt.text)
			}
			if email, ok := got["email"]; email != tt.email || ok != (tt.email != "") {
				t.Errorf("Extract(%q) email = %q (present %v), want %q", tt.text, email, ok, tt.email)
			}
			if phone, ok := got["phone"]; phone != tt.phone || ok != (tt.phone != "") {
				t.Errorf("Extract(%q) phone = %q (present %v), want %q", tt.text, phone, ok, tt.phone)
			}
		})
	}
}
