// Package web owns HTTP: the inbound webhooks, the JSON API, the health
// routes, the metrics and the dashboard. Handlers parse, call the store or the
// jobs, and render; echo.Context never leaves this package.
package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/approvals"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// Waker is told when new work was committed.
type Waker interface{ Wake() }

// Deps is what the server needs; every field but Now is required.
type Deps struct {
	Config   *config.Config
	Store    *store.Store
	Jobs     Waker
	Logger   *slog.Logger
	APIToken string // HANDOFF_API_TOKEN; empty disables bearer access
	Now      func() time.Time
	Metrics  *Metrics // nil: no metrics (tests)
	Backups  Backups  // backup now, offsite copies, restore (backup.go); nil: not offered
	// Providers by name, for a person's "look it up now" (lookup.go); nil: none can.
	Providers map[string]delivery.Looker
	// Outbox is delivery's operations with every job kind's dead-letter
	// rules (app's, workers.DeadKinds); nil: delivery's own kinds' only.
	Outbox *delivery.Outbox
	// Surfaces are the approval surfaces (package approvals) that take
	// requests at POST /surfaces/{name}; nil: none.
	Surfaces *approvals.Approvals
}

// Server is the HTTP side of handoff.
type Server struct {
	e         *echo.Echo
	cfg       *config.Config
	st        *store.Store
	jobs      Waker
	log       *slog.Logger
	now       func() time.Time
	verifiers map[string]hook.Verifier
	// sealer encrypts second-factor secrets at rest (password.Sealer);
	// nil without a secret key: they are stored as they are.
	sealer *password.Sealer
	// accounts are the rules of people's accounts (package users).
	accounts *users.Accounts

	cookie     string // the session cookie's name
	metrics    *Metrics
	ready      readyCache
	backupSums *sumCache // SHA-256 of the scheduled backup files
	downloads  downloads // snapshot downloads running, their idle bound (backup.go)
	backups    Backups
	claims     *claims     // who looks at which waiting draft (claims.go)
	bodies     *bodyBudget // webhook bodies in memory at once (limits.go)
	providers  map[string]delivery.Looker
	outbox     *delivery.Outbox // replies and the dead letters (Deps.Outbox)
	surfaces   *approvals.Approvals
}

// New builds the server and its routes.
func New(d Deps) (*Server, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Server{
		cfg: d.Config, st: d.Store, jobs: d.Jobs, log: d.Logger, now: d.Now, verifiers: map[string]hook.Verifier{},
		cookie:     sessionCookie,
		backupSums: &sumCache{sums: map[sumKey]string{}},
		claims:     newClaims(),
		bodies:     newBodyBudget(d.Config.Limits.BodiesInFlight),
		providers:  d.Providers,
		outbox:     d.Outbox,
		surfaces:   d.Surfaces,
	}
	if s.outbox == nil {
		s.outbox = delivery.New(d.Store, d.Config)
	}
	if s.surfaces != nil {
		s.surfaces.Decided = s.claims.release // a decision on Slack or Telegram ends the card's claim too
	}
	if s.https() {
		// A __Host- cookie is only accepted when Secure, on Path=/ and
		// without a Domain: no other host and no plain-http page can set
		// or shadow it.
		s.cookie = hostCookie
	}
	s.ready.ping, s.ready.full = d.Store.Ping, d.Store.NoSpace
	if d.Metrics == nil {
		d.Metrics = NewMetrics(d.Store, d.Config, d.Now)
	}
	s.metrics = d.Metrics
	s.metrics.watchBodies(s.bodies)
	s.backups = d.Backups
	if d.Config.Auth.SecretKey != "" {
		sealer, err := password.NewSealer(d.Config.Auth.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("the secret key (%s): %w", secretKeyEnv(d.Config), err)
		}
		s.sealer = sealer
	}
	var words []string
	for _, cl := range d.Config.ClientList() {
		words = append(words, cl.ID, cl.Name)
	}
	s.accounts = users.New(d.Store, users.Options{Sealer: s.sealer, Words: words, CheckClients: d.Config.CheckClients, RequireTOTPForAdmins: d.Config.Auth.RequireTOTPForAdmins, APIToken: d.APIToken})
	verifiers, err := newVerifiers(d.Config)
	if err != nil {
		return nil, err
	}
	s.verifiers = verifiers
	s.e = echo.NewWithConfig(echo.Config{
		Logger:           d.Logger,
		HTTPErrorHandler: s.handleError,
		IPExtractor:      clientIP(d.Config.TrustedProxies, d.Config.ProxyHeader),
		Router:           echo.NewRouter(echo.RouterConfig{UnescapePathParamValues: true}),
	})
	// Pages, JSON, CSS and JS go gzipped to a client that accepts it
	// (a 185 KB page is under 10 KB). Backup files are streamed as they are:
	// large, and their length is part of the answer.
	s.e.Use(middleware.GzipWithConfig(middleware.GzipConfig{MinLength: 1024, Skipper: skipGzip}))
	s.routes()
	return s, nil
}

// skipGzip leaves the backup downloads uncompressed, and /metrics, which
// promhttp compresses itself.
func skipGzip(c *echo.Context) bool {
	p := c.Request().URL.Path
	return p == "/metrics" || p == "/api/v1/backup" || p == "/backups/download" || strings.HasPrefix(p, "/backups/file/")
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// apiError is a client-facing failure: a status and one sentence.
type apiError struct {
	status int
	msg    string
	err    error // the cause, logged but never shown
}

func (e *apiError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *apiError) Unwrap() error { return e.err }

func errorf(status int, format string, a ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, a...)}
}

// routeSentence words the router's own refusals (no such route, wrong
// method) as sentences that name the request, like every other error.
func routeSentence(c *echo.Context, status int, msg string) string {
	if msg != http.StatusText(status) {
		return msg
	}
	r := c.Request()
	switch status {
	case http.StatusNotFound:
		return fmt.Sprintf("there is no %s %s", r.Method, r.URL.Path)
	case http.StatusMethodNotAllowed:
		return fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)
	}
	return msg
}

// handleError is where every handler error stops travelling: it is logged
// once here (server errors only) and answered as {"error": "<sentence>"},
// or, for a browser outside the API and the webhooks, as a small page (for
// htmx, a sentence that lands in #flash). That covers the router's own 404
// and 405 and the refusals of the session and CSRF checks.
func (s *Server) handleError(c *echo.Context, err error) {
	if resp, _ := echo.UnwrapResponse(c.Response()); resp != nil && resp.Committed {
		return
	}
	r := c.Request()
	status, msg := answerFor(err)
	msg = routeSentence(c, status, msg)
	if status >= 500 {
		corr := ulid.Make().String()
		c.Response().Header().Set(correlationHeader, corr)
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "from", c.RealIP(), "correlation_id", corr, "request_id", requestIDOf(c), slog.Any("err", err))
	}
	switch {
	case r.Method == http.MethodHead:
		_ = c.NoContent(status)
	case !wantsHTML(r) || strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/hooks/"):
		_ = c.JSON(status, map[string]string{"error": msg})
	case isHX(c):
		c.Response().Header().Set("HX-Retarget", "#flash")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		_ = render(c, status, views.ErrorFragment(msg))
	default:
		_ = render(c, status, views.Error(views.ErrorPage{Status: status, Message: msg, LoggedIn: who(c) != nil}))
	}
}

// secretKeyEnv names the variable the secret key is read from.
func secretKeyEnv(cfg *config.Config) string {
	if cfg.Auth.SecretKeyEnv != "" {
		return cfg.Auth.SecretKeyEnv
	}
	return config.DefaultSecretKeyEnv
}
