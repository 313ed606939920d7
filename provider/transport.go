package provider

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// newTransport is one provider's own connection pool. Sharing
// http.DefaultTransport would let another provider's (or a test server's)
// CloseIdleConnections cut this one's connections, and every setting here
// is chosen for a call that must not be repeated behind our back:
//   - HTTP/1.1 only, so there is one retry rule to reason about (HTTP/2's
//     own retries are safe by the protocol, but we need none);
//   - requests are built without GetBody (see send), so the transport can
//     neither replay a POST on a fresh connection after a reused one died
//     nor rewind it for a redirect;
//   - every connection counts the bytes written to it, so an error can be
//     told apart as "nothing left this machine" (NotSent) or "the request
//     may have arrived" (Ambiguous).
func newTransport(timeout time.Duration) *http.Transport {
	dialer := &net.Dialer{Timeout: min(timeout, 30*time.Second), KeepAlive: 30 * time.Second}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: c}, nil
		},
		Protocols:           &protocols,
		MaxIdleConns:        32,
		MaxIdleConnsPerHost: 16,
		// Shorter than the keep-alive of common servers (nginx 75s), so we
		// usually drop an idle connection before the server does.
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   min(timeout, 10*time.Second),
		ExpectContinueTimeout: 0,
	}
}

// countingConn counts the bytes handed to Write before the write starts:
// a request during which the count did not move cannot have reached the
// other side, even if the write raced the connection's close.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.written.Add(int64(len(b)))
	return c.Conn.Write(b)
}

// wireWatch tells, after a request failed, whether any of its bytes were
// handed to the network.
type wireWatch struct {
	mu    sync.Mutex
	got   bool          // the request was given a connection
	conn  *countingConn // nil for a connection we cannot see into
	start int64
}

// trace returns ctx with a trace that remembers the connection the request
// got and how much had been written to it before.
func (w *wireWatch) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			c := underlying(info.Conn)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.got, w.conn = true, c
			if c != nil {
				w.start = c.written.Load()
			}
		},
	})
}

// nothingWritten reports whether the request provably never left: it got
// no connection, or not one byte was written on the one it got. A
// connection we cannot see into counts as written.
func (w *wireWatch) nothingWritten() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.got:
		return true
	case w.conn == nil:
		return false
	default:
		return w.conn.written.Load() == w.start
	}
}

// underlying finds our counting connection under a TLS one.
func underlying(c net.Conn) *countingConn {
	for c != nil {
		switch v := c.(type) {
		case *countingConn:
			return v
		case *tls.Conn:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}
