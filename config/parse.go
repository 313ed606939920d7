package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/webhook"
)

// Parse validates YAML bytes (getenv resolves *_env keys; pass os.Getenv in production, a map in tests).
// A nil getenv means an empty environment. Empty data returns Default().
func Parse(data []byte, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Default(), nil
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil && !isNull(resolve(documentRoot(&next))):
		return nil, fmt.Errorf("config: line %d: the file holds more than one YAML document (separated by ---); keep one", next.Line)
	case err != nil && !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("config: %w", err)
	}
	root := resolve(documentRoot(&doc))
	if isNull(root) {
		return Default(), nil
	}

	d := &decoder{getenv: getenv}
	c := d.config(root)
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

func documentRoot(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0]
	}
	return doc
}

func (d *decoder) config(n *yaml.Node) *Config {
	c := defaults()
	channelNames := make(map[string]bool)
	providerNames := map[string]bool{sandboxProvider: true}
	clientIDs := make(map[string]bool)
	var channelNodes []*yaml.Node // each channel's item, for channelClients
	d.mapping("", n, handlers{
		"addr": func(p string, v *yaml.Node) {
			if d.str(p, v, &c.Addr) {
				if err := checkAddr(c.Addr); err != nil {
					d.fail(p, v, "%v", err)
				}
			}
		},
		"data_dir":        func(p string, v *yaml.Node) { d.text(p, v, &c.DataDir) },
		"database_url":    func(p string, v *yaml.Node) { d.text(p, v, &c.DatabaseURL) },
		"trusted_proxies": func(p string, v *yaml.Node) { d.trustedProxies(p, v, &c.TrustedProxies) },
		"proxy_header":    func(p string, v *yaml.Node) { d.proxyHeader(p, v, &c.ProxyHeader) },
		"metrics_addr": func(p string, v *yaml.Node) {
			if d.str(p, v, &c.MetricsAddr) {
				if err := checkAddr(c.MetricsAddr); err != nil {
					d.fail(p, v, "%v", err)
				}
			}
		},
		"base_url": func(p string, v *yaml.Node) { d.url(p, v, &c.BaseURL) },
		"workers":  func(p string, v *yaml.Node) { d.intIn(p, v, &c.Workers, 1, 256) },
		"draft_workers": func(p string, v *yaml.Node) {
			d.intIn(p, v, &c.DraftWorkers, 1, 256)
		},
		"undo_window": func(p string, v *yaml.Node) {
			if d.duration(p, v, &c.UndoWindow, true) && c.UndoWindow > MaxUndoWindow {
				d.fail(p, v, "%s is longer than %s; an approved reply waits this long before it is sent", v.Value, fmtDuration(MaxUndoWindow))
			}
		},
		"channels": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, item *yaml.Node) {
				if ch, ok := d.channel(p, item, channelNames, providerNames); ok {
					c.Channels = append(c.Channels, ch)
					channelNodes = append(channelNodes, item)
				}
			})
		},
		"clients":   func(p string, v *yaml.Node) { d.clients(p, v, &c.Clients, clientIDs) },
		"digests":   func(p string, v *yaml.Node) { d.digests(p, v, c, providerNames) },
		"crm":       func(p string, v *yaml.Node) { d.crm(p, v, c) },
		"events":    func(p string, v *yaml.Node) { d.events(p, v, c) },
		"approvals": func(p string, v *yaml.Node) { d.approvals(p, v, c) },
		"review":    func(p string, v *yaml.Node) { d.review(p, v, &c.Review) },
		"drafter": func(p string, v *yaml.Node) {
			d.drafter(p, v, &c.Drafter, c)
			d.checkChannelPrompts(c, v)
		},
		"routing":   func(p string, v *yaml.Node) { d.routing(p, v, &c.Routing, channelNames) },
		"providers": func(p string, v *yaml.Node) { c.Providers = d.providers(p, v, providerNames) },
		"retry":     func(p string, v *yaml.Node) { d.retry(p, v, &c.Retry) },
		"stuck": func(p string, v *yaml.Node) {
			d.mapping(p, v, handlers{
				"received": func(p string, v *yaml.Node) { d.duration(p, v, &c.Stuck.Received, false) },
				"matched":  func(p string, v *yaml.Node) { d.duration(p, v, &c.Stuck.Matched, false) },
				"owned":    func(p string, v *yaml.Node) { d.duration(p, v, &c.Stuck.Owned, false) },
				"alert": func(p string, v *yaml.Node) {
					if !d.text(p, v, &c.Stuck.Alert) {
						return
					}
					name := c.Stuck.Alert
					d.later(func() {
						if !providerNames[name] {
							d.fail(p, v, "provider %q is not defined (define it under providers, e.g. an http provider pointing at a Slack-compatible webhook)", name)
						}
					})
				},
			})
		},
		"backups": func(p string, v *yaml.Node) { d.backups(p, v, &c.Backups) },
		"limits":  func(p string, v *yaml.Node) { d.limits(p, v, &c.Limits) },
		"retention": func(p string, v *yaml.Node) {
			d.mapping(p, v, handlers{
				"events": func(p string, v *yaml.Node) { d.duration(p, v, &c.Retention.Events, false) },
				"keys":   func(p string, v *yaml.Node) { d.duration(p, v, &c.Retention.Keys, false) },
			})
		},
		"auth": func(p string, v *yaml.Node) {
			d.mapping(p, v, handlers{
				"require_totp_for_admins": func(p string, v *yaml.Node) { d.boolean(p, v, &c.Auth.RequireTOTPForAdmins) },
				"secret_key_env": func(p string, v *yaml.Node) {
					if d.envName(p, v, &c.Auth.SecretKeyEnv) {
						c.Auth.SecretKey, _ = d.secretFromEnv(p, v, c.Auth.SecretKeyEnv)
					}
				},
			})
		},
	})
	if len(c.Channels) == 0 {
		// The checks queued by routing rules read channelNames, so the demo
		// channel has to be known there too.
		c.Channels = []Channel{demoChannel()}
		channelNames[c.Channels[0].Name] = true
	}
	d.channelClients(c, channelNodes)
	return c
}

// url decodes an optional absolute http(s) URL, dropping a trailing slash so
// that callers can append paths.
func (d *decoder) url(path string, n *yaml.Node, dst *string) bool {
	var s string
	if !d.str(path, n, &s) {
		return false
	}
	if err := checkHTTPURL(s); err != nil {
		d.fail(path, n, "%v", err)
		return false
	}
	*dst = strings.TrimRight(s, "/")
	return true
}

// envName decodes the name of an environment variable.
func (d *decoder) envName(path string, n *yaml.Node, dst *string) bool {
	var s string
	if !d.str(path, n, &s) {
		return false
	}
	if !validEnvName(s) {
		// Never repeat it: a secret pasted here instead of its variable's
		// name would land in the startup error and the logs.
		d.fail(path, n, "is not an environment variable name (%d characters; use letters, digits and _, e.g. WEB_SECRET, and put the secret itself in that variable)", len(s))
		return false
	}
	*dst = s
	return true
}

// secretFromEnv resolves the variable named at path; unset or empty is an error.
func (d *decoder) secretFromEnv(path string, n *yaml.Node, name string) (string, bool) {
	v := d.getenv(name)
	if v == "" {
		d.fail(path, n, "%s is not set or is empty", envLabel(name))
		return "", false
	}
	return v, true
}

func (d *decoder) channel(path string, n *yaml.Node, names, providers map[string]bool) (Channel, bool) {
	ch := newChannel()
	preset := d.presetOf(n)
	applyPreset(&ch, preset)
	hs := handlers{
		"name": func(p string, v *yaml.Node) {
			if !d.str(p, v, &ch.Name) {
				return
			}
			switch {
			case !validName(ch.Name):
				d.fail(p, v, "%q is not a valid channel name (use 1 to 64 lowercase letters, digits and -)", ch.Name)
			case names[ch.Name]:
				d.fail(p, v, "duplicate channel name %q", ch.Name)
			default:
				names[ch.Name] = true
			}
		},
		"signature": func(p string, v *yaml.Node) { ch.Signature = d.signature(p, v, preset) },
		"fields": func(p string, v *yaml.Node) {
			if fs, ok := d.fields(p, v, &ch.Fields); ok && fs["message_id"] == nil && len(preset.Fields.MessageID) == 0 {
				d.fail(joinPath(p, "message_id"), v, "%s", missingMessageID)
			}
		},
		"provider": func(p string, v *yaml.Node) {
			if !d.text(p, v, &ch.Provider) {
				return
			}
			name := ch.Provider
			d.later(func() {
				if !providers[name] {
					d.fail(p, v, "provider %q is not defined (define it under providers, or use sandbox)", name)
				}
			})
		},
		"auto_approve": func(p string, v *yaml.Node) { d.boolean(p, v, &ch.AutoApprove) },
		"client":       func(p string, v *yaml.Node) { d.text(p, v, &ch.Client) },
		"coalesce": func(p string, v *yaml.Node) {
			if d.duration(p, v, &ch.Coalesce, true) && ch.Coalesce > time.Hour {
				d.fail(p, v, "%s is longer than the 1h a lead may wait for its draft", v.Value)
			}
		},
		"max_body": func(p string, v *yaml.Node) {
			size, ok := d.integer(p, v)
			if ok && size <= 0 {
				d.fail(p, v, "must be a positive number of bytes, not %d", size)
			} else if ok {
				ch.MaxBody = size
			}
		},
	}
	d.inboundHandlers(&ch, hs)
	set, ok := d.mapping(path, n, hs)
	if !ok {
		return ch, false
	}
	d.signedFields(path, ch, set["fields"])
	if v := set["auto_approve"]; ch.AutoApprove && ch.Signature != nil && !hook.SignsBody(ch.Signature.Scheme) {
		// One captured credential would let anyone choose the message, and
		// the reply would go out with no person in between.
		d.fail(joinPath(path, "auto_approve"), v, "a %s signature does not cover the body, so whoever captured one request could send any message and have its reply sent unreviewed; use a scheme that signs the body or turn auto_approve off", ch.Signature.Scheme)
	}
	if set["name"] == nil {
		d.fail(joinPath(path, "name"), n, "missing; every channel needs a name ([a-z0-9-]+)")
	}
	if set["fields"] == nil && len(preset.Fields.MessageID) == 0 {
		d.fail(joinPath(path, "fields.message_id"), n, "%s", missingMessageID)
	}
	return ch, true
}

const missingMessageID = "missing; every channel needs the JSON pointer of the provider's message id (e.g. /id), or a list of them"

func (d *decoder) fields(path string, n *yaml.Node, f *Fields) (map[string]*yaml.Node, bool) {
	// An explicit "" is allowed and means the field is not read.
	source := func(p string, v *yaml.Node, dst *string) {
		var s string
		if !d.str(p, v, &s) {
			return
		}
		if err := hook.ValidateSource(s); err != nil {
			d.fail(p, v, "%v", err)
			return
		}
		*dst = s
	}
	// The message id cannot be left out, so its sources must not be empty.
	idSource := func(p string, v *yaml.Node) (string, bool) {
		var s string
		if !d.text(p, v, &s) {
			return "", false
		}
		if err := hook.ValidateSource(s); err != nil {
			d.fail(p, v, "%v", err)
			return "", false
		}
		return s, true
	}
	return d.mapping(path, n, handlers{
		"message_id": func(p string, v *yaml.Node) {
			// A single source, or a list of them that makes a composite id.
			if v.Kind == yaml.ScalarNode {
				if s, ok := idSource(p, v); ok {
					f.MessageID = []string{s}
				}
				return
			}
			var ids []string
			if !d.list(p, v, func(p string, item *yaml.Node) {
				if s, ok := idSource(p, item); ok {
					ids = append(ids, s)
				}
			}) {
				return
			}
			if len(v.Content) == 0 {
				d.fail(p, v, "must list at least one source (e.g. [/tenant, /id])")
			}
			f.MessageID = ids
		},
		"conversation_id": func(p string, v *yaml.Node) { source(p, v, &f.ConversationID) },
		"contact":         func(p string, v *yaml.Node) { source(p, v, &f.Contact) },
		"name":            func(p string, v *yaml.Node) { source(p, v, &f.Name) },
		"text":            func(p string, v *yaml.Node) { source(p, v, &f.Text) },
		"subject":         func(p string, v *yaml.Node) { source(p, v, &f.Subject) },
	})
}

// checkTemplate is the drafter's own check of a template: it also catches
// a misspelt field ({{.Nmae}}), which parses and only fails when executed.
func (d *decoder) checkTemplate(p string, v *yaml.Node, text string) {
	if err := drafter.CheckTemplate(text); err != nil {
		d.fail(p, v, "not a valid text/template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
}

func (d *decoder) drafter(path string, n *yaml.Node, dr *Drafter, cfg *Config) {
	set, ok := d.mapping(path, n, handlers{
		"kind":     func(p string, v *yaml.Node) { d.oneOf(p, v, &dr.Kind, "a drafter kind", "template", "openai") },
		"base_url": func(p string, v *yaml.Node) { d.url(p, v, &dr.BaseURL) },
		"model":    func(p string, v *yaml.Node) { d.text(p, v, &dr.Model) },
		"api_key_env": func(p string, v *yaml.Node) {
			// An unset key is only a warning: local servers often need none.
			if d.envName(p, v, &dr.APIKeyEnv) {
				dr.APIKey = d.getenv(dr.APIKeyEnv)
			}
		},
		"prompt_version": func(p string, v *yaml.Node) { d.text(p, v, &dr.PromptVersion) },
		"system_prompt":  func(p string, v *yaml.Node) { d.str(p, v, &dr.SystemPrompt) },
		"template": func(p string, v *yaml.Node) {
			if d.text(p, v, &dr.Template) {
				d.checkTemplate(p, v, dr.Template)
			}
		},
		"canary":  func(p string, v *yaml.Node) { d.canary(p, v, dr, cfg) },
		"timeout": func(p string, v *yaml.Node) { d.duration(p, v, &dr.Timeout, false) },
		"delay":   func(p string, v *yaml.Node) { d.duration(p, v, &dr.Delay, true) },
		"structured": func(p string, v *yaml.Node) {
			d.oneOf(p, v, &dr.Structured, "a structured-output mode", "json_schema", "json_object", "none")
		},
		"channel_prompts": func(p string, v *yaml.Node) {
			d.channelPrompts(p, v, &dr.ChannelPrompts)
		},
		"facts_file":     func(p string, v *yaml.Node) { d.factsFile(p, v, &dr.FactsFile, &dr.Facts) },
		"daily_budget":   func(p string, v *yaml.Node) { d.amount(p, v, &dr.DailyBudget) },
		"context_tokens": func(p string, v *yaml.Node) { d.intIn(p, v, &dr.ContextTokens, 0, 100000) },
		"price": func(p string, v *yaml.Node) {
			d.mapping(p, v, handlers{
				"input":    func(p string, v *yaml.Node) { d.amount(p, v, &dr.Price.Input) },
				"output":   func(p string, v *yaml.Node) { d.amount(p, v, &dr.Price.Output) },
				"currency": func(p string, v *yaml.Node) { d.text(p, v, &dr.Price.Currency) },
			})
		},
	})
	if !ok || dr.Kind != "openai" {
		return
	}
	if set["base_url"] == nil {
		d.fail(joinPath(path, "base_url"), n, "missing; the openai drafter needs the endpoint's base URL (e.g. http://127.0.0.1:11434/v1)")
	}
	if set["model"] == nil {
		d.fail(joinPath(path, "model"), n, "missing; the openai drafter needs a model name")
	}
}

func (d *decoder) routing(path string, n *yaml.Node, r *Routing, channels map[string]bool) {
	d.mapping(path, n, handlers{
		"version":       func(p string, v *yaml.Node) { d.text(p, v, &r.Version) },
		"default_owner": func(p string, v *yaml.Node) { d.text(p, v, &r.DefaultOwner) },
		"rules": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, item *yaml.Node) {
				if rule, ok := d.rule(p, item, channels); ok {
					r.Rules = append(r.Rules, rule)
				}
			})
		},
	})
}

func (d *decoder) rule(path string, n *yaml.Node, channels map[string]bool) (Rule, bool) {
	var r Rule
	set, ok := d.mapping(path, n, handlers{
		"when": func(p string, v *yaml.Node) {
			w := &r.When
			d.mapping(p, v, handlers{
				"text_contains": func(p string, v *yaml.Node) { d.text(p, v, &w.TextContains) },
				"intent":        func(p string, v *yaml.Node) { d.text(p, v, &w.Intent) },
				"has": func(p string, v *yaml.Node) {
					d.oneOf(p, v, &w.Has, "a field name", "name", "email", "phone", "contact")
				},
				"channel": func(p string, v *yaml.Node) {
					if !d.text(p, v, &w.Channel) {
						return
					}
					name := w.Channel
					d.later(func() {
						if !channels[name] {
							d.fail(p, v, "channel %q is not defined", name)
						}
					})
				},
			})
		},
		"owner": func(p string, v *yaml.Node) { d.text(p, v, &r.Owner) },
	})
	if !ok {
		return r, false
	}
	if set["owner"] == nil {
		d.fail(joinPath(path, "owner"), n, "missing; every rule needs an owner")
	}
	// Complain about an empty when only if nothing at all was written in
	// it: a bad or unknown condition has had its own message.
	if w := set["when"]; w == nil || (w.Kind == yaml.MappingNode && !anyValue(w)) {
		at := n
		if w != nil {
			at = w
		}
		d.fail(joinPath(path, "when"), at, "needs at least one condition (text_contains, intent, channel or has)")
	}
	return r, true
}

// anyValue reports whether the mapping n holds a key with a non-null value.
func anyValue(n *yaml.Node) bool {
	for i := 1; i < len(n.Content); i += 2 {
		if !isNull(resolve(n.Content[i])) {
			return true
		}
	}
	return false
}

func (d *decoder) providers(path string, n *yaml.Node, names map[string]bool) []Provider {
	var ps []Provider
	d.list(path, n, func(path string, n *yaml.Node) {
		p := Provider{Timeout: providerTimeout}
		read := map[string]bool{}
		set, ok := d.mapping(path, n, d.reading(read, d.providerKindHandlers(&p, handlers{
			"name": func(k string, v *yaml.Node) {
				if !d.str(k, v, &p.Name) {
					return
				}
				switch {
				case p.Name == sandboxProvider:
					d.fail(k, v, "%q is the built-in provider and cannot be redefined; pick another name", p.Name)
				case !validName(p.Name):
					d.fail(k, v, "%q is not a valid provider name (use 1 to 64 lowercase letters, digits and -)", p.Name)
				case names[p.Name]:
					d.fail(k, v, "duplicate provider name %q", p.Name)
				default:
					names[p.Name] = true
				}
			},
			"kind": func(k string, v *yaml.Node) { d.oneOf(k, v, &p.Kind, "a provider kind", kinds.Names()...) },
			"url":  func(k string, v *yaml.Node) { d.url(k, v, &p.URL) },
			"signing_secret_env": func(k string, v *yaml.Node) {
				if !d.envName(k, v, &p.SigningSecretEnv) {
					return
				}
				secret, ok := d.secretFromEnv(k, v, p.SigningSecretEnv)
				if !ok {
					return
				}
				if err := webhook.ValidateSecret(secret); err != nil {
					d.fail(k, v, "%v", err)
					return
				}
				p.SigningSecret = secret
			},
			"supports_idempotency_key": func(k string, v *yaml.Node) { d.boolean(k, v, &p.SupportsIdempotencyKey) },
			"lookup_url": func(k string, v *yaml.Node) {
				var s string
				if !d.str(k, v, &s) {
					return
				}
				if !strings.Contains(s, "{ref}") {
					d.fail(k, v, "%q has no {ref} placeholder for our reference (e.g. https://crm.example.com/messages?client_ref={ref})", redactURL(s))
					return
				}
				if err := checkHTTPURL(strings.ReplaceAll(s, "{ref}", "ref")); err != nil {
					d.fail(k, v, "%q is not an absolute http or https URL", redactURL(s))
					return
				}
				p.LookupURL = s
			},
			"timeout":              func(k string, v *yaml.Node) { d.duration(k, v, &p.Timeout, false) },
			"lookup_settle":        func(k string, v *yaml.Node) { d.duration(k, v, &p.LookupSettle, true) },
			"fail":                 func(k string, v *yaml.Node) { d.oneOf(k, v, &p.Fail, "a failure kind", "permanent", "ambiguous") },
			"fail_first":           func(k string, v *yaml.Node) { d.intIn(k, v, &p.FailFirst, 0, 1000) },
			"timeout_after_accept": func(k string, v *yaml.Node) { d.boolean(k, v, &p.TimeoutAfterAccept) },
			"delay":                func(k string, v *yaml.Node) { d.duration(k, v, &p.Delay, true) },
			"lookup": func(k string, v *yaml.Node) {
				lookup := true
				if d.boolean(k, v, &lookup) {
					p.NoLookup = !lookup
				}
			},
		})))
		if !ok {
			return
		}
		if set["name"] == nil {
			d.fail(joinPath(path, "name"), n, "missing; every provider needs a name ([a-z0-9-]+)")
		}
		if p.Kind == "" && set["kind"] == nil {
			d.fail(joinPath(path, "kind"), n, "missing; use one of %s", strings.Join(kinds.Names(), ", "))
		}
		d.checkProviderKind(path, n, &p, set, read)
		ps = append(ps, p)
	})
	return ps
}

func (d *decoder) retry(path string, n *yaml.Node, r *Retry) {
	baseOK, maxOK := true, true
	set, ok := d.mapping(path, n, handlers{
		"max_attempts": func(p string, v *yaml.Node) { d.intIn(p, v, &r.MaxAttempts, 1, 100) },
		"base_delay":   func(p string, v *yaml.Node) { baseOK = d.duration(p, v, &r.BaseDelay, false) },
		"max_delay":    func(p string, v *yaml.Node) { maxOK = d.duration(p, v, &r.MaxDelay, false) },
	})
	if !ok || !baseOK || !maxOK || r.MaxDelay >= r.BaseDelay {
		return
	}
	at := set["max_delay"]
	if at == nil {
		at = set["base_delay"]
	}
	d.fail(joinPath(path, "max_delay"), at, "%s is shorter than base_delay (%s); it must be at least as long",
		fmtDuration(r.MaxDelay), fmtDuration(r.BaseDelay))
}
