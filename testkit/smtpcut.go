package testkit

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SMTPCut is a TCP proxy in front of an SMTP server that, while armed,
// forwards a session up to and including DATA's final dot and then cuts
// both connections before the server's answer can come back: the server
// has the whole message, the client never learns it.
//
// Disarmed, with a delay set, it instead holds the server's answer to the
// final dot that long: the server has the message while the client waits,
// so a test can kill the client then.
type SMTPCut struct {
	Addr    string
	armed   atomic.Bool
	cuts    atomic.Int64
	delay   atomic.Int64 // time.Duration
	holding atomic.Int64
}

// SetDelay sets how long a disarmed proxy holds the answer to DATA's end.
func (p *SMTPCut) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Holding is how many answers to DATA's end the proxy holds now.
func (p *SMTPCut) Holding() int { return int(p.holding.Load()) }

// StartSMTPCut starts the proxy to upstream; it closes at the end of the test.
func StartSMTPCut(t testing.TB, upstream string) *SMTPCut {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SMTPCut{Addr: ln.Addr().String()}
	p.armed.Store(true)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.session(c, upstream) }()
		}
	}()
	return p
}

// Arm sets whether the next sessions are cut after DATA's final dot.
func (p *SMTPCut) Arm(on bool) { p.armed.Store(on) }

// Cuts is how many sessions were cut.
func (p *SMTPCut) Cuts() int { return int(p.cuts.Load()) }

func (p *SMTPCut) session(client net.Conn, upstream string) {
	defer client.Close()
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer server.Close()
	cut := p.armed.Load()
	delay := time.Duration(p.delay.Load())
	var dotSeen atomic.Bool
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if delay > 0 && dotSeen.CompareAndSwap(true, false) {
					p.holding.Add(1)
					time.Sleep(delay) // the slow server being imitated
					p.holding.Add(-1)
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	var tail []byte // the last bytes seen, to find markers split across reads
	inData := false
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if cut || delay > 0 {
				seen := append(tail, chunk...)
				if !inData && bytes.Contains(bytes.ToUpper(seen), []byte("\r\nDATA\r\n")) || bytes.HasPrefix(bytes.ToUpper(seen), []byte("DATA\r\n")) {
					inData = true
				}
				if inData {
					if i := bytes.Index(seen, []byte("\r\n.\r\n")); i >= 0 && i+5 > len(tail) && !cut {
						inData = false
						dotSeen.Store(true)
					} else if i >= 0 && i+5 > len(tail) {
						// The client's side closes before the final dot goes
						// up, so the server's answer, however quick, has no
						// connection to come back on (closing both after the
						// write let a fast "250" through now and then).
						end := i + 5 - len(tail)
						client.Close()
						_, _ = server.Write(chunk[:end])
						p.cuts.Add(1)
						return
					}
				}
				if len(seen) > 8 {
					tail = append([]byte(nil), seen[len(seen)-8:]...)
				} else {
					tail = seen
				}
			}
			if _, werr := server.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
