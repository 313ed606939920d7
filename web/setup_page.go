package web

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// setupForm answers GET /setup/:token: the form to create the first admin,
// while the link is live.
func (s *Server) setupForm(c *echo.Context) error {
	token := c.Param("token")
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	if !s.st.SetupLinkValid(users.HashSecret(token), s.now()) {
		return render(c, http.StatusGone, views.SetupUsed(store.ErrSetupUsed.Error()))
	}
	return render(c, http.StatusOK, views.Setup(views.SetupPage{Token: token, Name: "admin"}))
}

// setupSubmit answers POST /setup/:token (form: name, password): the first
// admin is created and the link spent in one transaction, then they are
// logged in. A second use is refused.
func (s *Server) setupSubmit(c *echo.Context) error {
	token := c.Param("token")
	name, pw := strings.TrimSpace(c.FormValue("name")), c.FormValue("password")
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	again := func(msg string) error {
		return render(c, http.StatusBadRequest, views.Setup(views.SetupPage{Token: token, Name: name, Error: msg}))
	}
	// The link first, before the password is hashed: a dead or made-up
	// link, and every link once a person exists, costs one read, never a
	// bcrypt. UseSetupLink checks again in its own transaction.
	if !s.st.SetupLinkValid(users.HashSecret(token), s.now()) {
		return render(c, http.StatusGone, views.SetupUsed(store.ErrSetupUsed.Error()))
	}
	if !users.ValidName(name) {
		return again("A name is 1 to 64 letters, digits, dots, dashes, underscores or @.")
	}
	hash, err := s.accounts.Rule(true, name, "").Hash(pw)
	if err != nil {
		if errors.Is(err, password.ErrTooShort) || errors.Is(err, password.ErrTooLong) || errors.Is(err, password.ErrCommon) || errors.Is(err, password.ErrGuessable) {
			return again(sentence(err))
		}
		return err
	}
	now := s.now().UTC()
	ip := c.RealIP()
	admin := store.User{Name: name, Role: store.RoleAdmin, PasswordHash: hash, CreatedAt: now}
	err = s.st.UseSetupLink(c.Request().Context(), users.HashSecret(token), now, admin,
		store.AuditEntry{At: now, Who: name, From: ip, Action: "create user", Target: name, Detail: "the first admin, with the setup link"})
	if errors.Is(err, store.ErrSetupUsed) {
		return render(c, http.StatusGone, views.SetupUsed(store.ErrSetupUsed.Error()))
	}
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.cfg.DataDir, users.SetupLinkFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("delete the used setup link's file", "err", err)
	}
	// Logged in as login does (the new admin has no second factor yet).
	secret, err := s.accounts.StartSession(c.Request().Context(), admin, ip, now, "after setup")
	if err != nil {
		return err
	}
	c.SetCookie(s.sessionCookieFor(secret, int(users.SessionMax.Seconds())))
	return c.Redirect(http.StatusSeeOther, "/")
}

// sentence is err's text as a sentence: capital first letter, full stop.
func sentence(err error) string {
	m := err.Error()
	if m == "" {
		return m
	}
	return strings.ToUpper(m[:1]) + m[1:] + "."
}
