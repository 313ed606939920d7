package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Root walks up from dir to the nearest folder holding go.mod.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = up
	}
}

// Build compiles the main package at the module root into out: exactly
// what a user would install.
func Build(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot build the handoff binary (go build -o %s . in %s): %w\n%s", out, root, err, bytes.TrimSpace(b))
	}
	return nil
}

// built is the binary of Binary, built at most once per process.
var built struct {
	once sync.Once
	mu   sync.Mutex // guards dir against RemoveBinary
	dir  string
	path string
	err  error
}

// Binary builds the handoff binary of the module above the working
// directory (a test's package folder) into a temporary folder, once per
// process, and returns its path; later calls return the same path or the
// same error. A TestMain calls RemoveBinary after the tests.
func Binary() (string, error) {
	built.once.Do(func() {
		root, err := os.Getwd()
		if err == nil {
			root, err = Root(root)
		}
		if err != nil {
			built.err = fmt.Errorf("cannot build the handoff binary: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "handoff-bin-")
		if err != nil {
			built.err = fmt.Errorf("cannot build the handoff binary: %w", err)
			return
		}
		built.mu.Lock()
		built.dir = dir
		built.mu.Unlock()
		built.path = filepath.Join(dir, "handoff")
		built.err = Build(context.Background(), root, built.path)
	})
	return built.path, built.err
}

// RemoveBinary removes what Binary built, if it built anything.
func RemoveBinary() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
		built.dir = ""
	}
}
