package web

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves GET /metrics without a token, for the separate
// metrics_addr listener (keep it on a private address); anything else
// there is 404. The main listener serves /metrics only to a token with
// the metrics scope, or an admin.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}
