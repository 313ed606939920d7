package web

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/handoff/handoff/static"
)

// TestGzip asks for the stylesheet, the vendored htmx and the login page
// with and without Accept-Encoding: gzip. Gzipped, each comes smaller and
// unpacks to exactly the plain answer.
func TestGzip(t *testing.T) {
	e := newTestEnv(t, nil)
	// The transport's own gzip handling is off so the test sees the wire.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path, enc string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, raw
	}
	for _, path := range []string{static.URL("app.css"), static.URL("htmx.min.js"), "/login"} {
		t.Run(path, func(t *testing.T) {
			plainResp, plain := get(path, "")
			if plainResp.StatusCode != http.StatusOK || plainResp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("GET %s without Accept-Encoding: %d, Content-Encoding %q; want 200 uncompressed", path, plainResp.StatusCode, plainResp.Header.Get("Content-Encoding"))
			}
			resp, packed := get(path, "gzip, deflate, br")
			if got := resp.Header.Get("Content-Encoding"); got != "gzip" {
				t.Fatalf("GET %s with Accept-Encoding gzip: Content-Encoding %q; want gzip", path, got)
			}
			if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
				t.Errorf("GET %s gzipped: Vary %q; want it to name Accept-Encoding for caches", path, resp.Header.Get("Vary"))
			}
			zr, err := gzip.NewReader(strings.NewReader(string(packed)))
			if err != nil {
				t.Fatal(err)
			}
			unpacked, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if string(unpacked) != string(plain) && path != "/login" { // the login page carries a fresh token each time
				t.Errorf("GET %s: the gzipped answer unpacks to %d bytes that differ from the plain %d", path, len(unpacked), len(plain))
			}
			if len(packed) >= len(plain) {
				t.Errorf("GET %s: gzipped %d bytes, plain %d; want it smaller", path, len(packed), len(plain))
			}
			t.Logf("%s: %d bytes plain, %d gzipped", path, len(plain), len(packed))
		})
	}
}
