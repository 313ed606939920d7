package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

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

// wantUnreadable fails unless err is one line naming path, an
// *UnreadableRecordsError about it: no structural damage, records that
// cannot be read.
func wantUnreadable(t *testing.T, what, path string, err error) {
	t.Helper()
	var ue *UnreadableRecordsError
	var de *DamagedError
	switch {
	case !errors.As(err, &ue) || ue.Path != path || len(ue.Records) == 0:
		t.Errorf("%s = %v (%T); want an *UnreadableRecordsError about %s", what, err, err, path)
	case errors.As(err, &de):
		t.Errorf("%s = %q; want no *DamagedError: only a record is damaged", what, err)
	case strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), path):
		t.Errorf("%s = %q; want one line naming %s", what, err, path)
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
			} else if tc.RecordsOnly {
				wantUnreadable(t, "VerifyFile", path, verr)
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
			switch {
			case isGood:
				if rerr != nil {
					t.Errorf("Restore(good) = %v", rerr)
				}
			case tc.RecordsOnly:
				// A file whose only problems are unreadable records is as
				// good as the live file it was copied from (BackupVerdict):
				// it restores, and serve then shows those records as rows.
				if rerr != nil {
					t.Errorf("Restore(records only) = %v; want it restored", rerr)
				}
			default:
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
			// damaged record is found, and the file still served, the
			// record known as unreadable.
			st, oerr := OpenFile(path, Options{CheckPages: true})
			t.Logf("OpenFile: %v", oerr)
			if tc.RecordsOnly {
				if oerr != nil {
					t.Fatalf("OpenFile = %v; want it opened: only a record is damaged", oerr)
				}
				defer st.Close()
				if us := st.Unreadable(); len(us) != 1 || us[0].Kind != "event" {
					t.Errorf("Unreadable() = %+v, want the one event", us)
				}
				return
			}
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

// TestOpenLargeFileWalksPagesOnly: above fullCheckLimit, a file with a
// stored freelist is opened after the cheap check (meta pages, freelist
// page, the top levels of every bucket) and one without gets bbolt's page
// walk in the child; neither reads inside records, so a file whose damage
// is inside a record's bytes opens (the record is a decoding error where
// it is read, and verify's finding), while page damage is still refused.
// This file's buckets are two levels deep, so the cheap check sees them whole.
func TestOpenLargeFileWalksPagesOnly(t *testing.T) {
	limit := fullCheckLimit
	fullCheckLimit = 0 // every file counts as large
	t.Cleanup(func() { fullCheckLimit = limit })
	for _, synced := range []bool{true, false} {
		good := goodBackup(t)
		if !synced {
			good = withoutFreelist(t, good)
		}
		cases, err := storetest.Cases(good, string(bucketEvents))
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, storetest.Case{Name: "good", Data: good, RecordsOnly: true})
		for _, tc := range cases {
			path := filepath.Join(t.TempDir(), "large.db")
			if err := os.WriteFile(path, tc.Data, 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := OpenFile(path, Options{CheckPages: true})
			switch {
			case tc.RecordsOnly && err != nil:
				t.Errorf("%s (freelist stored: %t): OpenFile = %v; want it opened (a page walk cannot see inside records)", tc.Name, synced, err)
			case !tc.RecordsOnly && err == nil:
				t.Errorf("%s (freelist stored: %t): opened; want the page check to refuse it", tc.Name, synced)
			case !tc.RecordsOnly:
				wantRefusal(t, tc.Name+": OpenFile", path, err)
			}
			if err == nil {
				if st.Deferred() != synced {
					t.Errorf("%s: Deferred() = %t with the freelist stored %t; want the walk deferred exactly when the open skipped it", tc.Name, st.Deferred(), synced)
				}
				st.Close()
			}
		}
	}
}

// withoutFreelist returns a copy of the database file good as a handoff
// that did not store its freelist wrote it: bbolt must then walk every page
// at open.
func withoutFreelist(t *testing.T, good []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nofreelist.db")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// One commit with NoFreelistSync writes a meta without a freelist page.
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("ping"), []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(&b); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := decodeMeta(b.Bytes()); m.freelist != noFreelist {
		t.Fatalf("the copy's meta names freelist page %d; want none", m.freelist)
	}
	return b.Bytes()
}

// TestCheckPagesFindsWhatTheOpenLeftOut: with the open reading only the
// bucket roots, damage on a leaf page opens, Deferred says the walk is
// still to run, and CheckPages finds it; from then on Ping (so /readyz)
// answers with it. A sound file passes, however many writes commit
// meanwhile: the walk's read transaction pins the pages it reads.
func TestCheckPagesFindsWhatTheOpenLeftOut(t *testing.T) {
	limit, levels := fullCheckLimit, openCheckLevels
	fullCheckLimit, openCheckLevels = 0, 1
	t.Cleanup(func() { fullCheckLimit, openCheckLevels = limit, levels })
	good := goodBackup(t)
	cases, err := storetest.Cases(good, string(bucketEvents))
	if err != nil {
		t.Fatal(err)
	}
	leafDamage := 0
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), "large.db")
		if err := os.WriteFile(path, tc.Data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := OpenFile(path, Options{CheckPages: true})
		if err != nil {
			if tc.RecordsOnly {
				t.Errorf("%s: OpenFile = %v; want it opened", tc.Name, err)
			}
			continue // refused at open, as it should be when the open can see it
		}
		if !st.Deferred() {
			t.Errorf("%s: Deferred() = false; want the walk still to run", tc.Name)
		}
		cerr := st.CheckPages(context.Background())
		t.Logf("%s: CheckPages: %v", tc.Name, cerr)
		if tc.RecordsOnly {
			if cerr != nil {
				t.Errorf("%s: CheckPages = %v; want nil (the pages are sound)", tc.Name, cerr)
			}
		} else {
			leafDamage++
			wantRefusal(t, tc.Name+": CheckPages", path, cerr)
			if perr := st.Ping(context.Background()); perr == nil || perr.Error() != cerr.Error() {
				t.Errorf("%s: Ping after CheckPages = %v; want %v", tc.Name, perr, cerr)
			}
		}
		st.Close()
	}
	if leafDamage == 0 {
		t.Fatal("every damaged file was refused at open; the test wants some left to CheckPages")
	}

	// A sound file, walked again and again while events are recorded.
	path := filepath.Join(t.TempDir(), "large.db")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := OpenFile(path, Options{CheckPages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			key := fmt.Sprintf("live-%04d", i)
			if _, err := st.RecordEvent(context.Background(), newEvent(key, t0), draftJobFor(key, 3)); err != nil {
				t.Errorf("RecordEvent(%s) during CheckPages: %v", key, err) // not Fatal: this is not the test's goroutine
				return
			}
		}
	}()
	walks := 0
	for running := true; running || walks < 2; walks++ {
		if err := st.CheckPages(context.Background()); err != nil {
			t.Fatalf("CheckPages on a sound file during writes (walk %d) = %v", walks+1, err)
		}
		select {
		case <-done:
			running = false
		default:
		}
	}
	if err := st.Ping(context.Background()); err != nil {
		t.Errorf("Ping = %v", err)
	}
}

// TestOpenRefusesADamagedFreelist: bbolt reads the stored freelist page at
// open, through the mmap and in the caller's goroutine, so the check at
// open reads it first: its type, its count and every page id it lists.
func TestOpenRefusesADamagedFreelist(t *testing.T) {
	good := goodBackup(t)
	m := decodeMeta(good)
	if m.freelist == noFreelist {
		t.Fatal("the backup has no stored freelist; the store should write one")
	}
	at := int(m.freelist) * int(m.pageSize)
	ne := binary.NativeEndian
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"freelist page type", func(b []byte) { b[at+8] = leafPageFlag }},
		{"freelist count past the page", func(b []byte) { ne.PutUint16(b[at+10:], 0xFFFE) }},
		{"freelist lists a page past the end", func(b []byte) {
			ne.PutUint16(b[at+10:], 1)
			ne.PutUint64(b[at+pageHeaderSize:], 1<<40)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Clone(good)
			tc.edit(data)
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFile(path, Options{})
			wantRefusal(t, "OpenFile", path, err)
			if err != nil && !strings.Contains(err.Error(), "freelist") {
				t.Errorf("OpenFile = %q; want it to name the freelist", err)
			}
		})
	}
}
