package web

import (
	"fmt"
	"net/http"
	"net/url"

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
	r := views.ReconcileRows{Rows: rows, Limit: reconcileLimit, Lookup: s.lookupProviders()}
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

// auditLimit is how many entries the audit page shows.
const auditLimit = 200

// auditPage answers GET /audit: the newest entries of the audit log.
func (s *Server) auditPage(c *echo.Context) error {
	entries, err := s.st.AuditLog(auditLimit)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Audit", "audit")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AuditPage(l, entries))
}
