package web

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/config"
)

// clientIP is how the server finds a request's client address, which the
// login and token limits, the audit log's From and the logs use. With no
// trusted proxies it is the TCP peer. With some, the configured header is
// read only when the peer is one of them, and the address taken is the
// right-most one that is not a trusted proxy: everything left of it was
// written by the client and may be forged.
//
// Only the one configured header is read: a proxy that maintains
// X-Forwarded-For passes a Forwarded header from the client through
// untouched (and the other way round), so reading whichever is present
// would let a client name any address.
func clientIP(trusted []netip.Prefix, header string) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	if header == config.HeaderForwarded {
		return forwardedIP(trusted)
	}
	// Echo's extractor trusts loopback, link-local and private peers by
	// default; only the configured ranges are trusted here.
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// forwardedIP reads the for= parameters of RFC 7239 Forwarded headers with
// the same rule as Echo's X-Forwarded-For extractor (which has no
// Forwarded counterpart): right to left, the first address that is not a
// trusted proxy; a value that is not an address (unknown, an obfuscated
// _name) stops the walk at the peer before it.
func forwardedIP(trusted []netip.Prefix) echo.IPExtractor {
	trust := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		peer := echo.ExtractIPDirect()(r)
		pa, err := netip.ParseAddr(peer)
		if err != nil || !trust(pa.Unmap()) {
			return peer
		}
		var hops []string
		for _, h := range r.Header.Values("Forwarded") {
			hops = append(hops, strings.Split(h, ",")...)
		}
		last := peer
		for i := len(hops) - 1; i >= 0; i-- {
			a, ok := forwardedFor(hops[i])
			if !ok {
				return last
			}
			if !trust(a) {
				return a.String()
			}
			last = a.String()
		}
		return last // every hop a trusted proxy: the furthest one
	}
}

// forwardedFor reads the address of one Forwarded element's for= pair:
// for=192.0.2.60, for="[2001:db8::17]:4711", for="192.0.2.60:80".
func forwardedFor(elem string) (netip.Addr, bool) {
	for _, pair := range strings.Split(elem, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "for") {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if strings.HasPrefix(v, "[") {
			end := strings.IndexByte(v, ']')
			if end < 0 {
				return netip.Addr{}, false
			}
			v = v[1:end]
		} else if host, _, err := net.SplitHostPort(v); err == nil {
			v = host
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}
