package config

import (
	"slices"
	"strings"
	"testing"
)

// TestClients: clients and channels[].client, the default client of a file
// without clients and of the demo, and one sentence per mistake.
func TestClients(t *testing.T) {
	const two = "clients: [{id: acme, name: Acme Ltd}, {id: bolt}]\n"
	ch := func(name, client string) string {
		s := "  - {name: " + name + ", fields: {message_id: /id}"
		if client != "" {
			s += ", client: " + client
		}
		return s + "}\n"
	}
	tests := []struct {
		name, yaml string
		clients    []Client
		of         map[string]string // channel → ClientOf
		err        string
	}{
		{"demo", "", []Client{DefaultClient}, map[string]string{"demo": "default", "nope": ""}, ""},
		{"no clients", "channels:\n" + ch("web", "") + ch("sms", ""), []Client{DefaultClient}, map[string]string{"web": "default", "sms": "default"}, ""},
		{"one client, channels name none", "clients: [{id: acme}]\nchannels:\n" + ch("web", ""), []Client{{ID: "acme", Name: "acme"}}, map[string]string{"web": "acme"}, ""},
		{"two clients", two + "channels:\n" + ch("web", "acme") + ch("sms", "bolt"), []Client{{ID: "acme", Name: "Acme Ltd"}, {ID: "bolt", Name: "bolt"}}, map[string]string{"web": "acme", "sms": "bolt"}, ""},
		{"two clients, a channel names none", two + "channels:\n" + ch("web", "acme") + ch("sms", ""), nil, nil, "channels[1].client: missing; with several clients every channel must name the one it belongs to (one of acme, bolt)"},
		{"unknown client", two + "channels:\n" + ch("web", "zeta"), nil, nil, `channels[0].client: client "zeta" is not defined under clients (the clients are acme, bolt)`},
		{"unknown client, no clients listed", "channels:\n" + ch("web", "zeta"), nil, nil, `client "zeta" is not defined under clients (the clients are default)`},
		{"duplicate id", "clients: [{id: a}, {id: a}]\n", nil, nil, `duplicate client id "a"`},
		{"bad id", "clients: [{id: Acme}]\n", nil, nil, `"Acme" is not a valid client id`},
		{"no id", "clients: [{name: x}]\n", nil, nil, "clients[0].id: missing; every client needs an id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), func(string) string { return "" })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.ClientList(); !slices.Equal(got, tt.clients) {
				t.Errorf("ClientList = %v, want %v", got, tt.clients)
			}
			for chName, want := range tt.of {
				if got := c.ClientOf(chName); got != want {
					t.Errorf("ClientOf(%q) = %q, want %q", chName, got, want)
				}
			}
		})
	}
}

// TestClientChannels: the channels of some clients, and the check of a
// person's client list.
func TestClientChannels(t *testing.T) {
	c, err := Parse([]byte(`clients: [{id: acme}, {id: bolt}]
channels:
  - {name: web, client: acme, fields: {message_id: /id}}
  - {name: sms, client: bolt, fields: {message_id: /id}}
  - {name: mail, client: acme, fields: {message_id: /id}}
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ClientChannels("acme"), []string{"web", "mail"}; !slices.Equal(got, want) {
		t.Errorf("ClientChannels(acme) = %v, want %v", got, want)
	}
	if got := c.ClientChannels("nope"); len(got) != 0 {
		t.Errorf("ClientChannels(nope) = %v, want none", got)
	}
	if err := c.CheckClients([]string{"acme", "bolt"}); err != nil {
		t.Errorf("CheckClients(acme, bolt) = %v", err)
	}
	if err := c.CheckClients([]string{"acme", "zeta"}); err == nil || err.Error() != `client "zeta" is not defined (the clients are acme, bolt)` {
		t.Errorf("CheckClients(zeta) = %v", err)
	}
}
