package config_test

import (
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
)

func TestAuthRequireTOTPForAdmins(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{
		{"", false},
		{"auth: {require_totp_for_admins: false}\n", false},
		{"auth: {require_totp_for_admins: true}\n", true},
	} {
		c, err := config.Parse([]byte(tc.yaml), nil)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.yaml, err)
		}
		if c.Auth.RequireTOTPForAdmins != tc.want {
			t.Errorf("Parse(%q): require_totp_for_admins %v, want %v", tc.yaml, c.Auth.RequireTOTPForAdmins, tc.want)
		}
	}
	for bad, want := range map[string]string{
		"auth: {require_totp_for_admins: maybe}\n": "auth.require_totp_for_admins",
		"auth: {require_totp: true}\n":             `unknown key "require_totp"`,
	} {
		if _, err := config.Parse([]byte(bad), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", bad, err, want)
		}
	}
}
