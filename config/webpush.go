package config

import (
	"net/mail"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// WebPushSurface is approvals.webpush: the dashboard's queue page offers
// each approver browser notifications (Web Push with VAPID, RFC 8291 and
// RFC 8292); a new draft of a client the person may see is pushed to their
// browsers. A push is a nudge: it opens the draft's card, and deciding
// stays on the page.
type WebPushSurface struct {
	// Subject (yaml subject, required) is the VAPID subject the push
	// services may contact the operator at: a mailto: or https: URL.
	Subject string
}

func (d *decoder) webPush(path string, n *yaml.Node) *WebPushSurface {
	w := &WebPushSurface{}
	set, ok := d.mapping(path, n, handlers{
		"subject": func(p string, v *yaml.Node) {
			if d.str(p, v, &w.Subject) {
				if why := vapidSubject(w.Subject); why != "" {
					d.fail(p, v, "%q %s", w.Subject, why)
				}
			}
		},
	})
	if !ok {
		return nil
	}
	if set["subject"] == nil {
		d.fail(joinPath(path, "subject"), n, "missing; a mailto: or https: address the push services may contact you at (RFC 8292), e.g. mailto:ops@example.com")
	}
	return w
}

// vapidSubject says what is wrong with a VAPID subject, "" when nothing is.
func vapidSubject(s string) string {
	switch {
	case strings.HasPrefix(s, "mailto:"):
		if _, err := mail.ParseAddress(strings.TrimPrefix(s, "mailto:")); err != nil {
			return "is not a mailto: address (mailto:ops@example.com)"
		}
		return ""
	case strings.HasPrefix(s, "https://"):
		if u, err := url.Parse(s); err != nil || u.Host == "" {
			return "is not an https: URL"
		}
		return ""
	}
	return "is neither a mailto: nor an https: URL (RFC 8292's subject)"
}
