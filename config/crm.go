package config

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/webhook"
)

// The CRM kinds: where a client's leads are written, once per status move
// (package crm).
const (
	CRMWebhook   = "webhook"   // Standard Webhooks-signed JSON to any URL (n8n, Make, Zapier, the agency's own)
	CRMHubSpot   = "hubspot"   // CRM v3 contacts, batch upsert by a unique property holding the lead key
	CRMPipedrive = "pipedrive" // a person found by our reference in a custom field, then a lead for it
)

// CRMKinds lists the CRM kinds in the order the docs name them.
var CRMKinds = []string{CRMWebhook, CRMHubSpot, CRMPipedrive}

// CRM is where one client's leads are written (yaml crm[]): each status
// move of a lead of the client's channels is one write, an outbox row of
// its own (crm.MoveTx). Secrets come from *_env keys only.
type CRM struct {
	// Client is the client whose leads it receives; "" (one client, or
	// none listed): the only client.
	Client string
	Kind   string // CRMWebhook, CRMHubSpot or CRMPipedrive
	// URL (webhook) is where the signed JSON goes.
	URL string
	// SecretEnv (webhook, yaml secret_env) names the variable that holds
	// the Standard Webhooks secret (whsec_…) the requests are signed with.
	SecretEnv, Secret string
	// APIBase overrides the API's address (hubspot: https://api.hubapi.com,
	// pipedrive: https://api.pipedrive.com); tests point it at a stand-in.
	APIBase string
	// TokenEnv (hubspot: a private app's access token; pipedrive: the API
	// token, yaml token_env) names the variable that holds it.
	TokenEnv, Token string
	// IDProperty (hubspot, yaml id_property) is the contact property,
	// unique-valued, that holds the lead key: the batch upsert's idProperty.
	// Default "handoff_lead_key".
	IDProperty string
	// StatusProperty (hubspot, yaml status_property): the contact property
	// for the lead's status. Default "handoff_status".
	StatusProperty string
	// DealIDProperty (hubspot, yaml deal_id_property), when set, gives
	// each lead a deal too: upserted by this deal property (unique values)
	// = the lead key, in DealPipeline at DealStage (defaults "default",
	// "appointmentscheduled": HubSpot's default pipeline's first stage),
	// and associated with the lead's contact, once per lead.
	DealIDProperty, DealPipeline, DealStage string
	// ReferenceField and StatusField (pipedrive, yaml reference_field,
	// status_field) are the keys (40-character hashes) of the person's
	// custom fields holding the lead key and the lead's status.
	ReferenceField, StatusField string
	// Owners (yaml owners) maps handoff's owner names (routing's) to the
	// CRM's user ids: hubspot_owner_id, a Pipedrive user id. An owner not
	// listed is written as a name only where the CRM has a field for it
	// (nowhere today): the record then has no owner.
	Owners map[string]string
	// Required (yaml required) holds a lead's approved reply until the
	// lead's CRM writes made before it are on the record (crm.Gate): no
	// "all set" to the customer while the CRM has no record of them.
	Required bool
	// Timeout is one call's bound (default 10s), LookupSettle (pipedrive)
	// how long after a write that may have landed a search's "not found"
	// starts to count (default 30s: Pipedrive's search index lags its writes).
	Timeout, LookupSettle time.Duration
}

// ProviderName is the name the CRM's writes carry as their outbox rows'
// provider: "crm:<client>".
func (c CRM) ProviderName() string { return "crm:" + c.Client }

// Defaults of the CRM keys.
const (
	defaultHubSpotBase     = "https://api.hubapi.com"
	defaultPipedriveBase   = "https://api.pipedrive.com"
	defaultCRMIDProperty   = "handoff_lead_key"
	defaultCRMStatus       = "handoff_status"
	defaultDealPipeline    = "default"
	defaultDealStage       = "appointmentscheduled"
	defaultCRMTimeout      = 10 * time.Second
	defaultCRMLookupSettle = 30 * time.Second
)

// crmCommon are the keys every kind takes.
var crmCommon = []string{"client", "kind", "owners", "timeout", "required"}

// crmKeys are the keys each kind takes besides crmCommon.
var crmKeys = map[string][]string{
	CRMWebhook:   {"url", "secret_env"},
	CRMHubSpot:   {"api_base", "token_env", "id_property", "status_property", "deal_id_property", "deal_pipeline", "deal_stage"},
	CRMPipedrive: {"api_base", "token_env", "reference_field", "status_field", "lookup_settle"},
}

// crmRequired are the keys a kind cannot do without, each with what it is.
var crmRequired = map[string][][2]string{
	CRMWebhook: {{"url", "the address the signed JSON is posted to"}, {"secret_env", "the variable holding the whsec_ secret the requests are signed with"}},
	CRMHubSpot: {{"token_env", "the variable holding a private app's access token with the crm.objects.contacts.write and crm.objects.contacts.read scopes"}},
	CRMPipedrive: {
		{"token_env", "the variable holding the Pipedrive API token"},
		{"reference_field", "the key of the person custom field that holds handoff's lead key (search before create finds the person by it)"},
		{"status_field", "the key of the person custom field that holds handoff_status"},
	},
}

// CRMFor returns the CRM of the client of channel, if it has one.
func (c *Config) CRMFor(channel string) (CRM, bool) {
	client := c.ClientOf(channel)
	for _, m := range c.CRM {
		if m.Client == client {
			return m, true
		}
	}
	return CRM{}, false
}

// crm decodes the crm list: at most one per client, every key checked
// against its kind.
func (d *decoder) crm(path string, n *yaml.Node, c *Config) {
	d.list(path, n, func(p string, item *yaml.Node) {
		m := CRM{Timeout: defaultCRMTimeout}
		set, ok := d.mapping(p, item, handlers{
			"client": func(p string, v *yaml.Node) { d.text(p, v, &m.Client) },
			"kind":   func(p string, v *yaml.Node) { d.oneOf(p, v, &m.Kind, "a CRM kind", CRMKinds...) },
			"url":    func(p string, v *yaml.Node) { d.url(p, v, &m.URL) },
			"secret_env": func(p string, v *yaml.Node) {
				if !d.envName(p, v, &m.SecretEnv) {
					return
				}
				s, ok := d.secretFromEnv(p, v, m.SecretEnv)
				if !ok {
					return
				}
				if err := webhook.ValidateSecret(s); err != nil {
					d.fail(p, v, "the value of %s is not usable: %v", envLabel(m.SecretEnv), err)
					return
				}
				m.Secret = s
			},
			"api_base": func(p string, v *yaml.Node) { d.url(p, v, &m.APIBase) },
			"token_env": func(p string, v *yaml.Node) {
				if d.envName(p, v, &m.TokenEnv) {
					m.Token, _ = d.secretFromEnv(p, v, m.TokenEnv)
				}
			},
			"id_property":      func(p string, v *yaml.Node) { d.crmName(p, v, &m.IDProperty) },
			"status_property":  func(p string, v *yaml.Node) { d.crmName(p, v, &m.StatusProperty) },
			"deal_id_property": func(p string, v *yaml.Node) { d.crmName(p, v, &m.DealIDProperty) },
			"deal_pipeline":    func(p string, v *yaml.Node) { d.crmName(p, v, &m.DealPipeline) },
			"deal_stage":       func(p string, v *yaml.Node) { d.crmName(p, v, &m.DealStage) },
			"reference_field":  func(p string, v *yaml.Node) { d.crmName(p, v, &m.ReferenceField) },
			"status_field":     func(p string, v *yaml.Node) { d.crmName(p, v, &m.StatusField) },
			"owners":           func(p string, v *yaml.Node) { m.Owners = d.crmOwners(p, v) },
			"timeout": func(p string, v *yaml.Node) {
				if d.duration(p, v, &m.Timeout, false) && m.Timeout > 2*time.Minute {
					d.fail(p, v, "%s is longer than 2m; a CRM call that long holds its delivery job, and a lookup's settle time follows it", v.Value)
				}
			},
			"lookup_settle": func(p string, v *yaml.Node) { d.duration(p, v, &m.LookupSettle, false) },
			"required":      func(p string, v *yaml.Node) { d.boolean(p, v, &m.Required) },
		})
		if !ok {
			return
		}
		if set["kind"] == nil {
			d.fail(joinPath(p, "kind"), item, "missing; name the CRM (one of %s)", strings.Join(CRMKinds, ", "))
			return
		}
		if m.Kind == "" {
			return // its sentence is said
		}
		for key, v := range set {
			if slices.Contains(crmCommon, key) || slices.Contains(crmKeys[m.Kind], key) {
				continue
			}
			d.fail(joinPath(p, key), v, "is not a key of a %s CRM (its keys are %s)", m.Kind, strings.Join(append(slices.Clone(crmCommon), crmKeys[m.Kind]...), ", "))
		}
		for _, r := range crmRequired[m.Kind] {
			if set[r[0]] == nil {
				d.fail(joinPath(p, r[0]), item, "missing; a %s CRM needs %s", m.Kind, r[1])
			}
		}
		switch m.Kind {
		case CRMHubSpot:
			m.APIBase = orDefault(m.APIBase, defaultHubSpotBase)
			m.IDProperty = orDefault(m.IDProperty, defaultCRMIDProperty)
			m.StatusProperty = orDefault(m.StatusProperty, defaultCRMStatus)
			for _, key := range []string{"deal_pipeline", "deal_stage"} {
				if set[key] != nil && set["deal_id_property"] == nil {
					d.fail(joinPath(p, key), set[key], "is a deal's; set deal_id_property (the deal property holding the lead key) to give each lead a deal")
				}
			}
			if m.DealIDProperty != "" {
				m.DealPipeline = orDefault(m.DealPipeline, defaultDealPipeline)
				m.DealStage = orDefault(m.DealStage, defaultDealStage)
			}
		case CRMPipedrive:
			m.APIBase = orDefault(m.APIBase, defaultPipedriveBase)
			if set["lookup_settle"] == nil {
				m.LookupSettle = defaultCRMLookupSettle
			}
		}
		i := len(c.CRM)
		c.CRM = append(c.CRM, m)
		d.later(func() { d.checkCRM(p, set, item, c, i) })
	})
}

// checkCRM checks, once the file is read, the client a CRM names: defined,
// named when there are several, and given one CRM only.
func (d *decoder) checkCRM(p string, set map[string]*yaml.Node, item *yaml.Node, c *Config, i int) {
	m := &c.CRM[i]
	at, node := joinPath(p, "client"), set["client"]
	if node == nil {
		node = item
	}
	switch {
	case m.Client == "" && len(c.Clients) > 1:
		d.fail(at, node, "missing; with several clients every crm entry must name the one whose leads it receives (one of %s)", clientIDs(c))
		return
	case m.Client == "":
		m.Client = c.onlyClient().ID
	default:
		if _, ok := c.Client(m.Client); !ok {
			d.fail(at, node, "client %q is not defined under clients (the clients are %s)", m.Client, clientIDs(c))
			return
		}
	}
	for j := range i {
		if c.CRM[j].Client == m.Client {
			d.fail(at, node, "client %q already has a CRM (crm[%d]); a client's leads go to one CRM", m.Client, j)
			return
		}
	}
}

// crmOwners decodes owners: handoff's owner names to the CRM's user ids.
func (d *decoder) crmOwners(path string, n *yaml.Node) map[string]string {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "must be a mapping of owner names to CRM user ids, not %s", describe(n))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		p := joinPath(path, k.Value)
		var id string
		switch {
		case k.Kind != yaml.ScalarNode || k.Value == "":
			d.fail(path, n.Content[i], "keys must be owner names as routing gives them, not %s (line %d)", describe(k), n.Content[i].Line)
		case out[k.Value] != "":
			d.fail(path, n.Content[i], "owner %q appears twice (line %d)", k.Value, n.Content[i].Line)
		case !d.text(p, v, &id):
		case strings.ContainsAny(id, " \t\r\n/?#&"):
			d.fail(p, v, "%q is not a CRM user id (no spaces or /?#&; HubSpot's owner ids and Pipedrive's user ids are numbers)", id)
		default:
			out[k.Value] = id
		}
	}
	return out
}

// crmName decodes a CRM's property or field name: letters, digits and _
// (HubSpot's internal names, Pipedrive's field keys).
func (d *decoder) crmName(p string, v *yaml.Node, dst *string) {
	var s string
	if !d.text(p, v, &s) {
		return
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			d.fail(p, v, "%q is not a property or field name (use its internal name: letters, digits and _, e.g. handoff_status)", s)
			return
		}
	}
	*dst = s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
