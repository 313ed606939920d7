package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff/handoff/store/storetest"
)

// goodBackup is a backup of a database with enough events for the events
// bucket to span a branch page and many leaf pages.
func goodBackup(t *testing.T) []byte {
	t.Helper()
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 400 {
		record(t, st, fmt.Sprintf("m-%04d", i), t0)
	}
	var b bytes.Buffer
	if _, _, err := st.Backup(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// wantRefusal fails unless err is one line naming path, a *DamagedError
// about it, and no crash report.
func wantRefusal(t *testing.T, what, path string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; want a refusal", what)
	}
	msg := err.Error()
	var de *DamagedError
	switch {
	case !errors.As(err, &de) || de.Path != path:
		t.Errorf("%s = %q (%T); want a *DamagedError about %s", what, msg, err, path)
	case strings.Contains(msg, "\n") || !strings.Contains(msg, path):
		t.Errorf("%s = %q; want one line naming %s", what, msg, path)
	case strings.Contains(msg, "goroutine "):
		t.Errorf("%s = %q; want a sentence, not a goroutine dump", what, msg)
	}
}

// TestDamagedFiles gives every damaged file to each way the store reads
// one: the server's open (with CheckPages), VerifyFile, and Restore, which
// must keep the database it would have replaced.
func TestDamagedFiles(t *testing.T) {
	good := goodBackup(t)
	cases, err := storetest.Cases(good, string(bucketEvents))
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, storetest.Case{Name: "good"})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			data, isGood := tc.Data, tc.Name == "good"
			if isGood {
				data = good
			}
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}

			verr := VerifyFile(path)
			t.Logf("VerifyFile: %v", verr)
			if isGood {
				if verr != nil {
					t.Fatalf("VerifyFile(good) = %v", verr)
				}
			} else {
				wantRefusal(t, "VerifyFile", path, verr)
			}

			live := filepath.Join(t.TempDir(), "data")
			if err := os.MkdirAll(live, 0o700); err != nil {
				t.Fatal(err)
			}
			liveFile := filepath.Join(live, FileName)
			if err := os.WriteFile(liveFile, good, 0o600); err != nil {
				t.Fatal(err)
			}
			_, rerr := Restore(context.Background(), live, path)
			if isGood {
				if rerr != nil {
					t.Errorf("Restore(good) = %v", rerr)
				}
			} else {
				wantRefusal(t, "Restore", path, rerr)
				if !strings.Contains(rerr.Error(), "nothing was changed") {
					t.Errorf("Restore = %q; want it to say nothing was changed", rerr)
				}
				if b, err := os.ReadFile(liveFile); err != nil || !bytes.Equal(b, good) {
					t.Errorf("a refused restore changed the live database (%v)", err)
				}
				if kept, _ := filepath.Glob(liveFile + ".before-restore-*"); len(kept) != 0 {
					t.Errorf("a refused restore kept copies: %v", kept)
				}
			}

			// This file is small, so CheckPages checks it in full: a
			// damaged record is refused too.
			st, oerr := OpenFile(path, Options{CheckPages: true})
			t.Logf("OpenFile: %v", oerr)
			if isGood {
				if oerr != nil {
					t.Fatalf("OpenFile = %v; want it opened", oerr)
				}
				st.Close()
				return
			}
			wantRefusal(t, "OpenFile", path, oerr)
			if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, data) {
				t.Errorf("a refused open changed the file (%v)", err)
			}
		})
	}
}

// TestOpenCreatesOnlyWhereNoFileExists: a zero-length handoff.db (a crash
// before bbolt's first write, or a careless copy) is refused, not silently
// made into an empty database; a missing one is created.
func TestOpenCreatesOnlyWhereNoFileExists(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	wantRefusal(t, "Open(zero-length file)", path, err)
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the refused empty file was changed: %v, %v", fi, err)
	}

	fresh := t.TempDir()
	st, err := Open(fresh, Options{CheckPages: true})
	if err != nil {
		t.Fatalf("Open(no file) = %v; want a new database", err)
	}
	st.Close()
}

// TestCheckInChildReportsACrash: a child that dies is a damaged file, in
// one sentence, with the runtime's own words and no goroutine dump.
func TestCheckInChildReportsACrash(t *testing.T) {
	stderr := "unexpected fault address 0x7f0000001000\nfatal error: fault\n[signal SIGBUS: bus error code=0x2 addr=0x7f0000001000 pc=0x4a6b4e]\n\ngoroutine 7 gp=0xc000007 m=4 [running]:\nruntime.throw({0x5,...})\n"
	got := lastWords(stderr, errors.New("exit status 2"))
	want := "unexpected fault address 0x7f0000001000; fatal error: fault; [signal SIGBUS: bus error code=0x2 addr=0x7f0000001000 pc=0x4a6b4e]"
	if got != want {
		t.Errorf("lastWords = %q, want %q", got, want)
	}
	if got := lastWords("", errors.New("signal: killed")); got != "signal: killed" {
		t.Errorf("lastWords of a silent death = %q, want the exit", got)
	}
}

// TestOpenLargeFileWalksPagesOnly: above fullCheckLimit, CheckPages walks
// the pages only, so a file whose damage is inside a record's bytes opens
// (the record is a decoding error where it is read, and verify's finding),
// while page damage is still refused.
func TestOpenLargeFileWalksPagesOnly(t *testing.T) {
	limit := fullCheckLimit
	fullCheckLimit = 0 // every file counts as large
	t.Cleanup(func() { fullCheckLimit = limit })
	cases, err := storetest.Cases(goodBackup(t), string(bucketEvents))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), "large.db")
		if err := os.WriteFile(path, tc.Data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := OpenFile(path, Options{CheckPages: true})
		switch {
		case tc.RecordsOnly && err != nil:
			t.Errorf("%s: OpenFile = %v; want it opened (a page walk cannot see inside records)", tc.Name, err)
		case !tc.RecordsOnly && err == nil:
			t.Errorf("%s: opened; want the page walk to refuse it", tc.Name)
		}
		if err == nil {
			st.Close()
		}
	}
}
