package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// canaries is the overview's canary panel: every client the canary of
// drafter.canary runs for whose channels the person sees, with the
// figures of its two versions over the overview's days (the drafting and
// quality figures the draft writes keep, summed over the client's
// channels) and the decision kept in the store.
func (s *Server) canaries(c *echo.Context) (views.Canaries, error) {
	out := views.Canaries{Rows: []views.CanaryRow{}}
	cn := s.cfg.Drafter.Canary
	if cn == nil {
		return out, nil
	}
	if p := who(c); p != nil {
		out.Admin = p.Role == store.RoleAdmin
	}
	out.CSRF = csrfOf(c)
	v := s.visible(c)
	since := s.now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -(statsDays - 1))
	decided, err := s.st.DraftFigures(v, since)
	if err != nil {
		return out, err
	}
	quality, err := s.st.QualityFigures(v, since)
	if err != nil {
		return out, err
	}
	for _, cl := range s.cfg.ClientList() {
		if !cn.Runs(cl.ID) || !seesAny(v, s.cfg.ClientChannels(cl.ID)) {
			continue
		}
		d, err := s.st.Canary(cl.ID, cn.PromptVersion)
		if err != nil {
			return out, err
		}
		r := views.CanaryRow{Client: cl.ID, A: s.cfg.Drafter.PromptVersion, B: cn.PromptVersion, Share: cn.Share, State: d.State, By: d.By}
		if !d.At.IsZero() {
			at := d.At
			r.At = &at
		}
		r.ADecided, r.BDecided = views.PromptRow{PromptVersion: r.A}, views.PromptRow{PromptVersion: r.B}
		r.AFigures = views.QualityRow{PromptVersion: r.A, Client: cl.ID, Reasons: map[string]int{}}
		r.BFigures = views.QualityRow{PromptVersion: r.B, Client: cl.ID, Reasons: map[string]int{}}
		for _, f := range decided {
			if s.cfg.ClientOf(f.Channel) != cl.ID {
				continue
			}
			switch f.PromptVersion {
			case r.A:
				r.ADecided.Add(f)
			case r.B:
				r.BDecided.Add(f)
			}
		}
		for _, f := range quality {
			if s.cfg.ClientOf(f.Channel) != cl.ID {
				continue
			}
			switch f.PromptVersion {
			case r.A:
				r.AFigures.Add(f)
			case r.B:
				r.BFigures.Add(f)
			}
		}
		out.Rows = append(out.Rows, r)
	}
	return out, nil
}

func seesAny(v store.Visible, channels []string) bool {
	for _, ch := range channels {
		if v.Channel(ch) {
			return true
		}
	}
	return false
}

// decideCanary promotes or rolls back client's canary for the person of
// c: the sentence of what it did, or an *apiError naming why not.
func (s *Server) decideCanary(ctx context.Context, c *echo.Context, client, action string) (string, error) {
	cn := s.cfg.Drafter.Canary
	if _, ok := s.cfg.Client(client); !ok {
		return "", errorf(http.StatusNotFound, "there is no client %q", client)
	}
	if !cn.Runs(client) {
		return "", errorf(http.StatusNotFound, "client %s runs no canary (config drafter.canary)", client)
	}
	d := store.CanaryDecision{Client: client, Version: cn.PromptVersion, By: who(c).Name, At: s.now().UTC()}
	var done string
	switch action {
	case "promote":
		d.State = store.CanaryPromoted
		done = fmt.Sprintf("Promoted %s for %s: every new turn is drafted by it.", cn.PromptVersion, client)
	case "rollback":
		d.State = store.CanaryRolledBack
		done = fmt.Sprintf("Rolled back %s for %s: every new turn is drafted by %s.", cn.PromptVersion, client, s.cfg.Drafter.PromptVersion)
	default:
		return "", errorf(http.StatusNotFound, "%q is not a canary action (use promote or rollback)", action)
	}
	err := s.st.DecideCanary(ctx, d, s.auditEntry(c, "canary "+action, client, "version "+cn.PromptVersion))
	var same *store.SameCanaryDecisionError
	if errors.As(err, &same) {
		return "", errorf(http.StatusConflict, "%s", same.Error())
	}
	return done, err
}

// canaryAction answers POST /canary/:client/:action (promote, rollback)
// from the overview's form: the overview again, with what was done.
func (s *Server) canaryAction(c *echo.Context) error {
	done, err := s.decideCanary(c.Request().Context(), c, c.Param("client"), c.Param("action"))
	n := &views.Notice{Tone: "ok", Text: done}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		n = &views.Notice{Tone: "error", Text: "Not changed: " + ae.msg + "."}
	case err != nil:
		return err
	}
	return s.renderOverview(c, n)
}

// canaryAnswer is the API's canary state.
type canaryAnswer struct {
	Status  string            `json:"status,omitempty"`
	Message string            `json:"message,omitempty"`
	Rows    []views.CanaryRow `json:"canaries"`
}

// canaryAPI answers GET /api/v1/canary: every client's canary the caller
// sees, A's figures beside B's over the overview's days.
func (s *Server) canaryAPI(c *echo.Context) error {
	cs, err := s.canaries(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, canaryAnswer{Rows: cs.Rows})
}

// canaryActionAPI answers POST /api/v1/canary/:client/:action (admin).
func (s *Server) canaryActionAPI(c *echo.Context) error {
	done, err := s.decideCanary(c.Request().Context(), c, c.Param("client"), c.Param("action"))
	if err != nil {
		return err
	}
	cs, err := s.canaries(c)
	if err != nil {
		return err
	}
	status := "promoted"
	if c.Param("action") == "rollback" {
		status = "rolled_back"
	}
	return c.JSON(http.StatusOK, canaryAnswer{Status: status, Message: done, Rows: cs.Rows})
}
