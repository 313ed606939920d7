package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/keys"
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
	// A refusal (another body, held, needs reconciliation) is a keys
	// error, answered by answerFor.
	k, outcome, err := keys.Claim(c.Request().Context(), s.st, key, hex.EncodeToString(sum[:]), s.now().UTC(), lease)
	if err != nil {
		return err
	}
	a := keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k}
	switch outcome {
	case keys.Created:
		a.Claim = k.Claim
		return c.JSON(http.StatusCreated, a)
	case keys.TakenOver:
		a.Claim, a.TakenOver = k.Claim, true
		a.Message = "the previous claim's lease expired before it reported an effect; this claim took the key over"
		return c.JSON(http.StatusCreated, a)
	default: // done
		return c.JSON(http.StatusOK, a)
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
	return s.moveKey(c, func(ctx context.Context, key string, by keys.By, now time.Time) (store.IdemKey, error) {
		return keys.EffectPending(ctx, s.st, key, by, defaultKeyLease, now)
	})
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
	return s.moveKey(c, s.completeWith(result))
}

// completeWith is the move that completes a key with result, kept for retention.keys.
func (s *Server) completeWith(result json.RawMessage) keyMove {
	return func(ctx context.Context, key string, by keys.By, now time.Time) (store.IdemKey, error) {
		return keys.Complete(ctx, s.st, key, by, result, s.cfg.Retention.Keys, now)
	}
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
		return s.applyKey(ctx, key, "", by, from, s.completeWith(canon))
	case "not_done":
		return s.applyKey(ctx, key, "", by, from, func(ctx context.Context, key string, by keys.By, now time.Time) (store.IdemKey, error) {
			return keys.Release(ctx, s.st, key, by, now)
		})
	}
	return store.IdemKey{}, errorf(http.StatusBadRequest, `outcome must be "completed" (with the result) or "not_done", not %q`, outcome)
}

// keyMove is one of package keys' moves of key, by by, at now.
type keyMove func(ctx context.Context, key string, by keys.By, now time.Time) (store.IdemKey, error)

// moveKey answers a holder's move (effect-pending, complete): ?claim=,
// when given, must be the key's current claim.
func (s *Server) moveKey(c *echo.Context, m keyMove) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	k, err := s.applyKey(c.Request().Context(), key, c.QueryParam("claim"), actor(c), c.RealIP(), m)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k, Message: k.Note})
}

// applyKey applies m to key for the holder of claim (empty: unchecked),
// audited as by from the address from.
func (s *Server) applyKey(ctx context.Context, key, claim, by, from string, m keyMove) (store.IdemKey, error) {
	if err := checkKey(key); err != nil {
		return store.IdemKey{}, err
	}
	now := s.now().UTC()
	k, err := m(ctx, key, keys.By{Claim: claim, Audit: store.AuditEntry{At: now, Who: by, From: from}}, now)
	return k, missing(err, "key %q was never claimed (or has expired); claim it first", key)
}

// getKey answers GET /api/v1/keys/{key}.
func (s *Server) getKey(c *echo.Context) error {
	key, err := s.keyParam(c)
	if err != nil {
		return err
	}
	var k store.IdemKey
	err = s.st.View(func(tx *store.Tx) (err error) { k, err = tx.IdemKey(key); return err })
	if err != nil {
		return missing(err, "key %q was never claimed (or has expired)", key)
	}
	return c.JSON(http.StatusOK, keyAnswer{Key: key, State: k.State, Result: k.Result, Record: k})
}
