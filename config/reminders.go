package config

import (
	"net/mail"
	"time"

	"go.yaml.in/yaml/v3"
)

// Reminders are approvals.remind_after and approvals.escalate_after with
// each surface's escalate_to: a draft still waiting remind_after after it
// was written is announced again on its surfaces; one still waiting
// escalate_after is announced to the second group each surface names for
// its client (escalate_to: a Slack channel, a Telegram chat, a mail
// address, an ntfy topic). Each happens once per draft (package approvals).
type Reminders struct {
	RemindAfter   time.Duration // yaml approvals.remind_after; 0: no reminder
	EscalateAfter time.Duration // yaml approvals.escalate_after; 0: no escalation
}

// Bounds of the reminders' thresholds.
const (
	MinRemindAfter = time.Minute
	MaxRemindAfter = 30 * 24 * time.Hour
)

// Review (yaml review) tunes how drafts wait for a person.
type Review struct {
	// WindowWarning (yaml review.window_warning) is how long before a
	// channel's reply window closes the queue marks a draft's card, a
	// digest lists it as closing soon, and the approval surfaces announce
	// it; default DefaultWindowWarning, 5m to 7 days.
	WindowWarning time.Duration
}

// DefaultWindowWarning is review.window_warning when the file sets none.
const DefaultWindowWarning = 2 * time.Hour

// WindowWarningOr is review.window_warning, or DefaultWindowWarning.
func (r Review) WindowWarningOr() time.Duration {
	if r.WindowWarning == 0 {
		return DefaultWindowWarning
	}
	return r.WindowWarning
}

// review decodes the review mapping.
func (d *decoder) review(path string, n *yaml.Node, r *Review) {
	d.mapping(path, n, handlers{
		"window_warning": func(p string, v *yaml.Node) {
			if d.duration(p, v, &r.WindowWarning, false) && (r.WindowWarning < 5*time.Minute || r.WindowWarning > 7*24*time.Hour) {
				d.fail(p, v, "%s is outside 5m to 168h; it is how long before a reply window closes a draft is marked as closing soon", v.Value)
			}
		},
	})
}

// reminderKeys adds remind_after and escalate_after to the handlers hs of
// the approvals mapping.
func (d *decoder) reminderKeys(hs handlers, r *Reminders) {
	threshold := func(dst *time.Duration, what string) func(string, *yaml.Node) {
		return func(p string, v *yaml.Node) {
			if d.duration(p, v, dst, false) && (*dst < MinRemindAfter || *dst > MaxRemindAfter) {
				d.fail(p, v, "%s is outside 1m to 720h; it is how long a draft waits before it is %s", v.Value, what)
			}
		}
	}
	hs["remind_after"] = threshold(&r.RemindAfter, "announced again")
	hs["escalate_after"] = threshold(&r.EscalateAfter, "escalated")
}

// checkReminders checks, once the approvals mapping is read, that the
// thresholds and the escalation places agree.
func (d *decoder) checkReminders(path string, n *yaml.Node, set map[string]*yaml.Node, a *Approvals) {
	r := a.Reminders
	if r.RemindAfter > 0 && r.EscalateAfter > 0 && r.EscalateAfter <= r.RemindAfter {
		d.fail(joinPath(path, "escalate_after"), set["escalate_after"], "%s is not after approvals.remind_after (%s); a draft is reminded of first, escalated later", r.EscalateAfter, r.RemindAfter)
	}
	places := a.escalationPlaces()
	if r.EscalateAfter > 0 && places == 0 {
		d.fail(joinPath(path, "escalate_after"), set["escalate_after"], "is set, but no surface names where to escalate; add escalate_to (client id -> channel, chat, address or topic) under approvals.slack, telegram, email or ntfy")
	}
	if r.EscalateAfter == 0 && places > 0 {
		d.fail(joinPath(path, "escalate_after"), n, "missing; a surface's escalate_to is set, so say how long a draft waits before it is escalated")
	}
}

// escalationPlaces counts the escalate_to entries of the surfaces.
func (a Approvals) escalationPlaces() int {
	n := 0
	if a.Slack != nil {
		n += len(a.Slack.EscalateTo)
	}
	if a.Telegram != nil {
		n += len(a.Telegram.EscalateTo)
	}
	if a.Mail.Email != nil {
		n += len(a.Mail.Email.EscalateTo)
	}
	if a.Mail.Ntfy != nil {
		n += len(a.Mail.Ntfy.EscalateTo)
	}
	return n
}

// mailAddress is the check of a bare mail address in a client map.
func mailAddress(addr string) string {
	if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr {
		return "is not a bare mail address (approvers@example.com)"
	}
	return ""
}
