package web_test

import (
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/web"
)

// The tests of package web run on the whole process as app wires it; they
// cannot import app themselves (app imports web), so this file hands them
// apptest.New before any test runs.
func init() {
	web.NewApp = func(t *testing.T, cfg *config.Config, now func() time.Time, apiToken string) web.App {
		return apptest.New(t, cfg, app.Deps{Now: now, APIToken: apiToken})
	}
	web.ExpectUnreadable = apptest.ExpectUnreadable
}
