package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The headers a trusted proxy may name the client in (yaml proxy_header).
const (
	HeaderXForwardedFor = "x-forwarded-for"
	HeaderForwarded     = "forwarded" // RFC 7239
)

// MinAPITokenLen is the shortest HANDOFF_API_TOKEN serve accepts: 32
// characters of a random token are well past guessing.
const MinAPITokenLen = 32

// CheckAPIToken returns why tok cannot be the HANDOFF_API_TOKEN, or nil
// (empty turns the token off). The message never repeats the value.
func CheckAPIToken(tok string) error {
	if tok != "" && len(tok) < MinAPITokenLen {
		return fmt.Errorf("HANDOFF_API_TOKEN is %d characters long and must be at least %d; generate one with: openssl rand -base64 33", len(tok), MinAPITokenLen)
	}
	return nil
}

// trustedProxies decodes a list of CIDRs or single addresses.
func (d *decoder) trustedProxies(path string, n *yaml.Node, dst *[]netip.Prefix) {
	d.list(path, n, func(p string, item *yaml.Node) {
		var s string
		if !d.str(p, item, &s) {
			return
		}
		pfx, err := parseProxy(s)
		if err != nil {
			d.fail(p, item, "%v", err)
			return
		}
		*dst = append(*dst, pfx)
	})
}

// parseProxy reads "10.0.0.0/8", "2001:db8::/32" or a single address.
func parseProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR range (e.g. 10.0.0.0/8 or 2001:db8::/32)", s)
		}
		if pfx.Bits() == 0 {
			return netip.Prefix{}, fmt.Errorf("%q trusts every address, so anyone could name any client address; list the proxies' own addresses", s)
		}
		return pfx.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, errors.New("must be an IP address or a CIDR range (e.g. 127.0.0.1 or 10.0.0.0/8)")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// proxyHeader decodes proxy_header: x-forwarded-for or forwarded.
func (d *decoder) proxyHeader(path string, n *yaml.Node, dst *string) {
	var s string
	if !d.str(path, n, &s) {
		return
	}
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case HeaderXForwardedFor, HeaderForwarded:
		*dst = v
	default:
		d.fail(path, n, "must be x-forwarded-for or forwarded (RFC 7239), the header your proxy sets")
	}
}

// envLabel names the environment variable an *_env key holds, for a
// message. A name that does not look like one (not in capitals, or a long
// run of capitals and digits without an underscore) may be a secret pasted
// in place of its variable's name, so it is described, never repeated.
func envLabel(name string) string {
	conventional := len(name) <= 64 && (len(name) < 16 || strings.Contains(name, "_"))
	for i := 0; i < len(name) && conventional; i++ {
		c := name[i]
		conventional = 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9'
	}
	if conventional && name != "" {
		return "environment variable " + name
	}
	return fmt.Sprintf("the environment variable this key names (%d characters, not repeated: a name not in CAPITALS may be a pasted secret)", len(name))
}
