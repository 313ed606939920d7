package web

import (
	"slices"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/handoff/handoff/store"
)

// routes lists every route of the server in one place.
func (s *Server) routes() {
	e := s.e
	// A handler's panic becomes a logged 500 with its stack, not a dropped
	// connection (http.ErrAbortHandler, used to cut a broken stream, passes).
	e.Use(middleware.Recover())
	// Every answer: nosniff, no-store unless a handler says otherwise
	// (static files), and HSTS with an https base_url.
	e.Use(s.secureHeaders)
	e.Use(requestID)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	// The metrics need a token with the metrics scope (or an admin); a
	// metrics_addr listener serves them without one (app).
	// An admin's session here needs their second factor like any page
	// (s.enrolled).
	e.GET("/metrics", s.metricsHandler, s.requireAPI(store.ScopeMetrics), s.enrolled)

	e.POST("/hooks/:channel", s.receiveHook)
	e.GET("/hooks/:channel", s.hookHandshake) // Meta's subscription handshake; 405 elsewhere
	// The approval surfaces' callbacks (Slack's interactions, Telegram's
	// webhook): each verifies its own signature (web/surfaces.go).
	e.POST("/surfaces/:surface", s.receiveSurface)
	e.POST("/surfaces/:surface/*", s.receiveSurface)

	// The JSON API: a bearer token or a session, in the group of the scope
	// each route needs (users.Caller.May): an approver's session or an approve
	// token works drafts, leads and timelines; a read token only reads; a
	// keys token has the key API alone; everything else is for admins.
	api := func(need store.Scope) *echo.Group {
		return e.Group("/api/v1", crossOrigin, s.requireAPI(need), s.enrolled, s.clientScope)
	}
	apiRead := api(store.ScopeRead)
	apiRead.GET("/events/*", s.eventTimeline)
	apiRead.GET("/handoffs", s.listHandoffs)
	apiRead.GET("/drafts", s.listDrafts)
	apiRead.GET("/outbox/*", s.outboxRow)
	apiRead.GET("/stats/quality", s.qualityAPI) // edit distance, reasons and guard flags (quality.go)
	apiRead.GET("/canary", s.canaryAPI)         // each client's canary, A beside B (canary.go)
	apiApprove := api(store.ScopeApprove)
	apiApprove.POST("/drafts/:id/approve", s.approveDraft)
	apiApprove.POST("/drafts/:id/reject", s.rejectDraft)
	apiApprove.POST("/drafts/:id/undo", s.undoDraft)
	apiApprove.POST("/drafts/:id/template", s.templateDraft) // the reply window closed: an approved template instead (window.go)
	apiApprove.POST("/events/*", s.leadActionAPI)            // {key}/reply, {key}/redraft, {key}/close: every lead can end
	apiApprove.POST("/handoffs/*", s.reopenAPI)              // {key}/reopen: a close undone (undo.go)
	apiKeys := api(store.ScopeKeys)
	apiKeys.GET("/keys/:key", s.getKey)
	apiKeys.POST("/keys/:key/claim", s.claimKey)
	apiKeys.POST("/keys/:key/effect-pending", s.keyEffectPending)
	apiKeys.POST("/keys/:key/complete", s.completeKey)
	apiKeys.POST("/keys/:key/reconcile", s.reconcileKey)
	apiAdmin := api(store.ScopeAdmin)
	apiAdmin.POST("/reconcile/*", s.reconcile)
	apiAdmin.POST("/canary/:client/:action", s.canaryActionAPI) // promote, rollback
	apiAdmin.GET("/sandbox/messages", s.sandboxMessages)
	apiAdmin.GET("/dead-letters", s.listDeadLetters)
	apiAdmin.POST("/dead-letters/replay", s.startBulkReplay)
	apiAdmin.GET("/dead-letters/bulk/:id", s.bulkReplayStatus)
	apiAdmin.POST("/dead-letters/bulk/:id/cancel", s.cancelBulkReplay)
	apiAdmin.POST("/dead-letters/*", s.deadLetterAction) // {id}/replay, {id}/cancel, {id}/lookup
	apiAdmin.GET("/backup", s.downloadBackup)
	apiAdmin.POST("/backups", s.backupNowAPI) // ?to=s3 insists on the offsite copy
	apiAdmin.GET("/backups/offsite", s.offsiteListAPI)
	apiAdmin.GET("/clients/:id/facts", s.factsAPI) // a client's facts, versioned (facts.go)
	apiAdmin.PUT("/clients/:id/facts", s.putFactsAPI)
	apiAdmin.GET("/clients/:id/facts/:version", s.factsVersionAPI)
	// Each group answers the paths it does not know, and the last one
	// made wins: any caller who got in hears 404 there, not a scope's 403.
	api("")

	// The dashboard. A page needs a session (GET without one goes to
	// /login), and every POST also needs the session's CSRF token and a
	// same-origin browser. POST /login has no session yet, so only the
	// origin check.
	e.GET("/static/:name", s.staticFile)
	e.GET("/favicon.ico", s.favicon)
	e.GET("/login", s.loginForm)
	e.POST("/login", s.loginSubmit, crossOrigin, limitForm)
	// An admin who must enrol a second factor (auth.require_totp_for_admins)
	// gets only their account page and logout until they do (s.enrolled).
	self := []echo.MiddlewareFunc{crossOrigin, limitForm, s.requirePage}
	// clientScope keeps a person limited to clients to their own (clients.go).
	page := []echo.MiddlewareFunc{crossOrigin, limitForm, s.requirePage, s.enrolled, s.clientScope}
	admin := []echo.MiddlewareFunc{crossOrigin, limitForm, s.requirePage, s.enrolled, requireAdmin}
	// What cannot be undone also asks for the password (and code) again,
	// or a step-up of the last minutes (stepup.go).
	stepUpSelf := append(slices.Clone(self), s.stepUp)
	stepUpAdmin := append(slices.Clone(admin), s.stepUp)
	e.POST("/logout", s.logout, self...)

	// Accounts: the first start's setup link, a login's second factor, a
	// person's own account, and what admins do to people.
	e.GET("/setup/:token", s.setupForm)
	e.POST("/setup/:token", s.setupSubmit, crossOrigin, limitForm)
	e.GET("/login/code", s.loginCodeForm)
	e.POST("/login/code", s.loginCodeSubmit, crossOrigin, limitForm)
	e.GET("/account", s.accountPage, self...)
	e.GET("/account/confirm", s.stepUpForm, self...)
	e.POST("/account/confirm", s.stepUpSubmit, self...)
	e.POST("/account/password", s.changeOwnPassword, stepUpSelf...)
	e.POST("/account/sessions/end", s.endOtherSessions, self...)
	e.POST("/account/totp/start", s.startTOTP, stepUpSelf...)
	e.POST("/account/totp/confirm", s.confirmTOTP, self...) // the code of the secret only a stepped-up start shows
	e.POST("/account/totp/remove", s.removeOwnTOTP, stepUpSelf...)
	e.POST("/users/:name/password", s.resetPassword, admin...)
	e.POST("/users/:name/disable", s.disableUser, admin...)
	e.POST("/users/:name/enable", s.enableUser, admin...)
	e.POST("/users/:name/role", s.changeUser, admin...)
	e.POST("/users/:name/remove", s.removeUser, admin...)
	e.POST("/users/:name/totp/reset", s.resetTOTP, admin...)

	e.GET("/", s.overviewPage, page...)
	e.GET("/search", s.search, page...)
	e.GET("/drafts", s.draftsPage, page...)
	e.GET("/drafts/live", s.queueLive, page...)         // the open queue's poll (pages_drafts.go)
	e.GET("/sw.js", s.serviceWorker)                    // Web Push's service worker (webpush.go)
	e.POST("/push/subscribe", s.subscribePush, self...) // this browser's PushSubscription
	e.POST("/push/unsubscribe", s.unsubscribePush, self...)
	e.POST("/drafts/:id/approve", s.approveFromQueue, page...)
	e.POST("/drafts/:id/reject", s.rejectFromQueue, page...)
	e.POST("/drafts/selected", s.decideSelected, page...) // several drafts at once (selection.go)
	e.POST("/drafts/:id/undo", s.undoFromQueue, page...)
	e.POST("/drafts/:id/template", s.templateFromQueue, page...) // window.go
	e.GET("/undo", s.undoStackPage, page...)                     // the undo stack's poll (undo.go)
	e.POST("/handoffs/*", s.reopenPage, page...)                 // {key}/reopen: a close undone
	e.GET("/handoffs", s.handoffsPage, page...)
	e.GET("/events/*", s.timelinePage, page...)
	e.POST("/events/*", s.leadActionPage, page...) // {key}/reply, {key}/redraft, {key}/close
	// Data-protection requests, for an admin who gives their password
	// again: a client's or a contact's data as JSON, and its erasure.
	// Everyone sees the list of the clients they see.
	e.GET("/clients", s.clientsPage, page...)
	e.GET("/clients/:id/export", s.exportClient, stepUpAdmin...) // ?contact= for one contact
	e.POST("/clients/:id/erase", s.eraseClient, stepUpAdmin...)  // form: contact (empty: the whole client), confirm, current
	// A client's facts, what its drafts are written from: an admin's
	// (facts.go); the form may be longer than another (limitFactsForm).
	factsForm := []echo.MiddlewareFunc{crossOrigin, limitFactsForm, s.requirePage, s.enrolled, requireAdmin}
	e.GET("/clients/:id/facts", s.factsPage, admin...) // ?version=N, ?diff=N, ?from=A&to=B
	e.POST("/clients/:id/facts", s.saveFactsPage, factsForm...)
	e.POST("/clients/:id/facts/reload", s.reloadFactsPage, admin...) // the facts_file read again
	e.GET("/reconcile", s.reconcilePage, admin...)
	e.POST("/canary/:client/:action", s.canaryAction, admin...) // promote, rollback (canary.go)
	e.POST("/reconcile/*", s.reconcileSubmit, admin...)
	e.GET("/users", s.usersPage, admin...)
	e.POST("/users", s.createUser, admin...)
	e.POST("/users/tokens", s.createToken, stepUpAdmin...)
	e.POST("/users/tokens/:id/revoke", s.revokeToken, admin...)
	e.POST("/users/unlock", s.unlockLogin, admin...)
	e.GET("/settings", s.settingsPage, admin...)
	e.GET("/audit", s.auditPage, admin...)
	e.GET("/dead-letters", s.deadLettersPage, admin...)
	e.POST("/dead-letters/replay", s.bulkReplaySubmit, admin...)
	e.POST("/dead-letters/replay-selected", s.replaySelectedSubmit, admin...) // form: id, once per ticked row
	e.GET("/dead-letters/bulk/:id", s.bulkStatusPage, admin...)
	e.POST("/dead-letters/bulk/:id/cancel", s.bulkCancelSubmit, admin...)
	e.GET("/dead-letters/*", s.deadLetterPage, admin...)    // one item, in full
	e.POST("/dead-letters/*", s.deadLetterSubmit, admin...) // {id}/replay, {id}/cancel, {id}/lookup
	e.GET("/keys", s.keysPage, admin...)
	e.POST("/keys/:key/reconcile", s.keyReconcileSubmit, admin...)
	e.GET("/backups", s.backupsPage, admin...)
	e.GET("/backups/download", s.downloadBackup, admin...)
	e.GET("/backups/file/:name", s.backupFile, admin...)
	e.POST("/backups/now", s.backupNowPage, admin...)
	e.POST("/backups/restore", s.restoreListed, stepUpAdmin...)
	// The one multipart form: allowUpload stands in for limitForm, and
	// checks the CSRF token (a part of the body) once the session and the
	// role are known, before it gives the body an hour (pages_restore.go).
	e.POST("/backups/restore/upload", s.restoreUpload, closeOnRefusal, crossOrigin, s.requireSession, s.enrolled, requireAdmin, allowUpload)
}
