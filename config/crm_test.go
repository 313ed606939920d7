package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCRM: a crm list decodes with its defaults, secrets from *_env, and
// each mistake is one sentence that names the key.
func TestCRM(t *testing.T) {
	const head = "base_url: https://handoff.example.com\n" +
		"clients: [{id: acme}, {id: bolt}, {id: cora}]\n" +
		"channels:\n  - {name: web, client: acme, fields: {message_id: /id}}\n  - {name: sms, client: bolt, fields: {message_id: /id}}\n"
	env := func(k string) string {
		return map[string]string{"HS": "pat-na1-secret", "PD": "pd-secret", "WH": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "BAD": "not base64 !"}[k]
	}
	c, err := Parse([]byte(head+"crm:\n"+
		"  - {client: acme, kind: hubspot, token_env: HS, owners: {ana: \"7001\", ben: \"7002\"}}\n"+
		"  - {client: bolt, kind: pipedrive, token_env: PD, reference_field: abc123, status_field: def456, api_base: \"http://127.0.0.1:9/\"}\n"+
		"  - {client: cora, kind: webhook, url: \"https://n8n.example.com/webhook/leads\", secret_env: WH, timeout: 3s, required: true}\n"), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []CRM{
		{Client: "acme", Kind: CRMHubSpot, APIBase: "https://api.hubapi.com", TokenEnv: "HS", Token: "pat-na1-secret", IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
			Owners: map[string]string{"ana": "7001", "ben": "7002"}, Timeout: 10 * time.Second},
		{Client: "bolt", Kind: CRMPipedrive, APIBase: "http://127.0.0.1:9", TokenEnv: "PD", Token: "pd-secret", ReferenceField: "abc123", StatusField: "def456", Timeout: 10 * time.Second, LookupSettle: 30 * time.Second},
		{Client: "cora", Kind: CRMWebhook, URL: "https://n8n.example.com/webhook/leads", SecretEnv: "WH", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 3 * time.Second, Required: true},
	}
	if !reflect.DeepEqual(c.CRM, want) {
		t.Errorf("CRM =\n %+v\nwant\n %+v", c.CRM, want)
	}
	if m, ok := c.CRMFor("sms"); !ok || m.Kind != CRMPipedrive || m.ProviderName() != "crm:bolt" {
		t.Errorf("CRMFor(sms) = %+v, %v; want bolt's pipedrive named crm:bolt", m, ok)
	}
	if _, ok := c.CRMFor("nope"); ok {
		t.Errorf("CRMFor(a channel not configured) found one")
	}

	bad := []struct{ yaml, err string }{
		{"  - {client: acme, token_env: HS}", "crm[0].kind: missing; name the CRM (one of webhook, hubspot, pipedrive)"},
		{"  - {client: acme, kind: salesforce}", `crm[0].kind: "salesforce" is not a CRM kind`},
		{"  - {kind: hubspot, token_env: HS}", "crm[0].client: missing; with several clients every crm entry must name the one"},
		{"  - {client: zeta, kind: hubspot, token_env: HS}", `crm[0].client: client "zeta" is not defined under clients`},
		{"  - {client: acme, kind: hubspot, token_env: HS}\n  - {client: acme, kind: webhook, url: \"https://x.example\", secret_env: WH}", `crm[1].client: client "acme" already has a CRM (crm[0])`},
		{"  - {client: acme, kind: hubspot}", "crm[0].token_env: missing; a hubspot CRM needs the variable holding a private app's access token"},
		{"  - {client: acme, kind: hubspot, token_env: NOPE}", "crm[0].token_env: environment variable NOPE is not set or is empty"},
		{"  - {client: acme, kind: hubspot, token_env: pat-na1-abcdef}", "crm[0].token_env: is not an environment variable name"},
		{"  - {client: acme, kind: hubspot, token_env: HS, url: \"https://x.example\"}", "crm[0].url: is not a key of a hubspot CRM (its keys are client, kind, owners, timeout, required, api_base, token_env, id_property, status_property, deal_id_property, deal_pipeline, deal_stage)"},
		{"  - {client: acme, kind: hubspot, token_env: HS, deal_stage: qualified}", "crm[0].deal_stage: is a deal's; set deal_id_property"},
		{"  - {client: acme, kind: hubspot, token_env: HS, deal_id_property: \"deal key\"}", `crm[0].deal_id_property: "deal key" is not a property or field name`},
		{"  - {client: acme, kind: pipedrive, token_env: PD, reference_field: r, status_field: s, deal_id_property: d}", "crm[0].deal_id_property: is not a key of a pipedrive CRM"},
		{"  - {client: acme, kind: hubspot, token_env: HS, id_property: \"lead key\"}", `crm[0].id_property: "lead key" is not a property or field name`},
		{"  - {client: acme, kind: hubspot, token_env: HS, owners: {ana: \"70 01\"}}", `crm[0].owners.ana: "70 01" is not a CRM user id`},
		{"  - {client: acme, kind: hubspot, token_env: HS, owners: [ana]}", "crm[0].owners: must be a mapping of owner names to CRM user ids"},
		{"  - {client: acme, kind: hubspot, token_env: HS, timeout: 5m}", "crm[0].timeout: 5m is longer than 2m"},
		{"  - {client: acme, kind: pipedrive, token_env: PD, status_field: s}", "crm[0].reference_field: missing; a pipedrive CRM needs the key of the person custom field that holds handoff's lead key"},
		{"  - {client: acme, kind: pipedrive, token_env: PD, reference_field: r}", "crm[0].status_field: missing; a pipedrive CRM needs the key of the person custom field that holds handoff_status"},
		{"  - {client: acme, kind: webhook, secret_env: WH}", "crm[0].url: missing; a webhook CRM needs the address the signed JSON is posted to"},
		{"  - {client: acme, kind: webhook, url: \"https://x.example\"}", "crm[0].secret_env: missing; a webhook CRM needs the variable holding the whsec_ secret"},
		{"  - {client: acme, kind: webhook, url: \"https://x.example\", secret_env: BAD}", "crm[0].secret_env: the value of environment variable BAD is not usable: the secret is not a Standard Webhooks secret"},
		{"  - {client: acme, kind: webhook, url: \"ftp://x.example\", secret_env: WH}", "crm[0].url:"},
		{"  - {client: acme, kind: webhook, url: \"https://x.example\", secret_env: WH, colour: red}", `crm[0]: unknown key "colour"`},
	}
	for _, tt := range bad {
		t.Run(tt.err, func(t *testing.T) {
			_, err := Parse([]byte(head+"crm:\n"+tt.yaml+"\n"), env)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
			}
			if strings.Count(err.Error(), "config:") != 1 {
				t.Errorf("Parse = %v, want one sentence", err)
			}
			if strings.Contains(err.Error(), "secret") && strings.Contains(err.Error(), "pat-na1") {
				t.Errorf("Parse = %v: the secret itself is in the error", err)
			}
		})
	}

	// A deal: its pipeline and stage default to HubSpot's default
	// pipeline's first stage.
	c, err = Parse([]byte("crm:\n  - {kind: hubspot, token_env: HS, deal_id_property: handoff_deal_key}\n"), env)
	if err != nil {
		t.Fatalf("Parse(deal): %v", err)
	}
	if m := c.CRM[0]; m.DealIDProperty != "handoff_deal_key" || m.DealPipeline != "default" || m.DealStage != "appointmentscheduled" {
		t.Errorf("deal keys = %q %q %q", m.DealIDProperty, m.DealPipeline, m.DealStage)
	}

	// One client (none listed): the entry needs no client.
	c, err = Parse([]byte("crm:\n  - {kind: hubspot, token_env: HS}\n"), env)
	if err != nil {
		t.Fatalf("Parse one client: %v", err)
	}
	if m, ok := c.CRMFor(c.Channels[0].Name); !ok || m.Client != DefaultClient.ID {
		t.Errorf("CRMFor(demo) = %+v, %v; want the default client's", m, ok)
	}
}
