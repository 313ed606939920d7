package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// wire is one provider's HTTP client with the rules of transport.go: its
// own pool, no replays, and every failure told apart as NotSent or
// Ambiguous. Every HTTP kind sends through it.
type wire struct {
	name    string
	timeout time.Duration
	now     func() time.Time
	client  *http.Client
	gate    *gate // nil: no rate
}

func newWire(name string, timeout time.Duration, now func() time.Time, rate float64, burst int) *wire {
	if timeout <= 0 {
		timeout = defaultHTTPTimeout
	}
	if now == nil {
		now = time.Now
	}
	return &wire{name: name, timeout: timeout, now: now, gate: newGate(rate, burst), client: &http.Client{
		Transport:     newTransport(timeout),
		Timeout:       timeout,
		CheckRedirect: checkRedirect,
	}}
}

// answer is what a provider said: its status, headers and as much of the
// body as could be read (ReadErr when the body broke off).
type answer struct {
	Status  int
	Header  http.Header
	Body    []byte
	ReadErr error
}

// postJSON encodes v and posts it as JSON to url, with auth as its
// Authorization header when set: one send's request for the kinds that
// take a JSON body. An encoding failure is permanent, in name's words.
func (w *wire) postJSON(ctx context.Context, name, url, auth string, v any) (answer, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return answer{}, &Permanent{Err: fmt.Errorf("%s: encode message: %w", name, err)}
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	if auth != "" {
		hdr.Set("Authorization", auth)
	}
	return w.post(ctx, url, hdr, body)
}

// post sends body to url once. A transport failure is *NotSent when not
// one byte left this machine and *Ambiguous otherwise; any answer,
// whatever its status, is returned for the kind to judge.
func (w *wire) post(ctx context.Context, url string, header http.Header, body []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var watch wireWatch
	req, err := http.NewRequestWithContext(watch.trace(ctx), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{}, &Permanent{Err: fmt.Errorf("%s: build request: %w", w.name, transportErr(err))}
	}
	// Without GetBody the body cannot be rewound, so net/http never sends
	// this POST a second time by itself (see transport.go).
	req.GetBody = nil
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		if watch.nothingWritten() {
			return answer{}, &NotSent{Err: fmt.Errorf("%s: POST: %w", w.name, transportErr(err))}
		}
		return answer{}, &Ambiguous{Err: fmt.Errorf("%s: POST: %w", w.name, transportErr(err))}
	}
	defer closeBody(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	a.Body, a.ReadErr = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if a.ReadErr != nil {
		a.ReadErr = transportErr(a.ReadErr)
	}
	return a, nil
}

// get asks url (a lookup); errors are plain: a lookup that fails decides
// nothing, so the caller asks again later.
func (w *wire) get(ctx context.Context, url string, header http.Header) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{}, fmt.Errorf("%s: lookup: %w", w.name, transportErr(err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := w.client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s: lookup: %w", w.name, transportErr(err))
	}
	defer closeBody(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	if a.Body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return answer{}, fmt.Errorf("%s: lookup: read answer: %w", w.name, transportErr(err))
	}
	return a, nil
}

// Hold holds a send to the provider's rate (see gate).
func (w *wire) Hold(ref string, now time.Time) time.Duration { return w.gate.hold(ref, now) }

// retryAfter is the answer's Retry-After advice.
func (w *wire) retryAfter(a answer) time.Duration {
	return retryAfter(a.Header.Get("Retry-After"), w.now())
}

// refused is the error for an answer that judged the message: kind is
// "permanent" (resending cannot help), "later" (not accepted; send again
// after retry) or "unknown" (it may have been delivered).
func (w *wire) refused(kind string, a answer, retry time.Duration, why string) error {
	err := fmt.Errorf("%s: answered %d %s: %s", w.name, a.Status, http.StatusText(a.Status), why)
	switch kind {
	case "permanent":
		return &Permanent{Status: a.Status, Err: err}
	case "later":
		if retry > 0 {
			w.gate.pause(w.now().Add(retry))
		}
		return &NotSent{Err: err, RetryAfter: retry}
	default:
		return &Ambiguous{Status: a.Status, Err: err, RetryAfter: retry}
	}
}

// reason is the provider's own reason for its answer, or the start of the
// body when it gave none.
func reason(given string, a answer) string {
	if given == "" {
		return short(a.Body)
	}
	return given
}

// coded is a reason with the provider's error code ("" when it sent none).
func coded(code int, msg string) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprintf("code %d: %s", code, msg)
}

// lostID is the error for a 200 that accepted the message but whose id
// (what) could not be read: the body broke off or lacked it. The message
// may well be out, so the outcome is unknown, never "not sent".
func (w *wire) lostID(a answer, what string) error {
	if a.ReadErr != nil {
		return &Ambiguous{Status: a.Status, Err: fmt.Errorf("%s: read answer: %w", w.name, a.ReadErr)}
	}
	return &Ambiguous{Status: a.Status, Err: fmt.Errorf("%s: answered %d without a readable %s: %s", w.name, a.Status, what, short(a.Body))}
}

// pointer reads the JSON pointer ptr (RFC 6901) in doc as a string: a
// string as is, a number or boolean in its JSON form; ok is false when
// there is nothing there or it is an object, array or null.
func pointer(doc []byte, ptr string) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch x := v.(type) {
			case map[string]any:
				var ok bool
				if v, ok = x[tok]; !ok {
					return "", false
				}
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return "", false
				}
				v = x[i]
			default:
				return "", false
			}
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// short is a body excerpt for an error message.
func short(b []byte) string { return excerpt(bytes.NewReader(b)) }
