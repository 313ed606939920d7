package config

import (
	"errors"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/webhook"
)

// presetOf reads the channel's preset key ahead of the others, since it
// gives the defaults every other key overrides, wherever it sits in the
// mapping. No key, or a bad one (reported by the preset handler), is generic.
func (d *decoder) presetOf(n *yaml.Node) hook.Preset {
	generic, _ := hook.LookupPreset("generic")
	if n == nil || n.Kind != yaml.MappingNode {
		return generic
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if resolve(n.Content[i]).Value != "preset" {
			continue
		}
		if v := resolve(n.Content[i+1]); v.Kind == yaml.ScalarNode {
			if p, ok := hook.LookupPreset(v.Value); ok {
				return p
			}
		}
	}
	return generic
}

// applyPreset fills ch with the preset's inbound shape before the
// channel's own keys are read over it. The generic preset changes nothing:
// an empty Preset and Answer mean generic and json.
func applyPreset(ch *Channel, p hook.Preset) {
	if p.Name == "generic" {
		return
	}
	ch.Preset = p.Name
	if len(p.Fields.MessageID) > 0 {
		ch.Fields = Fields{
			MessageID: p.Fields.MessageID, ConversationID: p.Fields.ConversationID,
			Contact: p.Fields.Contact, Name: p.Fields.Name, Text: p.Fields.Text, Subject: p.Fields.Subject,
		}
	}
	ch.Messages = p.Messages
	ch.Receipts = p.Receipts
	ch.Handshake = p.Handshake
	ch.Answer = p.Answer
}

// inboundHandlers decodes the channel keys of the inbound shape.
func (d *decoder) inboundHandlers(ch *Channel, hs handlers) {
	hs["preset"] = func(p string, v *yaml.Node) {
		d.oneOf(p, v, &ch.Preset, "a preset", hook.PresetNames()...)
	}
	hs["messages"] = func(p string, v *yaml.Node) {
		d.mapping(p, v, handlers{
			"items":  func(p string, v *yaml.Node) { d.source(p, v, &ch.Messages.Items) },
			"when":   func(p string, v *yaml.Node) { ch.Messages.When = d.sources(p, v) },
			"unless": func(p string, v *yaml.Node) { ch.Messages.Unless = d.sources(p, v) },
			"sent":   func(p string, v *yaml.Node) { d.source(p, v, &ch.Messages.Sent) },
			"sent_unit": func(p string, v *yaml.Node) {
				var unit string
				if d.oneOf(p, v, &unit, "a unit of the sent time", "seconds", "milliseconds") {
					ch.Messages.SentMillis = unit == "milliseconds"
				}
			},
		})
	}
	hs["receipts"] = func(p string, v *yaml.Node) {
		d.mapping(p, v, handlers{
			"items":  func(p string, v *yaml.Node) { d.source(p, v, &ch.Receipts.Items) },
			"id":     func(p string, v *yaml.Node) { d.source(p, v, &ch.Receipts.ID) },
			"status": func(p string, v *yaml.Node) { d.source(p, v, &ch.Receipts.Status) },
		})
	}
	hs["handshake"] = func(p string, v *yaml.Node) {
		if d.oneOf(p, v, &ch.Handshake, "a handshake", hook.HandshakeMeta, hook.HandshakeSlack, "none") && ch.Handshake == "none" {
			ch.Handshake = ""
		}
	}
	hs["answer"] = func(p string, v *yaml.Node) {
		d.oneOf(p, v, &ch.Answer, "an answer", hook.AnswerJSON, hook.AnswerOK, hook.AnswerTwiML)
	}
	hs["verify_token"] = func(p string, v *yaml.Node) { d.text(p, v, &ch.VerifyToken) }
	hs["verify_token_env"] = func(p string, v *yaml.Node) {
		if d.envName(p, v, &ch.VerifyTokenEnv) {
			ch.VerifyToken, _ = d.secretFromEnv(p, v, ch.VerifyTokenEnv)
		}
	}
}

// source decodes one field source; "" is allowed and means not read.
func (d *decoder) source(p string, v *yaml.Node, dst *string) bool {
	var s string
	if !d.str(p, v, &s) {
		return false
	}
	if err := hook.ValidateSource(s); err != nil {
		d.fail(p, v, "%v", err)
		return false
	}
	*dst = s
	return true
}

// sources decodes one source or a list of them, none empty.
func (d *decoder) sources(p string, v *yaml.Node) []string {
	one := func(p string, v *yaml.Node) (string, bool) {
		var s string
		if !d.text(p, v, &s) {
			return "", false
		}
		return s, d.source(p, v, &s)
	}
	if v.Kind == yaml.ScalarNode {
		if s, ok := one(p, v); ok {
			return []string{s}
		}
		return nil
	}
	var out []string
	d.list(p, v, func(p string, item *yaml.Node) {
		if s, ok := one(p, item); ok {
			out = append(out, s)
		}
	})
	return out
}

// signature decodes a channel's signature block; preset gives the scheme
// when none is set, and the scheme's header, encoding and prefix.
func (d *decoder) signature(path string, n *yaml.Node, preset hook.Preset) *Signature {
	s := &Signature{}
	var secret, secrets []string
	set, ok := d.mapping(path, n, handlers{
		"scheme": func(p string, v *yaml.Node) {
			d.oneOf(p, v, &s.Scheme, "a signature scheme", hook.Schemes...)
		},
		"secret": func(p string, v *yaml.Node) {
			if d.text(p, v, &s.Secret) {
				secret = append(secret, s.Secret)
			}
		},
		"secret_env": func(p string, v *yaml.Node) {
			if d.envName(p, v, &s.SecretEnv) {
				if v, ok := d.secretFromEnv(p, v, s.SecretEnv); ok {
					secret = append(secret, v)
				}
			}
		},
		"secrets": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, item *yaml.Node) {
				var x string
				if d.text(p, item, &x) {
					secrets = append(secrets, x)
				}
			})
		},
		"secrets_env": func(p string, v *yaml.Node) {
			d.list(p, v, func(p string, item *yaml.Node) {
				var name string
				if d.envName(p, item, &name) {
					s.SecretsEnv = append(s.SecretsEnv, name)
					if x, ok := d.secretFromEnv(p, item, name); ok {
						secrets = append(secrets, x)
					}
				}
			})
		},
		"header": func(p string, v *yaml.Node) {
			if d.str(p, v, &s.Header) && !validHeaderName(s.Header) {
				d.fail(p, v, "%q is not a header name", s.Header)
			}
		},
		"encoding":  func(p string, v *yaml.Node) { d.oneOf(p, v, &s.Encoding, "an encoding", "hex", "base64") },
		"prefix":    func(p string, v *yaml.Node) { d.str(p, v, &s.Prefix) },
		"tolerance": func(p string, v *yaml.Node) { d.duration(p, v, &s.Tolerance, false) },
	})
	if !ok {
		return nil
	}
	if set["secret"] != nil && set["secret_env"] != nil {
		d.fail(path, set["secret_env"], "secret and secret_env are both set; keep one (list more under secrets or secrets_env)")
	}
	s.Secrets = append(secret, secrets...)
	if len(s.Secrets) > 0 {
		s.Secret = s.Secrets[0]
	}
	if set["secret"] == nil && set["secret_env"] == nil && set["secrets"] == nil && set["secrets_env"] == nil {
		d.fail(joinPath(path, "secret"), n, "missing; set secret, or secret_env to the name of an environment variable that holds it (secrets and secrets_env list several, for rotation)")
	}
	for _, key := range []string{"secrets", "secrets_env"} {
		if v := set[key]; v != nil && v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
			d.fail(joinPath(path, key), v, "must list at least one secret")
		}
	}
	if s.Scheme == "" && set["scheme"] == nil {
		s.Scheme = preset.Scheme
		if s.Scheme == "" {
			d.fail(joinPath(path, "scheme"), n, "missing; use %s (or set the channel's preset)", orList(hook.Schemes))
			return s
		}
	}
	if s.Scheme == preset.Scheme {
		if set["header"] == nil {
			s.Header = preset.Header
		}
		if set["encoding"] == nil {
			s.Encoding = preset.Encoding
		}
		if set["prefix"] == nil {
			s.Prefix = preset.Prefix
		}
	}
	if hook.NeedsTolerance(s.Scheme) && set["tolerance"] == nil {
		s.Tolerance = webhook.DefaultTolerance
	}
	// hook's own rules (Signing.Check), so that the server refuses at start
	// exactly what the webhooks could not verify with. A scheme that is not
	// one, or no secret at all, was reported above in words of its own.
	var se *hook.SigningError
	if err := s.Verifying().Check(); errors.As(err, &se) && se.Key != "scheme" && (se.Key != "secret" || len(s.Secrets) > 0) {
		p, v := joinPath(path, se.Key), n
		for _, k := range []string{"secret", "secret_env", "secrets", "secrets_env"} {
			if se.Key == "secret" && set[k] != nil {
				p, v = joinPath(path, k), set[k]
				break
			}
		}
		d.fail(p, v, "%s", se.Msg)
	}
	return s
}
