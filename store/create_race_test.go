package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store/engine/boltengine"
)

// createChildEnv, when set, makes the test binary a child that opens a
// new database (runCreateChild): bbolt's lock is per process, so two
// creates racing must be two processes.
const createChildEnv = "HANDOFF_STORE_TEST_CREATE"

// createOrder is what the test asks of a create child.
type createOrder struct {
	Path string `json:"path"`
	Sig  string `json:"sig"`  // the folder of the signal files
	Fail bool   `json:"fail"` // fail the create after its file is made and migrated
}

// The signal files a create child writes into createOrder.Sig.
const (
	sigFailMade = "fail-made" // the failing child made and migrated its file
	sigOpened   = "opened"    // the other child opened the database and wrote to it
)

// openedKey is the meta key the opening child writes.
var openedKey = []byte("opened-by-the-other")

func init() {
	if raw, ok := os.LookupEnv(createChildEnv); ok {
		os.Exit(runCreateChild(raw))
	}
}

// runCreateChild opens order.Path. A failing child fails its create once
// its file is made, closes it, and removes what it made only once the
// other child has opened the database (so its clean-up runs while the
// other holds it); the other writes openedKey, says so, and holds the
// database until its stdin closes.
func runCreateChild(raw string) int {
	var order createOrder
	if err := json.Unmarshal([]byte(raw), &order); err != nil {
		fmt.Println(err)
		return 2
	}
	touch := func(name string) { _ = os.WriteFile(filepath.Join(order.Sig, name), nil, 0o600) }
	if order.Fail {
		createHooks.made = func() error {
			touch(sigFailMade)
			return errors.New("the injected failure after the file was made")
		}
		createHooks.removing = func() {
			// Until the other child opened the database (or a bound).
			_ = proc.Poll(context.Background(), 20*time.Second, func(time.Duration) time.Duration { return time.Millisecond }, func() (bool, error) {
				_, err := os.Stat(filepath.Join(order.Sig, sigOpened))
				return err == nil, nil
			})
		}
		_, err := OpenFile(order.Path, Options{Timeout: 20 * time.Second})
		fmt.Println(err)
		if err == nil {
			return 0
		}
		return 3
	}
	st, err := OpenFile(order.Path, Options{Timeout: 20 * time.Second})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.bucket(bucketMeta).Put(openedKey, []byte("yes")) }); err != nil {
		fmt.Println(err)
		return 2
	}
	touch(sigOpened)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := st.Close(); err != nil {
		fmt.Println(err)
		return 2
	}
	return 0
}

// startCreateChild starts this test binary as a create child; its stdin
// stays open until the returned pipe is closed.
func startCreateChild(t *testing.T, order createOrder) (*exec.Cmd, io.WriteCloser, *bytes.Buffer) {
	t.Helper()
	raw, err := json.Marshal(order)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), createChildEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, stdin, &out
}

// waitFile waits for the signal file name in dir.
func waitFile(t *testing.T, dir, name string, child *exec.Cmd) {
	t.Helper()
	err := proc.Poll(t.Context(), 30*time.Second, func(time.Duration) time.Duration { return time.Millisecond }, func() (bool, error) {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", name, err)
	}
}

// TestConcurrentCreatesKeepEachOthersFile: two processes open the same
// new database at once, and the first one's create fails after its file
// was made (as a full disk fails it). Its clean-up runs while the other
// holds the database it opened, and must not remove that: the other's
// write is in the file at the database's name afterwards, and nothing
// half made is left beside it.
func TestConcurrentCreatesKeepEachOthersFile(t *testing.T) {
	boltOnly(t)
	dir, sig := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, FileName)

	failing, _, failOut := startCreateChild(t, createOrder{Path: path, Sig: sig, Fail: true})
	waitFile(t, sig, sigFailMade, failing)
	other, release, otherOut := startCreateChild(t, createOrder{Path: path, Sig: sig})
	waitFile(t, sig, sigOpened, other)

	err := failing.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(failOut.String(), "the injected failure") {
		t.Fatalf("the failing create: %v, output %q; want exit 3 with the injected failure", err, failOut)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("after the failed create, the database the other process opened: %v", err)
	}
	release.Close()
	if err := other.Wait(); err != nil {
		t.Fatalf("the other process: %v, output %q", err, otherOut)
	}

	st, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []byte
	if err := st.View(func(tx *Tx) error {
		got = bytes.Clone(tx.bucket(bucketMeta).Get(openedKey))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "yes" {
		t.Errorf("the database at %s lacks the other process's write (%q): it is not the file that process opened", path, got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != FileName {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the data folder holds %v; want %s alone", names, FileName)
	}
}

// TestCreateLosingTheLinkOpensTheWinner: a create whose file is made
// while another process published the database first keeps that
// database, opens it as any existing one, and removes what it made.
func TestCreateLosingTheLinkOpensTheWinner(t *testing.T) {
	boltOnly(t)
	winner := filepath.Join(t.TempDir(), FileName)
	st, err := OpenFile(winner, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.bucket(bucketMeta).Put(openedKey, []byte("winner")) }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	raw, err := os.ReadFile(winner)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	createHooks.made = func() error { return os.WriteFile(path, raw, 0o600) } // the other process publishes first
	t.Cleanup(func() { createHooks.made = nil })

	st, err = OpenFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []byte
	if err := st.View(func(tx *Tx) error {
		got = bytes.Clone(tx.bucket(bucketMeta).Get(openedKey))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "winner" {
		t.Errorf("the open answered a database without the winner's write (%q)", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the data folder holds %d entries; want %s alone", len(entries), FileName)
	}
}

// TestCreateSweepsWhatACrashLeft: a half-made database an hour old that
// no process holds is removed by the next create; a young one (a create
// in progress) is kept.
func TestCreateSweepsWhatACrashLeft(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	old, young := filepath.Join(dir, ".handoff.db.new-1"), filepath.Join(dir, ".handoff.db.new-2")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * sweepAge)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Lstat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old half-made file: %v; want it removed", err)
	}
	if _, err := os.Lstat(young); err != nil {
		t.Errorf("the young half-made file: %v; want it kept", err)
	}
}

// TestCreateSweepKeepsALockedFile: an old made file that a process still
// holds (bbolt's lock: a create in progress, however slow) is not swept.
func TestCreateSweepKeepsALockedFile(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	held := filepath.Join(dir, ".handoff.db.new-3")
	db, err := boltengine.Open(held, boltengine.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	then := time.Now().Add(-2 * sweepAge)
	if err := os.Chtimes(held, then, then); err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Lstat(held); err != nil {
		t.Errorf("the old made file another open holds: %v; want it kept", err)
	}
}

// TestOpenSweepsALeftLink: a made name still linked to handoff.db (a create
// that died between publishing and removing it) is removed at the next
// read-write open, and the database keeps what it held.
func TestOpenSweepsALeftLink(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	record(t, st, "kept-1", t0)
	st.Close()
	left := filepath.Join(dir, ".handoff.db.new-4")
	if err := os.Link(filepath.Join(dir, FileName), left); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := os.Lstat(left); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the made name linked to %s: %v; want it removed", FileName, err)
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.EventByKey("kept-1"); return err }); err != nil {
		t.Errorf("after the sweep: %v; want the event kept", err)
	}
}
