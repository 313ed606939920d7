package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

// Backups configures the scheduled backups and their offsite copies.
type Backups struct {
	Schedule string // default "0 * * * *" (hourly); a standard 5-field cron expression or a descriptor like @daily
	Keep     int    // default 24; at least 1
	// Target is where each scheduled backup is copied offsite (yaml
	// target and the target_* keys); nil: backups stay on this disk.
	Target *Target
}

// Target is an S3-compatible bucket that receives a copy of every
// scheduled backup: AWS S3, Backblaze B2, Cloudflare R2, MinIO and the like.
type Target struct {
	Bucket string // from target: s3://bucket/prefix
	Prefix string // "" or ends with "/": the folder in the bucket that handoff owns
	// Endpoint is the store's base URL (yaml target_endpoint), e.g.
	// https://s3.example.com; empty: AWS S3 in Region. A set endpoint is
	// spoken to path-style (https://host/bucket/key), as MinIO and most
	// gateways expect.
	Endpoint     string
	Region       string        // yaml target_region; default "us-east-1"
	Keep         int           // yaml target_keep; default 30: the newest N remote copies are kept
	AccessKeyEnv string        // yaml target_access_key_env; default AWS_ACCESS_KEY_ID
	SecretKeyEnv string        // yaml target_secret_key_env; default AWS_SECRET_ACCESS_KEY
	AccessKey    string        // resolved from AccessKeyEnv at load; never printed
	SecretKey    string        // resolved from SecretKeyEnv at load; never printed
	Timeout      time.Duration // yaml target_timeout; default 10m: one upload, download or listing, retries included
}

// URL is the target as written in the file: s3://bucket/prefix.
func (t *Target) URL() string { return "s3://" + t.Bucket + "/" + strings.TrimSuffix(t.Prefix, "/") }

const (
	defaultTargetKeep    = 30
	defaultTargetRegion  = "us-east-1"
	defaultTargetTimeout = 10 * time.Minute
	defaultAccessKeyEnv  = "AWS_ACCESS_KEY_ID"
	defaultSecretKeyEnv  = "AWS_SECRET_ACCESS_KEY"
)

// backups decodes the backups mapping. The target_* keys sit beside
// target, flat, as operators know them from other tools; they mean
// nothing without it.
func (d *decoder) backups(path string, n *yaml.Node, b *Backups) {
	t := Target{Region: defaultTargetRegion, Keep: defaultTargetKeep, Timeout: defaultTargetTimeout,
		AccessKeyEnv: defaultAccessKeyEnv, SecretKeyEnv: defaultSecretKeyEnv}
	hasTarget := false
	set, ok := d.mapping(path, n, handlers{
		"schedule": func(p string, v *yaml.Node) {
			if d.str(p, v, &b.Schedule) {
				if _, err := cron.ParseStandard(b.Schedule); err != nil {
					d.fail(p, v, "%q is not a cron expression: %v", b.Schedule, err)
				}
			}
		},
		"keep": func(p string, v *yaml.Node) { d.intIn(p, v, &b.Keep, 1, 100000) },
		"target": func(p string, v *yaml.Node) {
			var s string
			if !d.str(p, v, &s) {
				return
			}
			bucket, prefix, err := parseTarget(s)
			if err != nil {
				d.fail(p, v, "%s", err)
				return
			}
			t.Bucket, t.Prefix, hasTarget = bucket, prefix, true
		},
		"target_endpoint": func(p string, v *yaml.Node) {
			var s string
			if !d.str(p, v, &s) {
				return
			}
			if err := checkHTTPURL(s); err != nil {
				d.fail(p, v, "%v", err)
				return
			}
			if u, _ := url.Parse(s); u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				d.fail(p, v, "%q must be the store's base URL alone, like https://s3.example.com (the bucket goes in target)", redactURL(s))
				return
			}
			t.Endpoint = strings.TrimRight(s, "/")
		},
		"target_region":         func(p string, v *yaml.Node) { d.text(p, v, &t.Region) },
		"target_keep":           func(p string, v *yaml.Node) { d.intIn(p, v, &t.Keep, 1, 100000) },
		"target_access_key_env": func(p string, v *yaml.Node) { d.envName(p, v, &t.AccessKeyEnv) },
		"target_secret_key_env": func(p string, v *yaml.Node) { d.envName(p, v, &t.SecretKeyEnv) },
		"target_timeout":        func(p string, v *yaml.Node) { d.duration(p, v, &t.Timeout, false) },
	})
	if !ok {
		return
	}
	if !hasTarget {
		for _, k := range []string{"target_endpoint", "target_region", "target_keep", "target_access_key_env", "target_secret_key_env", "target_timeout"} {
			if v := set[k]; v != nil {
				d.fail(joinPath(path, k), v, "is set but backups.target is not (add target: s3://bucket/prefix)")
			}
		}
		return
	}
	at := set["target"]
	var okKey, okSecret bool
	t.AccessKey, okKey = d.secretFromEnv(joinPath(path, "target"), at, t.AccessKeyEnv)
	t.SecretKey, okSecret = d.secretFromEnv(joinPath(path, "target"), at, t.SecretKeyEnv)
	if okKey && okSecret {
		b.Target = &t
	}
}

// parseTarget splits s3://bucket/prefix into the bucket and a prefix that
// is empty or ends with "/".
func parseTarget(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3:// URL (use s3://bucket/prefix)", s)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("%q is not a bucket name (3 to 63 lowercase letters, digits, dots and -)", bucket)
	}
	prefix = strings.Trim(prefix, "/")
	for _, part := range strings.Split(prefix, "/") {
		if part == "." || part == ".." || (prefix != "" && part == "") {
			return "", "", fmt.Errorf("the prefix %q has an empty, . or .. part", prefix)
		}
	}
	if prefix != "" {
		prefix += "/"
	}
	return bucket, prefix, nil
}

func validBucket(s string) bool {
	if len(s) < 3 || len(s) > 63 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '.') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
