package proc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

const (
	// TailLines is how many lines of its output a Process keeps.
	TailLines = 200
	// maxLine cuts a line that never ends, so that the buffer cannot grow
	// without bound.
	maxLine = 64 << 10
)

// output collects a process's two streams line by line: it copies each line
// to the log, keeps the last TailLines of them and reports the first
// "listening" line.
type output struct {
	mu    sync.Mutex
	log   io.Writer
	lines []string // the last lines, oldest first; at most 2*TailLines
	found chan listening
	seen  bool // the listening line has been reported
}

// listening is the address of the first listening line, or why that line
// is unusable.
type listening struct {
	addr string
	err  error
}

func newOutput(log io.Writer) *output {
	return &output{log: log, found: make(chan listening, 1)}
}

// stream is one of the process's output streams; os/exec writes each from a
// single goroutine, so it needs no lock of its own.
func (o *output) stream(prefix string) *stream { return &stream{out: o, prefix: prefix} }

func (o *output) line(prefix string, b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	line := prefix + string(b)
	if o.log != nil {
		// A failed log write must not stall the child: the log is only
		// for diagnosis.
		_, _ = io.WriteString(o.log, line+"\n")
	}
	o.lines = append(o.lines, line)
	if len(o.lines) > 2*TailLines {
		o.lines = append(o.lines[:0], o.lines[len(o.lines)-TailLines:]...)
	}
	if !o.seen {
		if addr, err := parseListening(b); addr != "" || err != nil {
			o.seen = true
			o.found <- listening{addr: addr, err: err}
		}
	}
}

func (o *output) tail(n int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	n = min(n, TailLines, len(o.lines))
	return strings.Join(o.lines[len(o.lines)-n:], "\n")
}

type stream struct {
	out     *output
	prefix  string
	partial []byte
}

func (s *stream) Write(b []byte) (int, error) {
	s.partial = append(s.partial, b...)
	rest := s.partial
	for {
		n := bytes.IndexByte(rest, '\n')
		if n < 0 {
			break
		}
		s.out.line(s.prefix, rest[:n])
		rest = rest[n+1:]
	}
	if len(rest) > maxLine {
		s.out.line(s.prefix, rest)
		rest = nil
	}
	s.partial = append(s.partial[:0], rest...)
	return len(b), nil
}

// flush hands over a last line that had no newline; called after Wait.
func (s *stream) flush() {
	if len(s.partial) > 0 {
		s.out.line(s.prefix, s.partial)
		s.partial = nil
	}
}

// parseListening reads one log line. It returns the address of a JSON
// {"msg":"listening","addr":...} line, "" for any other line, and an error
// when the address is not a concrete 127.0.0.1 port: nothing started here
// may be contacted anywhere else.
func parseListening(line []byte) (string, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return "", nil
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != "listening" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(rec.Addr)
	if err != nil {
		return "", fmt.Errorf("the listening line has a bad addr %q: %w", rec.Addr, err)
	}
	if host != "127.0.0.1" {
		return "", fmt.Errorf("listening on %q, not on 127.0.0.1", rec.Addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("the listening line has a bad port in %q", rec.Addr)
	}
	return rec.Addr, nil
}
