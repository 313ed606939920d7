package provider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/handoff/handoff/config"
)

// dropper is a provider that reads and records every request it gets, and
// answers only the first request on each connection: on a reused one it
// closes the connection without a byte of answer, after it has the whole
// message. That is where net/http replays a request by itself when it
// judges the request replayable (and Idempotency-Key makes a POST so).
// It speaks HTTP/1.1 over a plain listener, so nothing of net/http's
// server stands between the test and the bytes.
type dropper struct {
	ln    net.Listener
	mu    sync.Mutex
	got   []string // client_ref of every request received, in order
	conns []int    // the connection each one came on
	wg    sync.WaitGroup
}

func newDropper(t *testing.T) *dropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dropper{ln: ln}
	d.wg.Add(1)
	go d.serve()
	t.Cleanup(func() { ln.Close(); d.wg.Wait() })
	return d
}

func (d *dropper) url() string { return "http://" + d.ln.Addr().String() + "/send" }

func (d *dropper) serve() {
	defer d.wg.Done()
	for n := 0; ; n++ {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		d.wg.Add(1)
		go d.conn(n, c)
	}
}

func (d *dropper) conn(n int, c net.Conn) {
	defer d.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		ref := req.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.got = append(d.got, ref)
		d.conns = append(d.conns, n)
		id := len(d.got)
		d.mu.Unlock()
		if i > 0 || len(body) == 0 {
			return // accepted, and the answer is lost with the connection
		}
		answer := fmt.Sprintf(`{"id":"p-%d"}`, id)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
	}
}

func (d *dropper) received() (refs []string, conns []int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...), append([]int(nil), d.conns...)
}

// TestHTTPNeverReplaysOnReusedConnection sends a message, which the
// provider answers on a new connection that the client keeps, then a
// second one, which goes over that same connection and is dropped after
// it arrived. The provider must see the second message once, and the
// outcome must be ambiguous: our client must not have sent it again on a
// fresh connection. With the request's GetBody left in place, net/http
// resends it and the provider counts it twice.
func TestHTTPNeverReplaysOnReusedConnection(t *testing.T) {
	for _, idem := range []bool{false, true} {
		t.Run(fmt.Sprintf("supports_idempotency_key=%v", idem), func(t *testing.T) {
			d := newDropper(t)
			p := mustHTTP(t, config.Provider{URL: d.url(), SupportsIdempotencyKey: idem, SigningSecret: testSecret}, Deps{})
			first, second := testMsg, testMsg
			first.Ref, second.Ref = "conv-1:d1", "conv-2:d2"

			id, err := p.Send(context.Background(), first)
			checkOutcome(t, id, err, "p-1", "", 0, 0)
			_, err = p.Send(context.Background(), second)
			checkOutcome(t, "", err, "", "ambiguous", 0, 0)

			refs, conns := d.received()
			if want := []string{first.Ref, second.Ref}; strings.Join(refs, " ") != strings.Join(want, " ") {
				t.Fatalf("the provider received %q, want each message once: %q", refs, want)
			}
			if conns[0] != conns[1] {
				t.Fatalf("the second message came on connection %d, the first on %d: the test needs a reused connection", conns[1], conns[0])
			}
		})
	}
}

// TestHTTPNotSentOnlyWhenNothingLeft checks both sides of NotSent: a
// server that is gone gets nothing (NotSent, safe to send again), while a
// server that read the whole request and then vanished may have acted on
// it (Ambiguous), even though no answer came back.
func TestHTTPNotSentOnlyWhenNothingLeft(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
		}
		c.Close()
	}()
	p := mustHTTP(t, config.Provider{URL: "http://" + addr + "/send"}, Deps{})
	_, err = p.Send(context.Background(), testMsg)
	<-done
	checkOutcome(t, "", err, "", "ambiguous", 0, 0)
	var ns *NotSent
	if errors.As(err, &ns) {
		t.Fatalf("a request the server read whole was called not sent: %v", err)
	}

	ln.Close()
	_, err = p.Send(context.Background(), testMsg)
	checkOutcome(t, "", err, "", "not_sent", 0, 0)
}
