package config

import (
	"go.yaml.in/yaml/v3"
)

// Canary (yaml drafter.canary) drafts a share of the new turns of the
// clients it names with a candidate version B of the drafter: its own
// prompt version, and any of a system prompt, a model or a template that
// differ from drafter's. Which arm drafts a turn is decided by the turn's
// first message alone, so a turn is never drafted by both; each draft
// records its arm. A person promotes B or rolls it back on the overview
// (kept in the store, so it outlives restarts and this file).
type Canary struct {
	PromptVersion string   // required; not drafter.prompt_version
	SystemPrompt  string   // optional: drafter.system_prompt's
	Model         string   // optional: drafter.model's
	Template      string   // optional: drafter.template's
	Share         float64  // the share of new turns drafted by B, above 0 and at most 1
	Clients       []string // the clients it runs for; empty: every client
}

// Runs says whether the canary drafts some of client's turns.
func (c *Canary) Runs(client string) bool {
	if c == nil {
		return false
	}
	if len(c.Clients) == 0 {
		return true
	}
	for _, id := range c.Clients {
		if id == client {
			return true
		}
	}
	return false
}

// Candidate is drafter dr as version B: dr with the canary's prompt
// version and whatever else it sets.
func (c *Canary) Candidate(dr Drafter) Drafter {
	dr.Canary = nil
	dr.PromptVersion = c.PromptVersion
	if c.SystemPrompt != "" {
		dr.SystemPrompt = c.SystemPrompt
		dr.ChannelPrompts = nil // B's prompt is the one being tried, on every channel
	}
	if c.Model != "" {
		dr.Model = c.Model
	}
	if c.Template != "" {
		dr.Template = c.Template
	}
	return dr
}

func (d *decoder) canary(path string, n *yaml.Node, dr *Drafter, cfg *Config) {
	c := &Canary{}
	set, ok := d.mapping(path, n, handlers{
		"prompt_version": func(p string, v *yaml.Node) { d.text(p, v, &c.PromptVersion) },
		"system_prompt":  func(p string, v *yaml.Node) { d.text(p, v, &c.SystemPrompt) },
		"model":          func(p string, v *yaml.Node) { d.text(p, v, &c.Model) },
		"template": func(p string, v *yaml.Node) {
			if d.text(p, v, &c.Template) {
				d.checkTemplate(p, v, c.Template)
			}
		},
		"share": func(p string, v *yaml.Node) {
			if d.amount(p, v, &c.Share) && (c.Share <= 0 || c.Share > 1) {
				d.fail(p, v, "must be above 0 and at most 1 (the share of new turns drafted by the candidate), not %s", v.Value)
			}
		},
		"clients": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, item *yaml.Node) {
				var id string
				if !d.text(p, item, &id) {
					return
				}
				c.Clients = append(c.Clients, id)
				d.later(func() {
					if _, ok := cfg.Client(id); !ok {
						d.fail(p, item, "client %q is not defined", id)
					}
				})
			})
		},
	})
	if !ok {
		return
	}
	if set["prompt_version"] == nil {
		d.fail(joinPath(path, "prompt_version"), n, "missing; the canary needs its own prompt version, so its drafts are counted apart")
	}
	if set["share"] == nil {
		d.fail(joinPath(path, "share"), n, "missing; say which share of new turns the candidate drafts (e.g. 0.1)")
	}
	d.later(func() {
		if c.PromptVersion != "" && c.PromptVersion == dr.PromptVersion {
			d.fail(joinPath(path, "prompt_version"), n, "%q is drafter.prompt_version too; the candidate needs a version of its own", c.PromptVersion)
		}
	})
	dr.Canary = c
}
