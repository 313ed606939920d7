package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Caller is an HTTP client with the wire's rules (transport.go: its own
// pool, HTTP/1.1, no replays, every failure told apart as NotSent or
// Ambiguous by the bytes written) for the adapters outside this package
// that must not repeat a call behind handoff's back (crm's CRMs).
type Caller struct{ w *wire }

// NewCaller returns name's caller, each call bounded by timeout (0: the
// providers' default).
func NewCaller(name string, timeout time.Duration) *Caller {
	return &Caller{w: newWire(name, timeout, nil, 0, 0)}
}

// Answer is what the other side said: its status, headers and as much of
// the body as could be read (ReadErr when the body broke off).
type Answer struct {
	Status  int
	Header  http.Header
	Body    []byte
	ReadErr error
}

// Do makes one request. A transport failure is *NotSent when not one byte
// of it left this machine and *Ambiguous otherwise; any answer, whatever
// its status, is returned for the caller to judge. The body cannot be
// rewound, so net/http never sends it twice by itself.
func (c *Caller) Do(ctx context.Context, method, url string, header http.Header, body []byte) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.w.timeout)
	defer cancel()
	var watch wireWatch
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(watch.trace(ctx), method, url, rd)
	if err != nil {
		return Answer{}, &Permanent{Err: fmt.Errorf("%s: build request: %w", c.w.name, transportErr(err))}
	}
	req.GetBody = nil
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	resp, err := c.w.client.Do(req)
	if err != nil {
		if watch.nothingWritten() {
			return Answer{}, &NotSent{Err: fmt.Errorf("%s: %s: %w", c.w.name, method, transportErr(err))}
		}
		return Answer{}, &Ambiguous{Err: fmt.Errorf("%s: %s: %w", c.w.name, method, transportErr(err))}
	}
	defer closeBody(resp.Body)
	a := Answer{Status: resp.StatusCode, Header: resp.Header}
	a.Body, a.ReadErr = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if a.ReadErr != nil {
		a.ReadErr = transportErr(a.ReadErr)
	}
	return a, nil
}

// RetryAfter is an answer's Retry-After advice (0: none).
func (c *Caller) RetryAfter(a Answer) time.Duration {
	return retryAfter(a.Header.Get("Retry-After"), time.Now())
}

// Timeout is the bound of one call.
func (c *Caller) Timeout() time.Duration { return c.w.timeout }

// Excerpt is the start of a body, for an error's sentence.
func Excerpt(b []byte) string { return short(b) }
