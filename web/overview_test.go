package web

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// TestOverviewShowsFailedBackup: a failed backup is on the overview for
// admins until a good one replaces it.
func TestOverviewShowsFailedBackup(t *testing.T) {
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "ann", store.RoleAdmin, "")
	const failed = "The last backup failed"
	if p := admin.get("/"); p.code != 200 || strings.Contains(p.body, failed) {
		t.Fatalf("before any backup: %d, failure notice shown %v", p.code, strings.Contains(p.body, failed))
	}
	e.srv.metrics.Backup(time.Now(), nil, errors.New("the disk is full"))
	if p := admin.get("/"); !strings.Contains(p.body, failed) {
		t.Errorf("after a failed backup the overview does not say so")
	}
	e.srv.metrics.Backup(time.Now(), nil, nil)
	if p := admin.getOK("/"); strings.Contains(p.body, failed) {
		t.Errorf("after a good backup the overview still shows the failure")
	}
}

// TestSettingsShowDatabaseSize: the settings page shows the file's size and free pages.
func TestSettingsShowDatabaseSize(t *testing.T) {
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "ann", store.RoleAdmin, "")
	p := admin.get("/settings")
	sz, err := e.st.Size()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Database", "free pages", e.st.Path()} {
		if !strings.Contains(p.body, want) {
			t.Errorf("/settings lacks %q", want)
		}
	}
	if !strings.Contains(p.body, fmt.Sprintf("(%d bytes)", sz.Bytes)) {
		t.Errorf("/settings does not show the file size %d", sz.Bytes)
	}
}
