package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/provider/kinds"
)

// providerKindHandlers adds the kinds' keys to the provider handlers hs.
func (d *decoder) providerKindHandlers(p *Provider, hs handlers) handlers {
	secret := func(name *string, value *string) func(string, *yaml.Node) {
		return func(k string, v *yaml.Node) {
			if !d.envName(k, v, name) {
				return
			}
			if s, ok := d.secretFromEnv(k, v, *name); ok {
				*value = s
			}
		}
	}
	hs["api_base"] = func(k string, v *yaml.Node) { d.url(k, v, &p.APIBase) }
	hs["account_sid"] = func(k string, v *yaml.Node) { d.str(k, v, &p.AccountSID) }
	hs["auth_token_env"] = secret(&p.AuthTokenEnv, &p.AuthToken)
	hs["from"] = func(k string, v *yaml.Node) { d.str(k, v, &p.From) }
	hs["status_callback"] = func(k string, v *yaml.Node) { d.url(k, v, &p.StatusCallback) }
	hs["phone_number_id"] = func(k string, v *yaml.Node) { d.str(k, v, &p.PhoneNumberID) }
	hs["templates"] = func(k string, v *yaml.Node) { d.templates(k, v, &p.Templates) }
	hs["token_env"] = secret(&p.TokenEnv, &p.Token)
	hs["graph_version"] = func(k string, v *yaml.Node) { d.str(k, v, &p.GraphVersion) }
	hs["human_agent"] = func(k string, v *yaml.Node) { d.boolean(k, v, &p.HumanAgent) }
	hs["host"] = func(k string, v *yaml.Node) { d.str(k, v, &p.Host) }
	hs["port"] = func(k string, v *yaml.Node) { d.intIn(k, v, &p.Port, 1, 65535) }
	hs["username_env"] = secret(&p.UsernameEnv, &p.Username)
	hs["password_env"] = secret(&p.PasswordEnv, &p.Password)
	hs["tls"] = func(k string, v *yaml.Node) { d.oneOf(k, v, &p.TLS, "a TLS mode", "starttls", "tls", "none") }
	hs["url_env"] = func(k string, v *yaml.Node) {
		if !d.envName(k, v, &p.URLEnv) {
			return
		}
		s, ok := d.secretFromEnv(k, v, p.URLEnv)
		if !ok {
			return
		}
		if err := checkHTTPURL(s); err != nil {
			d.fail(k, v, "the value of %s is not an absolute http or https URL", envLabel(p.URLEnv))
			return
		}
		p.URL = strings.TrimRight(s, "/")
	}
	hs["auth_env"] = secret(&p.AuthEnv, &p.Auth)
	hs["body"] = func(k string, v *yaml.Node) { d.oneOf(k, v, &p.Body, "a body encoding", "json", "form") }
	hs["fields"] = func(k string, v *yaml.Node) {
		p.Fields = map[string]string{}
		ours := map[string]bool{"to": true, "text": true, "client_ref": true, "conversation_id": true, "correlation_id": true}
		d.mapping(k, v, handlers{}.with(ours, func(name string) func(string, *yaml.Node) {
			return func(k string, v *yaml.Node) {
				var s string
				if d.str(k, v, &s) {
					p.Fields[name] = s
				}
			}
		}))
	}
	hs["answer_id"] = func(k string, v *yaml.Node) {
		if d.str(k, v, &p.AnswerID) && !strings.HasPrefix(p.AnswerID, "/") {
			d.fail(k, v, "%q is not a JSON pointer (it starts with /, e.g. /messages/0/id)", p.AnswerID)
		}
	}
	hs["success"] = func(k string, v *yaml.Node) {
		var s string
		if !d.str(k, v, &s) {
			return
		}
		ptr, val, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(ptr, "/") {
			d.fail(k, v, "%q is not a rule of the form /pointer=value (e.g. /ok=true)", s)
			return
		}
		p.SuccessPointer, p.SuccessValue = ptr, val
	}
	hs["rate"] = func(k string, v *yaml.Node) {
		var s string
		if !d.str(k, v, &s) {
			return
		}
		r, ok := parseRate(s)
		if !ok {
			d.fail(k, v, "%q is not a rate (use N/s, N/m or N/h, e.g. 1/s)", s)
			return
		}
		p.Rate = r
	}
	hs["burst"] = func(k string, v *yaml.Node) { d.intIn(k, v, &p.Burst, 1, 10000) }
	return hs
}

// reading wraps each handler of hs to note in read whether it read its
// key without a problem.
func (d *decoder) reading(read map[string]bool, hs handlers) handlers {
	out := handlers{}
	for key, f := range hs {
		out[key] = func(path string, v *yaml.Node) {
			before := len(d.errs)
			f(path, v)
			read[key] = len(d.errs) == before
		}
	}
	return out
}

// with adds a handler built by mk for each name.
func (hs handlers) with(names map[string]bool, mk func(string) func(string, *yaml.Node)) handlers {
	out := handlers{}
	for k, f := range hs {
		out[k] = f
	}
	for n := range names {
		out[n] = mk(n)
	}
	return out
}

// parseRate reads N/s, N/m or N/h as sends per second.
func parseRate(s string) (float64, bool) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || n > 1e6 {
		return 0, false
	}
	switch unit {
	case "s":
		return n, true
	case "m":
		return n / 60, true
	case "h":
		return n / 3600, true
	}
	return 0, false
}

// checkProviderKind checks p's entry against its kind's declaration
// (provider/kinds): it refuses keys the kind does not take, checks the
// values read (read says which keys were read without a problem),
// requires the ones the kind needs, runs the kind's rules and fills its
// defaults.
func (d *decoder) checkProviderKind(path string, n *yaml.Node, p *Provider, set map[string]*yaml.Node, read map[string]bool) {
	at := func(key string) (string, *yaml.Node) {
		if v := set[key]; v != nil {
			return joinPath(path, key), v
		}
		return joinPath(path, key), n
	}
	// A key only one kind takes is named as that kind's, whatever the
	// kind of this entry (even one config does not know).
	owner := map[string]string{}
	for _, k := range kinds.All() {
		for _, key := range k.Keys {
			if key.Only != "" && k.Name != p.Kind {
				owner[key.Name] = "only a " + k.Name + " provider takes " + key.Name + " (" + key.Only + ")"
			}
		}
	}
	for _, key := range sortedKeys(set) {
		if why, ok := owner[key]; ok {
			path, v := at(key)
			d.fail(path, v, "%s", why)
		}
	}
	has := func(key string) bool { return set[key] != nil }
	if p.Rate > 0 && p.Burst == 0 {
		p.Burst = 1
	}
	if !has("lookup_settle") {
		p.LookupSettle = DefaultLookupSettle(p.Timeout)
	}
	k, ok := kinds.Lookup(p.Kind)
	if !ok {
		return
	}
	for _, key := range sortedKeys(set) {
		if _, takes := k.Key(key); takes || slices.Contains(kinds.Common, key) || owner[key] != "" {
			continue
		}
		path, v := at(key)
		d.fail(path, v, "a %s provider does not take %s (it takes %s)", p.Kind, key, strings.Join(k.KeyNames(), ", "))
	}
	for _, key := range k.Keys {
		if key.Check == nil || !read[key.Name] {
			continue
		}
		if why := key.Check(p); why != "" {
			path, v := at(key.Name)
			d.fail(path, v, "%s", why)
		}
	}
	for _, key := range k.Keys {
		if key.Need != "" && !has(key.Name) {
			d.fail(joinPath(path, key.Name), n, "missing; %s", key.Need)
		}
	}
	if k.Rules != nil {
		for _, pr := range k.Rules(p, has) {
			path, v := at(pr.Key)
			d.fail(path, v, "%s", pr.Text)
		}
	}
	if k.Defaults != nil {
		k.Defaults(p, has)
	}
}

// sortedKeys lists the keys of set, sorted, so problems come in one order.
func sortedKeys(set map[string]*yaml.Node) []string {
	out := slices.Collect(maps.Keys(set))
	slices.Sort(out)
	return out
}
