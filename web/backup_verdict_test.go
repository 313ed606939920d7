package web

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// TestBackupsPageShowsRejectedAndWarnings: keep 2, two good backups, then
// one whose copy fails the real verification (it is truncated first): the
// page lists both good ones, the rejected copy apart with its reason, and
// warns that the last backup failed and why; so does the overview, with
// the newest verified backup's age. A copy with unreadable records is
// then verified with warnings: it counts (the oldest good one goes) and
// the page says what it carries.
func TestBackupsPageShowsRejectedAndWarnings(t *testing.T) {
	cfg := config.Default()
	cfg.Backups.Keep = 2
	e, _ := newEnv(t, cfg, envOptions{})
	m, dir := e.metrics, store.BackupDir(cfg.DataDir)
	admin := loggedIn(t, e, "ada", store.RoleAdmin, "")
	sendLead(t, e, "demo", "v-1", "v1@example.com")

	t1 := time.Now().Add(-3 * time.Hour).UTC()
	var good []store.BackupFile
	for i := range 2 {
		f, _, err := e.st.BackupToDir(dir, t1.Add(time.Duration(i)*time.Hour), store.BackupOptions{Keep: 2})
		if err != nil {
			t.Fatal(err)
		}
		m.Backup(t1.Add(time.Duration(i)*time.Hour), f.Warnings, nil)
		good = append(good, f)
	}
	truncate := func(p string) error {
		if err := os.Truncate(p, 3*4096); err != nil {
			t.Fatal(err)
		}
		return store.VerifyFile(p)
	}
	badAt := t1.Add(2 * time.Hour)
	_, _, err := e.st.BackupToDir(dir, badAt, store.BackupOptions{Keep: 2, Verify: truncate})
	var re *store.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("backup of a truncated copy: %v, want a rejection", err)
	}
	m.Backup(badAt, nil, err)

	p := admin.getOK("/backups")
	files := between(p.body, `id="backup-files"`, "</table>")
	for _, f := range good {
		if !strings.Contains(files, f.Name) {
			t.Errorf("the verified backup %s is not listed", f.Name)
		}
	}
	if strings.Contains(files, re.Name) {
		t.Errorf("the rejected copy %s is listed among the backups", re.Name)
	}
	rejected := between(p.body, `id="backup-rejected"`, "</section>")
	if !strings.Contains(rejected, re.Name) || !strings.Contains(rejected, "truncated") {
		t.Errorf("the rejected copy is not shown apart with its reason: %.1500s", rejected)
	}
	last := between(p.body, `id="backup-last"`, "</p>")
	if !strings.Contains(last, `class="notice error"`) || !strings.Contains(last, "The last backup failed: ") || !strings.Contains(last, "truncated") {
		t.Errorf("the page does not warn that the last backup failed, and why: %s", last)
	}
	if newest := between(p.body, `id="backup-newest"`, "</p>"); !strings.Contains(newest, good[1].Name) {
		t.Errorf("the newest verified backup is not %s: %s", good[1].Name, newest)
	}
	o := admin.getOK("/")
	if !strings.Contains(o.body, "The last backup failed: ") || !strings.Contains(o.body, "The newest verified backup is ") {
		t.Errorf("the overview does not warn with the reason and the newest verified backup's age: %.3000s", o.body)
	}

	// Unreadable records only: kept, counted, shown with its warnings.
	unreadable := []string{"event demo:v-1 cannot be read: cannot be decoded"}
	warnAt := t1.Add(3 * time.Hour)
	f, _, err := e.st.BackupToDir(dir, warnAt, store.BackupOptions{Keep: 2, Verify: func(p string) error {
		if err := store.VerifyFile(p); err != nil {
			return err
		}
		return &store.UnreadableRecordsError{Path: p, Records: []store.Unreadable{{Kind: "event", ID: "demo:v-1", Reason: "cannot be decoded"}}}
	}})
	if err != nil {
		t.Fatalf("backup with unreadable records: %v", err)
	}
	m.Backup(warnAt, f.Warnings, nil)
	p = admin.getOK("/backups")
	files = between(p.body, `id="backup-files"`, "</table>")
	if !strings.Contains(files, f.Name) || !strings.Contains(files, good[1].Name) || strings.Contains(files, good[0].Name) {
		t.Errorf("after a backup with warnings the list is not it and %s: %.2000s", good[1].Name, files)
	}
	if !strings.Contains(files, "with warnings: 1 unreadable record") || !strings.Contains(files, unreadable[0]) {
		t.Errorf("the backup with warnings does not say what it carries: %.2000s", files)
	}
	if newest := between(p.body, `id="backup-newest"`, "</p>"); !strings.Contains(newest, `notice warn`) || !strings.Contains(newest, "verified with warnings") {
		t.Errorf("the newest backup's line does not warn: %s", newest)
	}
	metrics := scrapeText(t, e)
	for _, want := range []string{"handoff_backup_last_result 1", "handoff_backup_last_success_warnings 1", `handoff_backups_total{result="failed"} 1`, "handoff_backup_last_success_timestamp_seconds "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "handoff_backup"))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, store.RejectedDir, re.Name)); err != nil {
		t.Errorf("the rejected copy is gone: %v", err)
	}
}

// between is the part of s from the first from to the next to after it.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j+len(to)]
	}
	return s
}
