package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

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
	// Claim is the id of the claim just granted; pass it as ?claim= to
	// effect-pending and complete, so a claim that lost the key to a
	// takeover cannot move it.
	Claim   string        `json:"claim,omitempty"`
	Record  store.IdemKey `json:"record"`
	Message string        `json:"message,omitempty"`
}

func (s *Server) keyParam(c *echo.Context) (string, error) {
	k := c.Param("key")
	return k, checkKey(k)
}

// checkKey refuses a key that is empty or too long.
func checkKey(k string) error {
	if k == "" || len(k) > maxKeyLen {
		return errorf(http.StatusBadRequest, "the key must be 1 to %d bytes", maxKeyLen)
	}
	return nil
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
		a.Claim = k.Claim
		return c.JSON(http.StatusCreated, a)
	case store.ClaimTakeover:
		a.Claim, a.TakenOver = k.Claim, true
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
	// json.Compact does not look inside strings, and a stored result is
	// sent back verbatim: bytes that are not UTF-8 would make every later
	// answer for the key unreadable to a strict JSON parser.
	if !utf8.Valid(raw) {
		return nil, errorf(http.StatusBadRequest, "the body is not valid JSON: it is not valid UTF-8, which JSON requires (RFC 8259)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errorf(http.StatusBadRequest, "the body is not valid JSON: %s", jsonProblem(err))
	}
	return buf.Bytes(), nil
}

// keyEffectPending answers POST /api/v1/keys/{key}/effect-pending?claim=;
// the lease is extended by the claim's own lease.
func (s *Server) keyEffectPending(c *echo.Context) error {
	return s.moveKey(c, store.KeyTransition{To: store.KeyEffectPending, Lease: defaultKeyLease, Claim: c.QueryParam("claim")})
}

// completeKey answers POST /api/v1/keys/{key}/complete?claim= (body: the result).
func (s *Server) completeKey(c *echo.Context) error {
	raw, err := readAPIBody(c)
	if err != nil {
		return err
	}
	result, err := canonicalJSON(raw)
	if err != nil {
		return err
	}
	return s.moveKey(c, store.KeyTransition{To: store.KeyCompleted, Result: result, Keep: s.cfg.Retention.Keys, Claim: c.QueryParam("claim")})
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
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	k, err := s.settleKey(c.Request().Context(), key, body.Outcome, body.Result, actor(c), c.RealIP())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k, Message: k.Note})
}

// settleKey is a person's verdict on a key whose effect is unknown, shared
// by the API and the dashboard: "completed" with the effect's result (JSON;
// empty is null), or "not_done", which releases the key to be claimed afresh.
func (s *Server) settleKey(ctx context.Context, key, outcome string, result []byte, by, from string) (store.IdemKey, error) {
	switch outcome {
	case "completed":
		canon, err := canonicalJSON(result)
		if err != nil {
			return store.IdemKey{}, err
		}
		return s.applyKey(ctx, key, store.KeyTransition{To: store.KeyCompleted, Result: canon, Keep: s.cfg.Retention.Keys}, by, from)
	case "not_done":
		return s.applyKey(ctx, key, store.KeyTransition{Reset: true}, by, from)
	}
	return store.IdemKey{}, errorf(http.StatusBadRequest, `outcome must be "completed" (with the result) or "not_done", not %q`, outcome)
}

func (s *Server) moveKey(c *echo.Context, t store.KeyTransition) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	k, err := s.applyKey(c.Request().Context(), key, t, actor(c), c.RealIP())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k, Message: k.Note})
}

// applyKey moves key by t and audits it as by.
func (s *Server) applyKey(ctx context.Context, key string, t store.KeyTransition, by, from string) (store.IdemKey, error) {
	if err := checkKey(key); err != nil {
		return store.IdemKey{}, err
	}
	t.Audit = store.AuditEntry{At: s.now().UTC(), Who: by, From: from}
	k, err := s.st.MoveKey(ctx, key, t, s.now().UTC())
	var state *store.StateError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return k, errorf(http.StatusNotFound, "key %q was never claimed (or has expired); claim it first", key)
	case errors.As(err, &state):
		return k, &apiError{status: http.StatusConflict, msg: state.Error()}
	case err != nil:
		return k, err
	}
	return k, nil
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
