package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/handoff/handoff/store"
)

// versionCmd prints the release, the database schema this binary writes
// (what an upgrade or a rollback has to know) and how it was built.
func versionCmd(e env) error {
	fmt.Fprintln(e.stdout, "handoff", version())
	fmt.Fprintf(e.stdout, "schema %d: opens databases of schema 1 to %d (older ones are migrated when opened) and refuses newer ones\n", store.SchemaVersion, store.SchemaVersion)
	fmt.Fprintf(e.stdout, "built with %s for %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision", "vcs.time", "vcs.modified", "CGO_ENABLED", "-trimpath":
				fmt.Fprintf(e.stdout, ", %s=%s", s.Key, s.Value)
			}
		}
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// version is the module version, or the VCS revision of a development build.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 && (v == "" || v == "(devel)") {
			v = "devel-" + s.Value[:12]
		}
	}
	return v
}
