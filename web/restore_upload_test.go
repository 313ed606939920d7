package web

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// TestRestoreUploadRefusesBeforeTheBody: the upload route gives its body an
// hour, but only once an admin's session and CSRF token are checked. A
// caller without them who sends the headers and then nothing (a held
// connection) is answered at once, 401 or 403, without the server waiting
// for a body: each connection reads its answer under a client deadline, so
// a server that waited fails the test instead of hanging it.
func TestRestoreUploadRefusesBeforeTheBody(t *testing.T) {
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	approver := loggedIn(t, e, "ann", store.RoleApprover, "")
	cookie := func(b *browser) string {
		u, _ := url.Parse(b.base)
		var parts []string
		for _, c := range b.c.Jar.Cookies(u) {
			parts = append(parts, c.Name+"="+c.Value)
		}
		return strings.Join(parts, "; ")
	}
	const boundary = "held"
	cases := []struct {
		name   string
		header string // extra header lines
		body   string // what is sent of the body before the caller goes quiet
		want   int
	}{
		{"no cookie", "", "", http.StatusUnauthorized},
		{"an approver's session", "Cookie: " + cookie(approver) + "\r\n", "", http.StatusForbidden},
		{"an admin's session, a wrong token as the first part", "Cookie: " + cookie(admin) + "\r\n",
			"--" + boundary + "\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\nnot-the-token\r\n--" + boundary + "\r\n", http.StatusForbidden},
		{"an admin's session, the file before any token", "Cookie: " + cookie(admin) + "\r\n",
			"--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.db\"\r\n\r\n", http.StatusForbidden},
	}
	host := strings.TrimPrefix(e.url, "http://")
	for _, tc := range cases {
		// A body declared small enough that the server would read it to
		// keep the connection, and one too large for that.
		for _, length := range []int{1 << 10, 1 << 20} {
			t.Run(fmt.Sprintf("%s, %d bytes declared", tc.name, length), func(t *testing.T) {
				const conns = 8
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						c, err := net.Dial("tcp", host)
						if err != nil {
							t.Error(err)
							return
						}
						defer c.Close()
						// At most a few lines of the declared body come.
						fmt.Fprintf(c, "POST /backups/restore/upload HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n%s\r\n%s",
							host, boundary, length, tc.header, tc.body)
						_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
						resp, err := http.ReadResponse(bufio.NewReader(c), nil)
						if err != nil {
							t.Errorf("connection %d: no answer while the body is held back: %v", i, err)
							return
						}
						raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
						resp.Body.Close()
						if resp.StatusCode != tc.want {
							t.Errorf("connection %d: %d %s, want %d", i, resp.StatusCode, raw, tc.want)
						}
					}()
				}
				close(start)
				wg.Wait()
			})
		}
	}
	// The dashboard's own form still restores (TestRestoreUpload covers
	// the file); the token in the header works as well as the first part.
	if p := uploadRestore(t, admin, "none.db", nil, "restore"); p.code != http.StatusUnprocessableEntity && p.code != http.StatusBadRequest {
		t.Errorf("an admin's upload with the token: %d %.300s, want it past the gate (400 or 422)", p.code, p.body)
	}
}
