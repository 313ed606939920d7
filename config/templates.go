package config

import (
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/provider/kinds"
)

// A whatsapp provider's templates are its account's approved message
// templates, which a person may send a lead once its 24-hour reply window
// has closed (POST /api/v1/drafts/{id}/template):
//
//	templates:
//	  - name: follow_up          # as approved in WhatsApp Manager
//	    language: en_US
//	    parameters: ["{name}", "our spring offer"]   # the body's {{1}}, {{2}}…
//
// Each parameter is literal text or {name}, the lead's name.
var (
	templateName     = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)
	templateLanguage = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z]{2})?$`)
)

// templates decodes a whatsapp provider's templates list.
func (d *decoder) templates(path string, n *yaml.Node, dst *[]kinds.Template) {
	names := map[string]bool{}
	*dst = []kinds.Template{}
	d.list(path, n, func(p string, item *yaml.Node) {
		var t kinds.Template
		set, ok := d.mapping(p, item, handlers{
			"name": func(k string, v *yaml.Node) {
				if !d.str(k, v, &t.Name) {
					return
				}
				switch {
				case !templateName.MatchString(t.Name):
					d.fail(k, v, "%q is not a WhatsApp template name (lowercase letters, digits and _, as WhatsApp Manager shows it)", t.Name)
				case names[t.Name]:
					d.fail(k, v, "duplicate template name %q", t.Name)
				}
				names[t.Name] = true
			},
			"language": func(k string, v *yaml.Node) {
				if d.str(k, v, &t.Language) && !templateLanguage.MatchString(t.Language) {
					d.fail(k, v, "%q is not a template language code (e.g. en_US or de)", t.Language)
				}
			},
			"parameters": func(k string, v *yaml.Node) {
				t.Parameters = []string{}
				d.list(k, v, func(ip string, pv *yaml.Node) {
					var s string
					if !d.str(ip, pv, &s) {
						return
					}
					if why := kinds.TemplateParameterProblem(s); why != "" {
						d.fail(ip, pv, "%s", why)
						return
					}
					t.Parameters = append(t.Parameters, s)
				})
			},
		})
		if !ok {
			return
		}
		for _, key := range []string{"name", "language"} {
			if set[key] == nil {
				d.fail(joinPath(p, key), item, "missing; every template needs its %s as approved in WhatsApp Manager", key)
			}
		}
		*dst = append(*dst, t)
	})
}
