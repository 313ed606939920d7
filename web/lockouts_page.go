package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/views"
)

// lockoutViews lists the logins being refused or slowed now.
func (s *Server) lockoutViews() []views.Lockout {
	ks := s.accounts.Logins().Lockouts(s.now())
	out := make([]views.Lockout, len(ks))
	for i, k := range ks {
		out[i] = views.Lockout{Name: k.Name, Addr: k.Addr, Failures: k.Failures, Until: k.Until}
	}
	return out
}

// unlockLogin answers POST /users/unlock (form: name and/or addr): it lifts
// the name's limits from every address, or the address's for every name,
// and audits it.
func (s *Server) unlockLogin(c *echo.Context) error {
	name, addr := strings.TrimSpace(c.FormValue("name")), strings.TrimSpace(c.FormValue("addr"))
	if name == "" && addr == "" {
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Say which name or address to unlock."})
	}
	var lifted []string
	if name != "" && s.accounts.Logins().UnlockName(name) {
		lifted = append(lifted, "name "+name)
	}
	if addr != "" && s.accounts.Logins().UnlockAddr(addr) {
		lifted = append(lifted, "address "+addr)
	}
	if len(lifted) == 0 {
		return s.renderUsers(c, http.StatusOK, nil, &views.Notice{Tone: "ok", Text: "Nothing was locked there any more."})
	}
	what := strings.Join(lifted, " and ")
	target := name
	if target == "" {
		target = addr
	}
	if err := s.st.Audit(c.Request().Context(), s.auditEntry(c, "unlock login", target, what)); err != nil {
		return err
	}
	return s.renderUsers(c, http.StatusOK, nil, &views.Notice{Tone: "ok", Text: "Unlocked " + what + ": its logins are no longer refused or slowed."})
}
