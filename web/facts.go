package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// A client's facts are an admin's: the page (GET /clients/{id}/facts,
// ?version=N to show one, ?diff=N for its changes from N-1 or
// ?from=A&to=B), its save (POST, form text and base) and the facts_file
// read again (POST …/reload); and the API's GET and PUT
// /api/v1/clients/{id}/facts and GET …/facts/{version}. Each save is a
// new version (facts.Save), the next draft uses it.

// maxFactsForm bounds the facts form's body: the facts URL-encoded take
// up to three bytes a byte, and the form has its token besides.
const maxFactsForm = 3*config.MaxFacts + 4<<10

// limitFactsForm stands in for limitForm on the facts form, whose body
// may be longer than another form's: a body past maxFactsForm is refused
// in a sentence before the session's token is looked for in it.
func limitFactsForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			return errorf(http.StatusUnsupportedMediaType, "the dashboard takes plain forms, not multipart uploads")
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, maxFactsForm+1))
		if err != nil {
			return &apiError{status: http.StatusBadRequest, msg: "the form could not be read", err: err}
		}
		if len(raw) > maxFactsForm {
			return errorf(http.StatusRequestEntityTooLarge, "the facts form is larger than %d bytes, so nothing was saved: facts are at most %d bytes", maxFactsForm, config.MaxFacts)
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		return next(c)
	}
}

// factsClient is the client of /clients/{id}/facts…: a configured one,
// else the 404 of a client that does not exist.
func (s *Server) factsClient(c *echo.Context) (config.Client, error) {
	cl, ok := s.cfg.Client(c.Param("id"))
	if !ok {
		return config.Client{}, errorf(http.StatusNotFound, "there is no client %q", c.Param("id"))
	}
	return cl, nil
}

// factsPage answers GET /clients/{id}/facts.
func (s *Server) factsPage(c *echo.Context) error {
	cl, err := s.factsClient(c)
	if err != nil {
		return err
	}
	var n *views.Notice
	if v := c.QueryParam("saved"); v != "" {
		n = &views.Notice{Tone: "ok", Text: "Saved as version " + v + ": the next draft is written from it."}
	}
	if v := c.QueryParam("same"); v != "" {
		n = &views.Notice{Tone: "ok", Text: "Nothing changed: version " + v + " already says this."}
	}
	if a := c.QueryParam("after"); a != "" && n != nil {
		n.Tone, n.Text = "warn", n.Text+" Version "+a+" was saved by someone else while you edited; both are kept, compare them below."
	}
	return s.renderFacts(c, http.StatusOK, cl, n, nil)
}

// renderFacts renders the facts page of cl; text, when not nil, is what
// the form holds (a refused save's, so nothing typed is lost).
func (s *Server) renderFacts(c *echo.Context, status int, cl config.Client, n *views.Notice, text *string) error {
	l, err := s.layout(c, "Facts of "+cl.Name, "clients")
	if err != nil {
		return err
	}
	p := views.FactsPage{ClientID: cl.ID, ClientName: cl.Name, Max: config.MaxFacts, Notice: n}
	p.File, _ = s.cfg.FactsFileOf(cl.ID)
	if p.History, err = facts.History(s.st, cl.ID); err != nil {
		return err
	}
	byNumber := map[int]*store.FactsVersion{}
	for i := range p.History {
		byNumber[p.History[i].Version] = &p.History[i]
	}
	if len(p.History) > 0 {
		p.Current, p.Shown = &p.History[0], &p.History[0]
		p.Text = p.Current.Text
	}
	read := func(name string) (*store.FactsVersion, error) {
		q := c.QueryParam(name)
		if q == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(q)
		if v, ok := byNumber[n]; err == nil && ok {
			return v, nil
		}
		if err == nil && n > 0 { // older than the history lists
			v, err := facts.Version(s.st, cl.ID, n)
			if err == nil {
				return &v, nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
		}
		return nil, errorf(http.StatusNotFound, "client %s has no facts version %q", cl.ID, q)
	}
	if v, err := read("version"); err != nil {
		return err
	} else if v != nil {
		p.Shown = v
	}
	to, err := read("diff")
	if err != nil {
		return err
	}
	var from *store.FactsVersion
	if to == nil {
		if from, err = read("from"); err != nil {
			return err
		}
		if to, err = read("to"); err != nil {
			return err
		}
		if to == nil && from != nil {
			to = p.Current
		}
	} else if to.Version > 1 {
		prev, ok := byNumber[to.Version-1]
		if !ok {
			v, err := facts.Version(s.st, cl.ID, to.Version-1)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			prev = &v
		}
		from = prev
	}
	if to != nil {
		d := &views.FactsDiff{To: to.Version}
		before := ""
		if from != nil {
			d.From, before = from.Version, from.Text
		}
		for _, line := range facts.Diff(before, to.Text) {
			d.Lines = append(d.Lines, views.DiffLine{Op: string(line.Op), Text: line.Text})
		}
		p.Diff = d
	}
	if f, ok, err := facts.Offer(s.st, cl.ID); err != nil {
		return err
	} else if ok {
		p.Offer = &f
	}
	if text != nil {
		p.Text = *text
	}
	return render(c, status, views.ClientFactsPage(l, p))
}

// saveFactsPage answers POST /clients/{id}/facts (form: text, base): the
// next version, then the page again with what the save did; a refusal
// shows the page with the sentence and the text as it was posted.
func (s *Server) saveFactsPage(c *echo.Context) error {
	cl, err := s.factsClient(c)
	if err != nil {
		return err
	}
	if err := c.Request().ParseForm(); err != nil {
		return errorf(http.StatusBadRequest, "the facts form could not be read")
	}
	if _, ok := c.Request().PostForm["text"]; !ok {
		// Never an empty version from a body that is not the form.
		return errorf(http.StatusBadRequest, "the form has no text field: nothing was saved")
	}
	text := c.Request().PostForm.Get("text")
	saved, err := s.saveFacts(c, cl.ID, text, facts.SourceDashboard)
	var te *facts.TextError
	if errors.As(err, &te) {
		return s.renderFacts(c, http.StatusBadRequest, cl, &views.Notice{Tone: "error", Text: sentence(te)}, &text)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, factsRedirect(cl.ID, saved, c.FormValue("base")))
}

// factsRedirect is the facts page after a save: the diff of the version
// made, and whether another save came between the form's base and it.
func factsRedirect(client string, saved facts.Saved, base string) string {
	q := url.Values{}
	n := strconv.Itoa(saved.Version.Version)
	if saved.New {
		q.Set("saved", n)
		q.Set("diff", n)
		if b, err := strconv.Atoi(base); err == nil && saved.After != b {
			q.Set("after", strconv.Itoa(saved.After))
		}
	} else {
		q.Set("same", n)
	}
	return "/clients/" + client + "/facts?" + q.Encode()
}

// reloadFactsPage answers POST /clients/{id}/facts/reload: the client's
// facts_file read again, as the next version.
func (s *Server) reloadFactsPage(c *echo.Context) error {
	cl, err := s.factsClient(c)
	if err != nil {
		return err
	}
	path, _ := s.cfg.FactsFileOf(cl.ID)
	saved, err := facts.Reload(c.Request().Context(), s.st, cl.ID, path, who(c).Name, s.now(), func(v store.FactsVersion) store.AuditEntry {
		return s.auditEntry(c, "facts", "client "+cl.ID, fmt.Sprintf("version %d read from %s", v.Version, path))
	})
	var te *facts.TextError
	if errors.As(err, &te) {
		return s.renderFacts(c, http.StatusBadRequest, cl, &views.Notice{Tone: "error", Text: sentence(te)}, nil)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, factsRedirect(cl.ID, saved, ""))
}

// saveFacts saves text as client's next facts version, by the caller, and
// audits a new one in the same transaction.
func (s *Server) saveFacts(c *echo.Context, client, text, source string) (facts.Saved, error) {
	return facts.Save(c.Request().Context(), s.st, facts.Edit{Client: client, Text: text, Author: actor(c), Source: source, At: s.now(),
		Audit: func(v store.FactsVersion) store.AuditEntry {
			return s.auditEntry(c, "facts", "client "+client, fmt.Sprintf("version %d, %d facts", v.Version, len(v.Entries)))
		}})
}

// factsJSON is a facts version as the API answers it.
type factsJSON struct {
	Client    string            `json:"client"`
	Version   int               `json:"version"`
	Text      string            `json:"text"`
	Entries   []store.FactEntry `json:"entries"`
	Author    string            `json:"author"`
	Source    string            `json:"source"`
	File      string            `json:"file,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

func factsOf(v store.FactsVersion) factsJSON {
	e := v.Entries
	if e == nil {
		e = []store.FactEntry{}
	}
	return factsJSON{Client: v.Client, Version: v.Version, Text: v.Text, Entries: e, Author: v.Author, Source: v.Source, File: v.File, CreatedAt: v.CreatedAt}
}

// versionJSON is one line of the history.
type versionJSON struct {
	Version   int       `json:"version"`
	Author    string    `json:"author"`
	Source    string    `json:"source"`
	Facts     int       `json:"facts"`
	CreatedAt time.Time `json:"created_at"`
}

// factsAPI answers GET /api/v1/clients/{id}/facts: the current version
// (null when there is none), the history newest first, and the
// facts_file's text when it waits for an admin (offered).
func (s *Server) factsAPI(c *echo.Context) error {
	cl, err := s.factsClient(c)
	if err != nil {
		return err
	}
	hist, err := facts.History(s.st, cl.ID)
	if err != nil {
		return err
	}
	out := struct {
		Client  string           `json:"client"`
		Current *factsJSON       `json:"current"`
		History []versionJSON    `json:"history"`
		File    string           `json:"facts_file,omitempty"`
		Offered *store.FactsFile `json:"offered,omitempty"`
	}{Client: cl.ID, History: []versionJSON{}}
	out.File, _ = s.cfg.FactsFileOf(cl.ID)
	for i, v := range hist {
		if i == 0 {
			cur := factsOf(v)
			out.Current = &cur
		}
		out.History = append(out.History, versionJSON{Version: v.Version, Author: v.Author, Source: v.Source, Facts: len(v.Entries), CreatedAt: v.CreatedAt})
	}
	if f, ok, err := facts.Offer(s.st, cl.ID); err != nil {
		return err
	} else if ok {
		out.Offered = &f
	}
	return c.JSON(http.StatusOK, out)
}

// factsVersionAPI answers GET /api/v1/clients/{id}/facts/{version}.
func (s *Server) factsVersionAPI(c *echo.Context) error {
	cl, err := s.factsClient(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("version"))
	if err != nil || n < 1 {
		return errorf(http.StatusBadRequest, "the facts version %q is not a number from 1", c.Param("version"))
	}
	v, err := facts.Version(s.st, cl.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "client %s has no facts version %d", cl.ID, n)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, factsOf(v))
}

// putFactsAPI answers PUT /api/v1/clients/{id}/facts ({"text": …}): 201
// with the new version, or 200 with the current one when it says the same.
func (s *Server) putFactsAPI(c *echo.Context) error {
	cl, err := s.factsClient(c)
	if err != nil {
		return err
	}
	var body struct {
		Text *string `json:"text"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if body.Text == nil {
		return errorf(http.StatusBadRequest, `the body needs "text": the facts, one a line`)
	}
	saved, err := s.saveFacts(c, cl.ID, *body.Text, facts.SourceAPI)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if saved.New {
		status = http.StatusCreated
	}
	return c.JSON(status, factsOf(saved.Version))
}
