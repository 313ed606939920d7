package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
)

func TestBackupTarget(t *testing.T) {
	env := map[string]string{
		"AWS_ACCESS_KEY_ID": "aws-key-1", "AWS_SECRET_ACCESS_KEY": "aws-secret-1",
		"B2_KEY": "b2-key-2", "B2_SECRET": "b2-secret-2",
	}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name, yaml string
		want       *config.Target
		errs       []string
	}{
		{name: "none", yaml: "backups: {keep: 3}\n"},
		{
			name: "the issue's example",
			yaml: `backups:
  schedule: "0 * * * *"
  keep: 24
  target: s3://handoff-backups/agency-a
  target_endpoint: https://s3.example.com/
  target_region: eu-central-1
  target_keep: 30
`,
			want: &config.Target{Bucket: "handoff-backups", Prefix: "agency-a/", Endpoint: "https://s3.example.com", Region: "eu-central-1", Keep: 30,
				AccessKeyEnv: "AWS_ACCESS_KEY_ID", SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", AccessKey: "aws-key-1", SecretKey: "aws-secret-1", Timeout: 10 * time.Minute},
		},
		{
			name: "AWS, no prefix, own env names",
			yaml: "backups: {target: s3://my.bucket, target_access_key_env: B2_KEY, target_secret_key_env: B2_SECRET, target_timeout: 2m}\n",
			want: &config.Target{Bucket: "my.bucket", Region: "us-east-1", Keep: 30,
				AccessKeyEnv: "B2_KEY", SecretKeyEnv: "B2_SECRET", AccessKey: "b2-key-2", SecretKey: "b2-secret-2", Timeout: 2 * time.Minute},
		},
		{name: "not s3", yaml: "backups: {target: https://bucket/x}\n", errs: []string{`backups.target: "https://bucket/x" is not an s3:// URL`}},
		{name: "bad bucket", yaml: "backups: {target: s3://Bad_Bucket/x}\n", errs: []string{`is not a bucket name`}},
		{name: "dot-dot prefix", yaml: "backups: {target: s3://bucket/a/../b}\n", errs: []string{`has an empty, . or .. part`}},
		{name: "endpoint with a path", yaml: "backups: {target: s3://bucket, target_endpoint: https://s3.example.com/bucket}\n", errs: []string{`must be the store's base URL alone`}},
		{name: "endpoint with a password", yaml: "backups: {target: s3://bucket, target_endpoint: \"https://u:pw-77@s3.example.com\"}\n", errs: []string{`must be the store's base URL alone`}},
		{name: "target keys without target", yaml: "backups: {target_keep: 3}\n", errs: []string{"backups.target_keep: is set but backups.target is not"}},
		{name: "unset credentials", yaml: "backups: {target: s3://bucket, target_access_key_env: NOPE_KEY}\n", errs: []string{"environment variable NOPE_KEY is not set or is empty"}},
		{name: "keep zero", yaml: "backups: {target: s3://bucket, target_keep: 0}\n", errs: []string{"backups.target_keep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml), getenv)
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.errs)
				}
				for _, w := range tt.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "pw-77") {
					t.Errorf("the error shows the endpoint's password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Backups.Target
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("target = %+v, want none", got)
			case tt.want != nil && (got == nil || *got != *tt.want):
				t.Fatalf("target = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

func TestBackupTargetRedacted(t *testing.T) {
	c, err := config.Parse([]byte("backups: {target: s3://bucket/p}\n"), func(k string) string { return "secret-of-" + k })
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redacted()
	if r.Backups.Target.AccessKey != "[redacted]" || r.Backups.Target.SecretKey != "[redacted]" {
		t.Errorf("redacted target %+v", r.Backups.Target)
	}
	if c.Backups.Target.SecretKey != "secret-of-AWS_SECRET_ACCESS_KEY" {
		t.Errorf("Redacted changed the original: %+v", c.Backups.Target)
	}
	if got := c.Backups.Target.URL(); got != "s3://bucket/p" {
		t.Errorf("URL() = %q", got)
	}
}
