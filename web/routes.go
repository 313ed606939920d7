package web

import (
	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
)

// routes lists every route of the server in one place.
func (s *Server) routes() {
	e := s.e
	// A handler's panic becomes a logged 500 with its stack, not a dropped
	// connection (http.ErrAbortHandler, used to cut a broken stream, passes).
	e.Use(middleware.Recover())
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.GET("/metrics", s.metricsHandler)

	e.POST("/hooks/:channel", s.receiveHook)

	// The JSON API: a bearer token or a session. Approvers work drafts,
	// leads and timelines; everything else is for admins.
	api := e.Group("/api/v1", crossOrigin, s.requireAPI)
	api.GET("/events/*", s.eventTimeline)
	api.GET("/handoffs", s.listHandoffs)
	api.GET("/drafts", s.listDrafts)
	api.POST("/drafts/:id/approve", s.approveDraft)
	api.POST("/drafts/:id/reject", s.rejectDraft)
	api.GET("/outbox/*", s.outboxRow)
	api.POST("/reconcile/*", s.reconcile, requireAdmin)
	api.GET("/sandbox/messages", s.sandboxMessages, requireAdmin)
	api.GET("/dead-letters", s.listDeadLetters, requireAdmin)
	api.POST("/dead-letters/replay", s.startBulkReplay, requireAdmin)
	api.GET("/dead-letters/bulk/:id", s.bulkReplayStatus, requireAdmin)
	api.POST("/dead-letters/bulk/:id/cancel", s.cancelBulkReplay, requireAdmin)
	api.POST("/dead-letters/*", s.deadLetterAction, requireAdmin) // {id}/replay, {id}/cancel
	api.GET("/keys/:key", s.getKey, requireAdmin)
	api.POST("/keys/:key/claim", s.claimKey, requireAdmin)
	api.POST("/keys/:key/effect-pending", s.keyEffectPending, requireAdmin)
	api.POST("/keys/:key/complete", s.completeKey, requireAdmin)
	api.POST("/keys/:key/reconcile", s.reconcileKey, requireAdmin)
	api.GET("/backup", s.downloadBackup, requireAdmin)

	// The dashboard. A page needs a session (GET without one goes to
	// /login), and every POST also needs the session's CSRF token and a
	// same-origin browser. POST /login has no session yet, so only the
	// origin check.
	e.GET("/static/:name", s.staticFile)
	e.GET("/login", s.loginForm)
	e.POST("/login", s.loginSubmit, crossOrigin, limitForm)
	page := []echo.MiddlewareFunc{crossOrigin, limitForm, s.requirePage}
	admin := []echo.MiddlewareFunc{crossOrigin, limitForm, s.requirePage, requireAdmin}
	e.POST("/logout", s.logout, page...)
	e.GET("/", s.overviewPage, page...)
	e.GET("/search", s.search, page...)
	e.GET("/drafts", s.draftsPage, page...)
	e.POST("/drafts/:id/approve", s.approveFromQueue, page...)
	e.POST("/drafts/:id/reject", s.rejectFromQueue, page...)
	e.GET("/handoffs", s.handoffsPage, page...)
	e.GET("/events/*", s.timelinePage, page...)
	e.GET("/reconcile", s.reconcilePage, admin...)
	e.POST("/reconcile/*", s.reconcileSubmit, admin...)
	e.GET("/users", s.usersPage, admin...)
	e.POST("/users", s.createUser, admin...)
	e.POST("/users/tokens", s.createToken, admin...)
	e.POST("/users/tokens/:id/revoke", s.revokeToken, admin...)
	e.GET("/settings", s.settingsPage, admin...)
	e.GET("/audit", s.auditPage, admin...)
	e.GET("/dead-letters", s.deadLettersPage, admin...)
	e.POST("/dead-letters/replay", s.bulkReplaySubmit, admin...)
	e.GET("/dead-letters/bulk/:id", s.bulkStatusPage, admin...)
	e.POST("/dead-letters/bulk/:id/cancel", s.bulkCancelSubmit, admin...)
	e.POST("/dead-letters/*", s.deadLetterSubmit, admin...) // {id}/replay, {id}/cancel
	e.GET("/keys", s.keysPage, admin...)
	e.POST("/keys/:key/reconcile", s.keyReconcileSubmit, admin...)
	e.GET("/backups", s.backupsPage, admin...)
	e.GET("/backups/download", s.downloadBackup, admin...)
	e.GET("/backups/file/:name", s.backupFile, admin...)
}
