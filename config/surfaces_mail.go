package config

// MailSurfaces are the approval surfaces of mail and push: email and ntfy
// (approvals.email, approvals.ntfy). This is the core's placeholder; the
// mailpush branch fills it in this file.
type MailSurfaces struct{}

// Any reports whether a mail or push surface is configured.
func (m MailSurfaces) Any() bool { return false }

// mailSurfaces adds the keys of the mail and push surfaces to the handlers
// hs of the approvals mapping, decoding into m.
func (d *decoder) mailSurfaces(hs handlers, m *MailSurfaces, c *Config) {}
