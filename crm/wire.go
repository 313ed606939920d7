package crm

import (
	"fmt"
	"net/http"

	"github.com/handoff/handoff/provider"
)

// Judge sorts a CRM's answer to a write, as the providers' answers are
// sorted: 2xx is done (nil); 429 was not accepted, try after its
// Retry-After (*provider.NotSent); 408 and 5xx may have acted
// (*provider.Ambiguous); any other 4xx will not change on a resend
// (*provider.Permanent), in the CRM's own words.
func Judge(name string, c *provider.Caller, a provider.Answer, why func(provider.Answer) string) error {
	switch {
	case a.Status >= 200 && a.Status < 300:
		return nil
	}
	reason := provider.Excerpt(a.Body)
	if why != nil {
		if w := why(a); w != "" {
			reason = w
		}
	}
	err := fmt.Errorf("%s: answered %d %s: %s", name, a.Status, http.StatusText(a.Status), reason)
	switch {
	case a.Status == http.StatusTooManyRequests:
		return &provider.NotSent{Err: err, RetryAfter: c.RetryAfter(a)}
	case a.Status == http.StatusRequestTimeout || a.Status >= 500:
		return &provider.Ambiguous{Status: a.Status, Err: err, RetryAfter: c.RetryAfter(a)}
	default:
		return &provider.Permanent{Status: a.Status, Err: err}
	}
}
