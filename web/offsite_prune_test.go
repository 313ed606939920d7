package web

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// TestOffsitePruneFailureIsApart: a bucket that takes and returns the
// copy but refuses deletes. The copy is recorded as uploaded and verified;
// only the prune of the old copy past keep fails, and that shows as a
// prune failure on the page, in the answer and in the metrics, not as a
// failed copy.
func TestOffsitePruneFailureIsApart(t *testing.T) {
	s3 := testkit.StartS3(t)
	up, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(up)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete || r.URL.Query().Has("delete") {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>deletes are not allowed</Message></Error>`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	// An old copy already in the bucket, past keep after the next upload.
	old := store.BackupPrefix + "20200101T000000Z.db"
	if err := os.WriteFile(filepath.Join(s3.Root, s3.Bucket, old), []byte("an old copy"), 0o644); err != nil {
		t.Fatal(err)
	}
	s3.Endpoint = proxy.URL
	cfg := offsiteConfig(s3, "")
	cfg.Backups.Target.Keep = 1
	e := newTestEnv(t, cfg)

	code, res, raw := backupNow(t, e)
	if code != http.StatusOK || res.Copy == nil {
		t.Fatalf("backup now with a bucket that refuses deletes: %d %s; want 200 with the verified copy", code, raw)
	}
	if !strings.Contains(res.PruneError, old) {
		t.Errorf("the answer's prune error = %q, want one naming %s", res.PruneError, old)
	}
	if _, err := os.Stat(filepath.Join(s3.Root, s3.Bucket, old)); err != nil {
		t.Errorf("the old copy is gone: %v", err)
	}
	m := scrapeText(t, e)
	for _, want := range []string{
		`handoff_offsite_backups_total{result="ok"} 1`,
		"handoff_offsite_backup_last_result 1",
		"handoff_offsite_prune_failures_total 1",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "offsite"))
		}
	}
	if strings.Contains(m, `result="failed"`) {
		t.Errorf("the verified copy counts as failed:\n%s", grepLines(m, "offsite"))
	}
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.getOK("/backups")
	if !strings.Contains(p.body, `id="offsite-last" class="notice ok"`) || !strings.Contains(p.body, `id="offsite-prune" class="notice error"`) {
		t.Errorf("the page does not show the good copy and the failed prune apart: %.3000s", p.body)
	}
}
