package web

// routes lists every route of the server in one place.
func (s *Server) routes() {
	e := s.e
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.POST("/hooks/:channel", s.receiveHook)

	api := e.Group("/api/v1", crossOrigin, s.requireAPI)
	api.GET("/events/*", s.eventTimeline)
	api.GET("/handoffs", s.listHandoffs)
	api.GET("/drafts", s.listDrafts)
	api.POST("/drafts/:id/approve", s.approveDraft)
	api.POST("/drafts/:id/reject", s.rejectDraft)
	api.GET("/outbox/*", s.outboxRow)
	api.POST("/reconcile/*", s.reconcile)
	api.GET("/sandbox/messages", s.sandboxMessages)
}
