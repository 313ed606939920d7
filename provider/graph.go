package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// graphError is the error object of a Graph API answer, as the WhatsApp
// Cloud API and the Messenger Platform's Send API both give it:
// {"error":{"message","type","code","error_subcode","fbtrace_id"}}.
type graphError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Subcode int    `json:"error_subcode"`
}

// reason is the error's code (and subcode) and message, "" without a code.
func (e graphError) reason() string {
	if e.Subcode != 0 && e.Code != 0 {
		return fmt.Sprintf("code %d/%d: %s", e.Code, e.Subcode, e.Message)
	}
	return coded(e.Code, e.Message)
}

// graphCodes is how one Graph API kind sorts the error codes it is
// documented to answer: later means not accepted, send again after the
// advertised wait; unknown means a failure on Meta's side after which the
// message may be out. Every other 4xx is permanent. explain, when set,
// puts a code in words a person can act on ("" leaves Meta's message).
type graphCodes struct {
	later, unknown map[int]bool
	explain        func(graphError) string
}

// graphRefused is the error for a Graph API answer that did not accept the
// message (any answer but the kind's success), through wire's shared steps.
func (w *wire) graphRefused(a answer, e graphError, codes graphCodes) error {
	why := reason(e.reason(), a)
	if codes.explain != nil {
		if s := codes.explain(e); s != "" {
			why = s
		}
	}
	switch c := a.Status; {
	case c == http.StatusTooManyRequests || codes.later[e.Code]:
		return w.refused("later", a, w.graphWait(a), why)
	case c >= 500 || codes.unknown[e.Code]:
		return w.refused("unknown", a, w.retryAfter(a), why)
	case c >= 400:
		return w.refused("permanent", a, 0, why)
	}
	return w.refused("unknown", a, 0, why)
}

// graphWait is the wait a Graph API rate limit advertises: the longest
// estimated_time_to_regain_access (minutes) in X-Business-Use-Case-Usage,
// else Retry-After; 0 leaves the queue's backoff.
func (w *wire) graphWait(a answer) time.Duration {
	var usage map[string][]struct {
		Regain int `json:"estimated_time_to_regain_access"`
	}
	var wait time.Duration
	if json.Unmarshal([]byte(a.Header.Get("X-Business-Use-Case-Usage")), &usage) == nil {
		for _, uses := range usage {
			for _, u := range uses {
				wait = max(wait, time.Duration(u.Regain)*time.Minute)
			}
		}
	}
	if wait > 0 {
		return wait
	}
	return w.retryAfter(a)
}
