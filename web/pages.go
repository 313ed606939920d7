package web

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/handoff/handoff/leads"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// pageCSP allows only this origin's scripts and styles: the dashboard has
// no inline script, and htmx is told not to inject its indicator styles.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// render writes a page: rendered to a buffer first, so a failed render
// becomes an error page rather than half a page.
func render(c *echo.Context, status int, page templ.Component) error {
	var buf bytes.Buffer
	if err := page.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// isHX reports whether htmx sent the request (it then wants a fragment).
func isHX(c *echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// wantsHTML reports whether the client reads HTML: a browser or htmx.
func wantsHTML(r *http.Request) bool {
	return r.Header.Get("HX-Request") == "true" || strings.Contains(r.Header.Get("Accept"), "text/html")
}

// layout gathers what every page shows around its content: who is logged
// in and the counts of the navigation.
func (s *Server) layout(c *echo.Context, title, active string) (views.Layout, error) {
	now := s.now()
	counts, err := s.st.CountsFor(s.visible(c), stuckBefore(s.cfg, now))
	if err != nil {
		return views.Layout{}, err
	}
	l := views.Layout{Title: title, Active: active, Counts: counts, Now: now}
	if p := who(c); p != nil {
		l.User, l.Role, l.CSRF = p.Name, p.Role, csrfOf(c)
	}
	if l.Undo, err = s.layoutUndo(c, active); err != nil { // undo.go
		return views.Layout{}, err
	}
	return l, nil
}

// safeNext keeps a post-login destination only when it is a path on this
// site: "/drafts", never "//evil.example" or "https://evil.example".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

// loginForm answers GET /login.
func (s *Server) loginForm(c *echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if s.session(c) != nil {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return render(c, http.StatusOK, views.Login(views.LoginPage{Next: next}))
}

// loginSubmit answers POST /login: a wrong name or password (or too many
// of them) shows the form again with one sentence; success sets the
// session cookie and goes where the person was headed.
func (s *Server) loginSubmit(c *echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	next := safeNext(c.FormValue("next"))
	secret, err := s.login(c, name, c.FormValue("password"))
	if code := (*users.CodeNeeded)(nil); errors.As(err, &code) {
		return s.startCode(c, code, next)
	}
	if err != nil {
		if status, msg := answerFor(err); status == http.StatusUnauthorized || status == http.StatusTooManyRequests || status == http.StatusForbidden {
			return render(c, status, views.Login(views.LoginPage{Name: name, Next: next, Error: msg}))
		}
		return err
	}
	c.SetCookie(s.sessionCookieFor(secret, int(users.SessionMax.Seconds())))
	return c.Redirect(http.StatusSeeOther, next)
}

// logout answers POST /logout: the session is deleted, not just forgotten
// by the browser, so a copied cookie stops working too.
func (s *Server) logout(c *echo.Context) error {
	p := who(c)
	if err := s.accounts.Logout(c.Request().Context(), p.Name, p.hash, c.RealIP(), s.now()); err != nil {
		return err
	}
	c.SetCookie(s.sessionCookieFor("", -1))
	return c.Redirect(http.StatusSeeOther, "/login")
}

// overviewPage answers GET /: the counts and the leads that are stuck.
func (s *Server) overviewPage(c *echo.Context) error { return s.renderOverview(c, nil) }

// renderOverview is the overview with n, what an admin's action on it did
// (nil: none).
func (s *Server) renderOverview(c *echo.Context, n *views.Notice) error {
	l, err := s.layout(c, "Overview", "overview")
	if err != nil {
		return err
	}
	o := views.Overview{Counts: l.Counts, Stuck: []views.HandoffRow{}, Notice: n}
	if o.Drafting, err = s.st.DraftingFor(s.visible(c)); err != nil {
		return err
	}
	if o.Stats, err = s.draftStats(s.visible(c), l.Now); err != nil {
		return err
	}
	if o.Quality, err = s.qualityStats(s.visible(c), l.Now, statsDays); err != nil {
		return err
	}
	if o.Canaries, err = s.canaries(c); err != nil {
		return err
	}
	after := leads.StuckAfter(s.cfg)
	for _, st := range leads.OpenStatuses {
		o.Thresholds = append(o.Thresholds, views.Fact{Label: string(st), Value: views.Age(after[st])})
		hs, err := s.st.StuckLeadsFor(s.visible(c), st, l.Now.Add(-after[st]), 5)
		if err != nil {
			return err
		}
		rows, err := s.handoffRows(hs, l.Now)
		if err != nil {
			return err
		}
		o.Stuck = append(o.Stuck, rows...)
	}
	if us := s.unreadableFor(c, s.st.Unreadable()); len(us) > 0 {
		o.Unreadable = &views.Notice{Tone: "error", Text: unreadableBanner(us)}
	}
	o.Backup = s.backupNotice(l.Now)
	return render(c, http.StatusOK, views.OverviewPage(l, o))
}

// unreadableFor is us for a person who sees every client; nothing for one
// limited to some, since a record that cannot be read has no channel to
// tell whose it is.
func (s *Server) unreadableFor(c *echo.Context, us []store.Unreadable) []store.Unreadable {
	if !s.visible(c).All() {
		return nil
	}
	return us
}

// unreadableBanner is the overview's sentence about the records the store
// knows cannot be read, naming the first few.
func unreadableBanner(us []store.Unreadable) string {
	var ids []string
	for _, u := range us[:min(3, len(us))] {
		ids = append(ids, u.Kind+" "+u.ID)
	}
	more := ""
	if len(us) > len(ids) {
		more = ", …"
	}
	n := "1 record cannot be read"
	if len(us) > 1 {
		n = fmt.Sprintf("%d records cannot be read", len(us))
	}
	return n + " — see handoff verify (" + strings.Join(ids, ", ") + more + ")."
}

// handoffRows are the list's rows of hs, each with its lead's latest
// message (web/handoffs.go).
func (s *Server) handoffRows(hs []store.Handoff, now time.Time) ([]views.HandoffRow, error) {
	after := leads.StuckAfter(s.cfg)
	last, _, err := s.st.LastMessages(hs) // an unreadable one is listed apart (the page's banner)
	if err != nil {
		return nil, err
	}
	rows := make([]views.HandoffRow, 0, len(hs))
	for i, h := range hs {
		r := views.HandoffRow{
			Key: h.Key, Channel: h.Channel, Contact: h.Contact, Owner: h.Owner, Status: h.Status,
			Since: h.Since, InStatus: views.Age(now.Sub(h.Since)), Cycle: h.Cycle,
		}
		lastMessage(&r, last[i], h, now)
		if d, ok := after[h.Status]; ok {
			r.StuckAfter = views.Age(d)
			r.Stuck = h.Since.Before(now.Add(-d))
		}
		if h.LastEventKey != "" {
			r.EventURL = views.EventURL(h.LastEventKey)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// handoffsLimit bounds the handoffs page.
const handoffsLimit = 200

// handoffsPage answers GET /handoffs?status=&stuck=true.
func (s *Server) handoffsPage(c *echo.Context) error {
	q, err := parseHandoffQuery(c)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Handoffs", "handoffs")
	if err != nil {
		return err
	}
	hs, err := s.handoffs(s.only(c), q, l.Now, handoffsLimit+1)
	if err != nil {
		return err
	}
	list := views.HandoffList{Status: string(q.Status), Stuck: q.Stuck, Limit: handoffsLimit}
	if len(hs) > handoffsLimit {
		hs, list.More = hs[:handoffsLimit], true
	}
	if list.Rows, err = s.handoffRows(hs, l.Now); err != nil {
		return err
	}
	l.Unreadable = s.unreadableFor(c, s.st.UnreadableOf("lead"))
	return render(c, http.StatusOK, views.HandoffsPage(l, list))
}
