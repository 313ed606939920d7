package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
)

// keyLease is how long a claim holds a key before another caller may take it over.
const (
	defaultKeyLease = 5 * time.Minute
	maxKeyLen       = 256
)

// keyAnswer is the body of every key API answer.
type keyAnswer struct {
	Key       string          `json:"key"`
	State     store.KeyState  `json:"state"`
	Result    json.RawMessage `json:"result,omitempty"`
	TakenOver bool            `json:"taken_over,omitempty"`
	Record    store.IdemKey   `json:"record"`
	Message   string          `json:"message,omitempty"`
}

func (s *Server) keyParam(c *echo.Context) (string, error) {
	k := c.Param("key")
	if k == "" || len(k) > maxKeyLen {
		return "", errorf(http.StatusBadRequest, "the key must be 1 to %d bytes", maxKeyLen)
	}
	return k, nil
}

// claimKey answers POST /api/v1/keys/{key}/claim?lease=5m.
func (s *Server) claimKey(c *echo.Context) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	raw, err := readAPIBody(c)
	if err != nil {
		return err
	}
	canon, err := canonicalJSON(raw)
	if err != nil {
		return err
	}
	lease := defaultKeyLease
	if v := c.QueryParam("lease"); v != "" {
		lease, err = time.ParseDuration(v)
		if err != nil || lease < time.Second || lease > 24*time.Hour {
			return errorf(http.StatusBadRequest, "lease %q must be a duration from 1s to 24h", v)
		}
	}
	sum := sha256.Sum256(canon)
	k, outcome, err := s.st.ClaimKey(c.Request().Context(), key, hex.EncodeToString(sum[:]), s.now().UTC(), lease)
	if err != nil {
		return err
	}
	a := keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k}
	switch outcome {
	case store.ClaimCreated:
		return c.JSON(http.StatusCreated, a)
	case store.ClaimTakeover:
		a.TakenOver = true
		a.Message = "the previous claim's lease expired before it reported an effect; this claim took the key over"
		return c.JSON(http.StatusCreated, a)
	case store.ClaimDone:
		return c.JSON(http.StatusOK, a)
	case store.ClaimMismatch:
		return errorf(http.StatusUnprocessableEntity, "key %q was first claimed with a different body; use a new key for a different request", key)
	case store.ClaimBusy:
		return errorf(http.StatusConflict, "key %q is held by another claim (%s) until %s; try again after that", key, k.State, k.LeaseUntil.Format(time.RFC3339))
	default: // unsure
		return errorf(http.StatusConflict, "key %q needs reconciliation: %s; check the side effect, then POST /api/v1/keys/%s/reconcile", key, k.Note, key)
	}
}

// canonicalJSON checks the body is JSON and compacts it, so that white space
// alone does not make a "different body".
func canonicalJSON(raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errorf(http.StatusBadRequest, "the body is not valid JSON: %s", jsonProblem(err))
	}
	return buf.Bytes(), nil
}

// keyEffectPending answers POST /api/v1/keys/{key}/effect-pending.
func (s *Server) keyEffectPending(c *echo.Context) error {
	return s.moveKey(c, store.KeyTransition{To: store.KeyEffectPending, Lease: defaultKeyLease})
}

// completeKey answers POST /api/v1/keys/{key}/complete (body: the result).
func (s *Server) completeKey(c *echo.Context) error {
	raw, err := readAPIBody(c)
	if err != nil {
		return err
	}
	result, err := canonicalJSON(raw)
	if err != nil {
		return err
	}
	return s.moveKey(c, store.KeyTransition{To: store.KeyCompleted, Result: result, Keep: s.cfg.Retention.Keys})
}

// keyReconcileBody is a person's verdict on a key whose effect is unknown.
type keyReconcileBody struct {
	Outcome string          `json:"outcome"` // completed or not_done
	Result  json.RawMessage `json:"result"`
}

// reconcileKey answers POST /api/v1/keys/{key}/reconcile.
func (s *Server) reconcileKey(c *echo.Context) error {
	var body keyReconcileBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	switch body.Outcome {
	case "completed":
		result, err := canonicalJSON(body.Result)
		if err != nil {
			return err
		}
		return s.moveKey(c, store.KeyTransition{To: store.KeyCompleted, Result: result, Keep: s.cfg.Retention.Keys})
	case "not_done":
		return s.moveKey(c, store.KeyTransition{Reset: true})
	}
	return errorf(http.StatusBadRequest, `outcome must be "completed" (with the result) or "not_done", not %q`, body.Outcome)
}

func (s *Server) moveKey(c *echo.Context, t store.KeyTransition) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	k, err := s.st.MoveKey(c.Request().Context(), key, t, s.now().UTC())
	var state *store.StateError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "key %q was never claimed (or has expired); claim it first", key)
	case errors.As(err, &state):
		return &apiError{status: http.StatusConflict, msg: state.Error()}
	case err != nil:
		return err
	}
	_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: s.now().UTC(), Who: actor(c), From: c.RealIP(), Action: "key " + string(k.State), Target: key})
	return c.JSON(http.StatusOK, keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k, Message: k.Note})
}

// getKey answers GET /api/v1/keys/{key}.
func (s *Server) getKey(c *echo.Context) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	k, err := s.st.Key(key)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "key %q was never claimed (or has expired)", key)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k})
}
