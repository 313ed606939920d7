package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// reconcileLimit bounds the reconcile page.
const reconcileLimit = 200

// reconcilePage answers GET /reconcile: every reply whose outcome is unknown.
func (s *Server) reconcilePage(c *echo.Context) error {
	rows, err := s.st.OutboxByStatus(store.OutboxNeedsReconciliation, reconcileLimit)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Reconcile", "reconcile")
	if err != nil {
		return err
	}
	l.Unreadable = s.unreadableFor(c, s.st.UnreadableOf("outbox row"))
	r := views.ReconcileRows{Rows: rows, Limit: reconcileLimit, Lookup: s.lookupProviders(), Names: map[string]string{}}
	for _, o := range rows {
		r.Names[o.ID] = s.customerOf(o.EventKey) // the name, else the contact (undo.go)
	}
	if c.QueryParam("action") == "lookup" {
		r.Notice = s.lookedNotice(c.QueryParam("done")) // after "Look it up now" (pages_deadletters.go)
	}
	// The notice after a verdict names the row only when the row bears it
	// out, so a crafted link cannot make the page say anything else.
	if id := c.QueryParam("reconciled"); id != "" {
		o, err := s.st.OutboxRow(id)
		if n := len(o.Reconciliations); err == nil && n > 0 {
			switch last := o.Reconciliations[n-1]; {
			case last.Outcome == "sent" && c.QueryParam("outcome") == "sent":
				r.Notice = &views.Notice{Tone: "ok", Text: "Reply " + id + " is recorded as sent (provider id " + last.ProviderID + ") by " + last.By + "."}
			case last.Outcome == "not_sent" && c.QueryParam("outcome") == "not_sent":
				r.Notice = &views.Notice{Tone: "ok", Text: "Reply " + id + " was queued again by " + last.By + ", with the same reference."}
			}
		}
	}
	return render(c, http.StatusOK, views.ReconcilePage(l, r))
}

// reconcileSubmit answers POST /reconcile/{outbox id} (form: outcome,
// provider_id, checked): a person's verdict, through the same
// reconciliation as the API.
func (s *Server) reconcileSubmit(c *echo.Context) error {
	id := c.Param("*")
	if c.FormValue("checked") != "yes" {
		return errorf(http.StatusBadRequest, "tick “I checked with the provider” first: a verdict must come from checking")
	}
	outcome := c.FormValue("outcome")
	if _, err := s.reconcileRow(c, id, outcome, c.FormValue("provider_id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/reconcile?"+url.Values{"reconciled": {id}, "outcome": {outcome}}.Encode())
}

// settingsPage answers GET /settings: the configuration, redacted, and its warnings.
func (s *Server) settingsPage(c *echo.Context) error {
	l, err := s.layout(c, "Settings", "settings")
	if err != nil {
		return err
	}
	sz, err := s.st.Size()
	if err != nil {
		return err
	}
	db := []views.Fact{
		{Label: "file", Value: s.st.Path(), Mono: true},
		{Label: "size", Value: fmt.Sprintf("%.1f MiB (%d bytes)", float64(sz.Bytes)/(1<<20), sz.Bytes)},
		{Label: "free pages", Value: fmt.Sprintf("%d of %d bytes each (%.1f MiB reusable)", sz.FreePages, sz.PageSize, float64(sz.FreePages*sz.PageSize)/(1<<20))},
	}
	return render(c, http.StatusOK, views.SettingsPage(l, views.Settings{Config: s.cfg.Redacted(), Warnings: s.cfg.Warnings(), Database: db}))
}

const (
	// auditLimit is how many entries a page of the audit log shows.
	auditLimit = 100
	// auditScan bounds how many entries one page reads while filtering.
	auditScan = 5000
)

// auditActions are the actions the audit log names, offered by the
// filter while typing (any other value still filters).
var auditActions = []string{
	"approve draft", "reject draft", "undo approval", "undo rejection", "hold draft", "draft again", "close lead", "undo close",
	"login", "login failed", "login refused", "logout", "log out other sessions", "step-up", "step-up failed",
	"create user", "change user", "disable user", "enable user", "remove user", "reset password", "change password", "set user email", "unlock login",
	"start second factor enrolment", "enrol second factor", "remove second factor", "reset second factor",
	"create token", "revoke token", "export", "erase", "backup restored", "reconcile", "look up",
}

// auditPage answers GET /audit?who=&action=&q=&before=: a page of the
// audit log, newest first, filtered by who, the action and a part of the
// target or detail; before (an entry id the previous page gave) pages on.
func (s *Server) auditPage(c *echo.Context) error {
	f := store.AuditFilter{
		Who: strings.TrimSpace(c.QueryParam("who")), Action: strings.TrimSpace(c.QueryParam("action")),
		Text: strings.TrimSpace(c.QueryParam("q")), Before: c.QueryParam("before"),
		Limit: auditLimit, Scan: auditScan,
	}
	for name, v := range map[string]string{"who": f.Who, "action": f.Action, "q": f.Text} {
		if len(v) > 200 {
			return errorf(http.StatusBadRequest, "the %s filter is %d bytes; keep it under 200", name, len(v))
		}
	}
	if f.Before != "" && !validULID(f.Before) {
		return errorf(http.StatusBadRequest, "before %q is not an entry id this log gave out", f.Before)
	}
	page, err := s.st.AuditPageOf(f)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Audit", "audit")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AuditPage(l, views.Audit{Filter: f, Page: page, Actions: auditActions}))
}

// validULID reports whether v is 26 characters of Crockford's base32, as
// the audit log's entry ids are.
func validULID(v string) bool {
	if len(v) != 26 {
		return false
	}
	for _, r := range v {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", r) {
			return false
		}
	}
	return true
}
