package config

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxFacts bounds a client's facts, from a facts file or edited on the
// dashboard: they go into every draft's prompt, and every token of them
// is paid for on every call.
const MaxFacts = 32 << 10

// amount decodes a non-negative number (a price, a budget).
func (d *decoder) amount(path string, n *yaml.Node, dst *float64) bool {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be a number, not %s", describe(n))
		return false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail(path, n, "%q is not a number", n.Value)
		return false
	}
	if v < 0 {
		d.fail(path, n, "must not be negative, not %s", n.Value)
		return false
	}
	*dst = v
	return true
}

// factsFile reads the facts file named at path into facts, so a missing or
// unreadable file stops the server at start rather than at the first draft.
func (d *decoder) factsFile(path string, n *yaml.Node, file, facts *string) {
	if !d.text(path, n, file) {
		return
	}
	text, err := ReadFacts(*file)
	if err != nil {
		d.fail(path, n, "%s", err.Error())
		return
	}
	*facts = text
}

// ReadFacts reads a facts file: at most MaxFacts bytes of UTF-8 text,
// returned without its surrounding blank space. The error is one sentence
// naming the file and its problem.
func ReadFacts(file string) (string, error) {
	data, err := os.ReadFile(file)
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read the facts file: %s", strings.TrimPrefix(err.Error(), "open "))
	case len(data) > MaxFacts:
		return "", fmt.Errorf("the facts file %s is %d bytes; at most %d go into a prompt", file, len(data), MaxFacts)
	case !utf8.Valid(data):
		return "", fmt.Errorf("the facts file %s is not UTF-8 text", file)
	}
	return strings.TrimSpace(string(data)), nil
}

// channelPrompts decodes drafter.channel_prompts, a mapping of channel
// names to system prompts; that every name is a channel is checked once
// the whole file is read.
func (d *decoder) channelPrompts(path string, n *yaml.Node, dst *map[string]string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "must be a mapping of channel names to prompts, not %s", describe(n))
		return
	}
	m := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var s string
		if d.text(joinPath(path, k.Value), v, &s) {
			m[k.Value] = s
		}
	}
	*dst = m
}

// checkChannelPrompts fails each drafter.channel_prompts key that names no channel.
func (d *decoder) checkChannelPrompts(c *Config, n *yaml.Node) {
	d.later(func() {
		for name := range c.Drafter.ChannelPrompts {
			if _, ok := c.Channel(name); !ok {
				d.fail("drafter.channel_prompts."+name, n, "%q is not a channel", name)
			}
		}
	})
}

// FactsFileOf is the facts file of a client and the text read from it at
// load: its clients[].facts_file, else drafter.facts_file; "" and "" when
// it has neither.
func (c *Config) FactsFileOf(client string) (path, text string) {
	if cl, ok := c.Client(client); ok && cl.FactsFile != "" {
		return cl.FactsFile, cl.Facts
	}
	return c.Drafter.FactsFile, c.Drafter.Facts
}

// BudgetOf is the daily drafting budget of a client: its
// clients[].daily_budget, else drafter.daily_budget; 0 is none.
func (c *Config) BudgetOf(client string) float64 {
	if cl, ok := c.Client(client); ok && cl.DailyBudget > 0 {
		return cl.DailyBudget
	}
	return c.Drafter.DailyBudget
}
