package browser

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

// TestBackupsPageOnPostgres: on PostgreSQL /backups says the database's
// own tools are its backups and offers the logical export; the page keeps
// the page rules (no sideways scroll, one h1, axe) at phone and desktop
// widths, light and dark, with screenshots.
func TestBackupsPageOnPostgres(t *testing.T) {
	requireEnvironment(t)
	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	admin := user{name: "admin", role: "admin", password: "correct-horse-battery"}
	inst := &proc.Instance{
		Binary: bin,
		Dir:    t.TempDir(),
		Config: fmt.Sprintf("database_url: %q\n", pgtest.URL(t)+" search_path="+pgtest.Schema(t)),
		Env:    []string{"HANDOFF_API_TOKEN=" + randomHex(t, 24), "HANDOFF_ADMIN_PASSWORD=" + admin.password},
		Within: startTimeout,
	}
	s := &server{t: t, client: &http.Client{}}
	t.Cleanup(s.stop)
	if s.run, err = inst.Start(t.Context()); err != nil {
		t.Fatalf("handoff serve %v", err)
	}
	s.url = s.run.URL()

	b := newBrowser(t)
	b.login(s.url, admin, "/backups", "#backup-database")
	for _, pass := range passes {
		b.viewport(pass.width, pass.height, pass.mobile, pass.dark)
		b.checkPage("postgres-"+pass.name, int(pass.width), s.url+"/backups")
	}
}
