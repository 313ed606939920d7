package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxSeq and maxRound bound -n and -rounds so that eventID stays fixed-width.
	maxSeq   = 999_999_999
	maxRound = 999
	idLen    = len("m001-000000000")

	// maxBodySize is handoff's default body limit; anything larger is a 413.
	maxBodySize = 1 << 20

	// Every event comes from its own lead (from derives from the id), as
	// most webhooks of a busy inbox do: one shared conversation would make
	// every draft read the whole history of that one lead.
	bodyHead    = `{"id":"`
	bodyFrom    = `","from":"lead-`
	bodyMiddle  = `@example.com","name":"Ada","text":"Hello, I would like a quote for 3 rooms`
	bodyTail    = `"}`
	minBodySize = len(bodyHead) + 2*idLen + len(bodyFrom) + len(bodyMiddle) + len(bodyTail)

	// padding is plain text without JSON escapes, so the body size is exact.
	padding = ", and a kitchen, a hallway and a small garden office if you do those too"

	// requestTimeout bounds a single request; a stuck target fails the run
	// instead of hanging it.
	requestTimeout = 30 * time.Second

	maxSamples = 5
)

// eventID returns a fixed-width id so that every body is exactly -size bytes
// whichever round and sequence number it carries. kind separates warm-up,
// contract-check and measured events so they never collide.
func eventID(kind byte, round, seq int) string {
	return fmt.Sprintf("%c%03d-%09d", kind, round, seq)
}

// bodyTemplate builds request bodies of one exact size.
type bodyTemplate struct {
	size int
	tail string
}

func newBodyTemplate(size int) (bodyTemplate, error) {
	if size < minBodySize || size > maxBodySize {
		return bodyTemplate{}, fmt.Errorf("body size %d outside %d..%d", size, minBodySize, maxBodySize)
	}
	pad := size - minBodySize
	text := strings.Repeat(padding, pad/len(padding)+1)[:pad]
	return bodyTemplate{size: size, tail: bodyMiddle + text + bodyTail}, nil
}

func (t bodyTemplate) body(id string) []byte {
	b := make([]byte, 0, t.size)
	b = append(b, bodyHead...)
	b = append(b, id...)
	b = append(b, bodyFrom...)
	b = append(b, id...)
	return append(b, t.tail...)
}

// newClient returns a client whose single transport keeps exactly c
// keep-alive connections to the target, so every run measures requests on
// warm connections rather than TCP handshakes.
func newClient(c int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // only ever 127.0.0.1; never route through $HTTP_PROXY
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        c,
		MaxIdleConnsPerHost: c,
		MaxConnsPerHost:     c,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   requestTimeout,
		// A redirect could point anywhere; the bench only talks to 127.0.0.1.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// result is what one load run observed.
type result struct {
	sent          int // requests attempted
	statuses      map[int]int
	transportErrs int
	samples       []string        // the first few failures, for the report
	latencies     []time.Duration // of every answered request, sorted
	elapsed       time.Duration
}

func (r result) accepted() int { return r.statuses[http.StatusAccepted] }

// failures counts everything that keeps the run from being valid: a transport
// error, any answer but 202, and any id that was never sent (cancelled run).
func (r result) failures(n int) int { return n - r.accepted() }

// runLoad sends n events with ids eventID(kind, round, 0..n-1) from c workers
// that pull ids from a shared counter, and records each request's latency
// from before the request is written until its response body is read.
func runLoad(ctx context.Context, client *http.Client, url string, tpl bodyTemplate, kind byte, round, n, c int) result {
	workers := min(c, n)
	var next atomic.Int64
	parts := make([]result, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			r := &parts[w]
			r.statuses = map[int]int{}
			r.latencies = make([]time.Duration, 0, n/workers+1)
			for {
				seq := int(next.Add(1) - 1)
				if seq >= n || ctx.Err() != nil {
					return
				}
				r.sent++
				post(ctx, client, url, tpl.body(eventID(kind, round, seq)), r)
			}
		})
	}
	wg.Wait()
	total := result{statuses: map[int]int{}, elapsed: time.Since(start)}
	for _, p := range parts {
		total.sent += p.sent
		total.transportErrs += p.transportErrs
		for code, k := range p.statuses {
			total.statuses[code] += k
		}
		for _, s := range p.samples {
			if len(total.samples) < maxSamples {
				total.samples = append(total.samples, s)
			}
		}
		total.latencies = append(total.latencies, p.latencies...)
	}
	slices.Sort(total.latencies)
	return total
}

// post sends one event and records its outcome in r.
func post(ctx context.Context, client *http.Client, url string, body []byte, r *result) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		r.fail(err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.fail(err.Error())
		return
	}
	var snippet []byte
	if resp.StatusCode != http.StatusAccepted {
		snippet, _ = io.ReadAll(io.LimitReader(resp.Body, 300))
	}
	// Draining the body is what lets the transport reuse the connection.
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		r.fail(fmt.Sprintf("reading response: %v", err))
		return
	}
	r.latencies = append(r.latencies, time.Since(start))
	r.statuses[resp.StatusCode]++
	if resp.StatusCode != http.StatusAccepted && len(r.samples) < maxSamples {
		r.samples = append(r.samples, fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(snippet)))
	}
}

func (r *result) fail(msg string) {
	r.transportErrs++
	if len(r.samples) < maxSamples {
		r.samples = append(r.samples, msg)
	}
}

// hookReply is the inbound webhook answer of the contract.
type hookReply struct {
	Status        string `json:"status"`
	EventKey      string `json:"event_key"`
	CorrelationID string `json:"correlation_id"`
}

// checkDedup proves the target under test is the real thing: a new id is
// accepted under the contract's event key, and the same id again is a
// duplicate carrying the first correlation id. Without this, a handoff that
// silently stored nothing would look fast.
func checkDedup(ctx context.Context, client *http.Client, url, channel string, tpl bodyTemplate, round int) error {
	id := eventID('d', round, 0)
	body := tpl.body(id)
	first, err := postReply(ctx, client, url, body, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("first delivery of %s: %w", id, err)
	}
	if first.Status != "accepted" || first.EventKey != channel+":"+id || first.CorrelationID == "" {
		return fmt.Errorf("first delivery of %s: got %+v, want status accepted, event_key %s:%s and a correlation id", id, first, channel, id)
	}
	again, err := postReply(ctx, client, url, body, http.StatusOK)
	if err != nil {
		return fmt.Errorf("repeated delivery of %s: %w", id, err)
	}
	if again.Status != "duplicate" || again.EventKey != first.EventKey || again.CorrelationID != first.CorrelationID {
		return fmt.Errorf("repeated delivery of %s: got %+v, want status duplicate with event_key %s and correlation_id %s", id, again, first.EventKey, first.CorrelationID)
	}
	return nil
}

func postReply(ctx context.Context, client *http.Client, url string, body []byte, wantStatus int) (hookReply, error) {
	reply, status, raw, err := postHook(ctx, client, url, body)
	if err != nil {
		return reply, err
	}
	if status != wantStatus {
		return reply, fmt.Errorf("status %d, want %d: %s", status, wantStatus, bytes.TrimSpace(raw))
	}
	return reply, nil
}

// postHook posts one webhook and returns its status and raw answer, decoded
// as the contract's reply when the status is 2xx.
func postHook(ctx context.Context, client *http.Client, url string, body []byte) (hookReply, int, []byte, error) {
	var reply hookReply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return reply, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return reply, 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return reply, resp.StatusCode, raw, err
	}
	if resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, &reply); err != nil {
			return reply, resp.StatusCode, raw, fmt.Errorf("decoding %q: %w", raw, err)
		}
	}
	return reply, resp.StatusCode, raw, nil
}
