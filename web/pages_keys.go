package web

import (
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// keysLimit bounds the keys page.
const keysLimit = 200

// keysPage answers GET /keys?state=: the idempotency keys of the key API,
// in one state or all of them.
func (s *Server) keysPage(c *echo.Context) error {
	state := store.KeyState(c.QueryParam("state"))
	if state != "" && !slices.Contains(views.KeyStates, state) {
		return errorf(http.StatusBadRequest, "state %q is not one of started, effect_pending, needs_reconciliation, completed", state)
	}
	keys, err := s.st.Keys(state, keysLimit+1)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Keys", "keys")
	if err != nil {
		return err
	}
	list := views.KeyList{State: string(state), Limit: keysLimit}
	if len(keys) > keysLimit {
		keys, list.More = keys[:keysLimit], true
	}
	list.Keys = keys
	list.Notice = s.keyNotice(c.QueryParam("settled"), c.QueryParam("outcome"))
	return render(c, http.StatusOK, views.KeysPage(l, list))
}

// keyNotice words a verdict on key after the form's redirect, only as far
// as the key's record bears it out.
func (s *Server) keyNotice(key, outcome string) *views.Notice {
	if key == "" {
		return nil
	}
	var k store.IdemKey
	err := s.st.View(func(tx *store.Tx) (err error) { k, err = tx.IdemKey(key); return err })
	switch {
	case errors.Is(err, store.ErrNotFound) && outcome == "not_done":
		return &views.Notice{Tone: "ok", Text: "Key " + key + " was released: its next claim starts afresh."}
	case err == nil && outcome == "completed" && k.State == store.KeyCompleted:
		return &views.Notice{Tone: "ok", Text: "Key " + key + " is recorded as completed; later claims get its result."}
	}
	return nil
}

// keyReconcileSubmit answers POST /keys/{key}/reconcile (form: outcome,
// result, checked, state): a person's verdict, through the same code as
// POST /api/v1/keys/{key}/reconcile.
func (s *Server) keyReconcileSubmit(c *echo.Context) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	if c.FormValue("checked") != "yes" {
		return errorf(http.StatusBadRequest, "tick the box that says what you checked first: a verdict must come from checking")
	}
	outcome := c.FormValue("outcome")
	if _, err := s.settleKey(c.Request().Context(), key, outcome, []byte(c.FormValue("result")), actor(c), c.RealIP()); err != nil {
		return err
	}
	q := url.Values{"settled": {key}, "outcome": {outcome}}
	if st := c.FormValue("state"); st != "" && slices.Contains(views.KeyStates, store.KeyState(st)) {
		q.Set("state", st)
	}
	return c.Redirect(http.StatusSeeOther, "/keys?"+q.Encode())
}
