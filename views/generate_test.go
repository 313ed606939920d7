package views

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate fails when `go tool templ generate` would change a
// committed *_templ.go file: it generates a copy of every .templ file in a
// temporary folder and compares.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the templ generator")
	}
	sources, err := filepath.Glob("*.templ")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no .templ files: %v", err)
	}
	dir := t.TempDir()
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, src), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "tool", "templ", "generate", "-path", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("templ generate: %v\n%s", err, out)
	}
	for _, src := range sources {
		gen := src[:len(src)-len(".templ")] + "_templ.go"
		want, err := os.ReadFile(filepath.Join(dir, gen))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(gen)
		if err != nil {
			t.Fatalf("%s is missing: run go tool templ generate", gen)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go tool templ generate", gen)
		}
	}
}
