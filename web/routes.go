package web

// routes lists every route of the server in one place.
func (s *Server) routes() {
	e := s.e
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.POST("/hooks/:channel", s.receiveHook)

	api := e.Group("/api/v1", s.requireToken)
	api.GET("/events/*", s.eventTimeline)
	api.GET("/handoffs", s.listHandoffs)
}
