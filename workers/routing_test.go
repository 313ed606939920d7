package workers

import (
	"testing"

	"github.com/handoff/handoff/config"
)

// routingTestRules is a rule set in which the order matters: several rules
// can match the same message and only the first may decide.
func routingTestRules() config.Routing {
	return config.Routing{
		Version:      "r7",
		DefaultOwner: "sales",
		Rules: []config.Rule{
			{When: config.When{TextContains: "Refund"}, Owner: "billing"},                             // rules[0]
			{When: config.When{Intent: "support"}, Owner: "support"},                                  // rules[1]
			{When: config.When{Channel: "sms", Has: "phone"}, Owner: "phone-team"},                    // rules[2]
			{When: config.When{Channel: "web", Intent: "sales", Has: "email"}, Owner: "web-sales"},    // rules[3]
			{When: config.When{Has: "name"}, Owner: "named"},                                          // rules[4]
			{When: config.When{Has: "contact", TextContains: "urgent"}, Owner: "urgent-with-contact"}, // rules[5]
		},
	}
}

func TestRouterRoute(t *testing.T) {
	r := NewRouter(routingTestRules())
	tests := []struct {
		name    string
		channel string
		text    string
		fields  map[string]string
		owner   string
		rule    string
	}{
		{"nothing matches: default owner", "web", "hello", nil, "sales", "default"},
		{"empty fields map: default owner", "web", "hello", map[string]string{}, "sales", "default"},
		{"text_contains, same case", "web", "I want a Refund", nil, "billing", "rules[0]"},
		{"text_contains is case-insensitive (lower text)", "web", "i want a refund now", nil, "billing", "rules[0]"},
		{"text_contains is case-insensitive (upper text)", "web", "REFUND PLEASE", nil, "billing", "rules[0]"},
		{"text_contains matches inside a word", "web", "refunds?", nil, "billing", "rules[0]"},
		{"first matching rule wins over a later one", "web", "refund", map[string]string{"intent": "support", "name": "Ada"}, "billing", "rules[0]"},
		{"intent", "web", "my site is down", map[string]string{"intent": "support"}, "support", "rules[1]"},
		{"intent is case-insensitive", "web", "my site is down", map[string]string{"intent": "Support"}, "support", "rules[1]"},
		{"another intent does not match", "web", "hello", map[string]string{"intent": "spam"}, "sales", "default"},
		{"channel and has phone, both hold", "sms", "call me", map[string]string{"phone": "+15550001234"}, "phone-team", "rules[2]"},
		{"channel holds but no phone", "sms", "call me", map[string]string{}, "sales", "default"},
		{"has phone but another channel", "web", "call me", map[string]string{"phone": "+15550001234"}, "sales", "default"},
		{"channel is matched exactly", "SMS", "call me", map[string]string{"phone": "+15550001234"}, "sales", "default"},
		{"blank field is not present", "sms", "call me", map[string]string{"phone": "  "}, "sales", "default"},
		{"three conditions ANDed, all hold", "web", "quote", map[string]string{"intent": "sales", "email": "a@b.co"}, "web-sales", "rules[3]"},
		{"three conditions, intent fails", "web", "quote", map[string]string{"intent": "other", "email": "a@b.co"}, "sales", "default"},
		{"three conditions, email missing", "web", "quote", map[string]string{"intent": "sales"}, "sales", "default"},
		{"three conditions, channel fails", "form", "quote", map[string]string{"intent": "sales", "email": "a@b.co"}, "sales", "default"},
		{"has name", "web", "hi", map[string]string{"name": "Ada"}, "named", "rules[4]"},
		{"has contact with text, both hold", "web", "URGENT: call", map[string]string{"contact": "+15550001234"}, "urgent-with-contact", "rules[5]"},
		{"has contact but text does not hold", "web", "call", map[string]string{"contact": "+15550001234"}, "sales", "default"},
		{"text holds but no contact", "web", "urgent", map[string]string{}, "sales", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Route(tt.channel, tt.text, tt.fields)
			want := Decision{Owner: tt.owner, Version: "r7", Rule: tt.rule}
			if got != want {
				t.Errorf("Route(%q, %q, %v) = %+v, want %+v", tt.channel, tt.text, tt.fields, got, want)
			}
		})
	}
}

func TestRouterNoRules(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Routing
		want Decision
	}{
		{"defaults", config.Routing{Version: "r1", DefaultOwner: "sales"}, Decision{Owner: "sales", Version: "r1", Rule: "default"}},
		{"other version and owner", config.Routing{Version: "2026-11", DefaultOwner: "ops"}, Decision{Owner: "ops", Version: "2026-11", Rule: "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewRouter(tt.cfg).Route("web", "refund please", map[string]string{"intent": "support", "name": "Ada"})
			if got != tt.want {
				t.Errorf("Route = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRouterDeterministic: routing is a pure function of its inputs, so the
// decision recorded with a draft can be reproduced from the stored fields.
func TestRouterDeterministic(t *testing.T) {
	r := NewRouter(routingTestRules())
	inputs := []struct {
		channel, text string
		fields        map[string]string
	}{
		{"web", "hello", map[string]string{"intent": "sales", "email": "a@b.co", "name": "Ada", "contact": "x"}},
		{"sms", "urgent refund", map[string]string{"phone": "+15550001234", "intent": "support"}},
		{"form", "nothing", nil},
	}
	for _, in := range inputs {
		first := r.Route(in.channel, in.text, in.fields)
		for i := range 100 {
			if got := r.Route(in.channel, in.text, in.fields); got != first {
				t.Fatalf("call %d: Route(%q, %q, %v) = %+v, first call gave %+v", i, in.channel, in.text, in.fields, got, first)
			}
		}
		// A fresh router over the same rules decides the same.
		if got := NewRouter(routingTestRules()).Route(in.channel, in.text, in.fields); got != first {
			t.Errorf("a new router decided %+v, the first %+v", got, first)
		}
	}
}
