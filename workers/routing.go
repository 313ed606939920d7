package workers

import (
	"fmt"
	"strings"

	"github.com/handoff/handoff/config"
)

// Router picks a lead's owner from the first matching rule. It is a pure
// function of its inputs: the same stored fields always give the same owner.
type Router struct {
	cfg config.Routing
}

// NewRouter returns a router over the configured rules.
func NewRouter(cfg config.Routing) Router { return Router{cfg: cfg} }

// Decision is a routing outcome and why.
type Decision struct {
	Owner   string
	Version string
	Rule    string // "rules[2]" or "default"
}

// Route decides the owner of a message on channel with text and validated fields.
func (r Router) Route(channel, text string, fields map[string]string) Decision {
	for i, rule := range r.cfg.Rules {
		if matches(rule.When, channel, text, fields) {
			return Decision{Owner: rule.Owner, Version: r.cfg.Version, Rule: fmt.Sprintf("rules[%d]", i)}
		}
	}
	return Decision{Owner: r.cfg.DefaultOwner, Version: r.cfg.Version, Rule: "default"}
}

// matches reports whether every condition that w sets holds.
func matches(w config.When, channel, text string, fields map[string]string) bool {
	if w.TextContains != "" && !strings.Contains(strings.ToLower(text), strings.ToLower(w.TextContains)) {
		return false
	}
	if w.Intent != "" && !strings.EqualFold(fields["intent"], w.Intent) {
		return false
	}
	if w.Channel != "" && w.Channel != channel {
		return false
	}
	if w.Has != "" && strings.TrimSpace(fields[w.Has]) == "" {
		return false
	}
	return true
}
