package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validName reports whether s is a channel or provider name: [a-z0-9-]+,
// short enough to sit in event keys and URLs.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validEnvName reports whether s can name an environment variable.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// checkHTTPURL returns why s is not an absolute http or https URL, or nil.
// The message repeats s with any password blanked out.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%q is not a URL: %v", redactURL(s), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL (e.g. https://example.com/path)", redactURL(s))
	}
	return nil
}

// checkAddr returns why s is not a host:port listen address, or nil.
func checkAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("%q is not a host:port address (e.g. 127.0.0.1:8080 or :8080)", s)
	}
	return nil
}

// redactURL blanks out the password of a URL's user info, if it has one. It
// works on the text so that it also cleans URLs that do not parse.
func redactURL(s string) string {
	scheme := strings.Index(s, "://")
	if scheme < 0 {
		return s
	}
	rest := s[scheme+3:]
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 {
		return s
	}
	start := scheme + 3 + colon + 1
	return s[:start] + redactedValue + s[scheme+3+at:]
}
