package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// truncatingVerify is VerifyFile on a copy cut to half its size first: the
// check that runs is the real one, on a really damaged file.
func truncatingVerify(t *testing.T) func(string) error {
	return func(path string) error {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, info.Size()/2); err != nil {
			t.Fatal(err)
		}
		return VerifyFile(path)
	}
}

func backupNames(t *testing.T, dir string) []string {
	t.Helper()
	list, err := Backups(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.Name)
	}
	return names
}

func nameAt(at time.Time) string { return BackupPrefix + at.UTC().Format("20060102T150405Z") + ".db" }

// TestBackupRejectsADamagedCopy: with keep 2, two good backups, then one
// whose copy fails verification (it is truncated before the real check):
// both good ones stay, the bad one never takes a backup's name and is kept
// in rejected/ with its reason; the next good backup prunes by the good
// ones only. Rejected copies are bounded to the newest three.
func TestBackupRejectsADamagedCopy(t *testing.T) {
	st := openTest(t)
	record(t, st, key(1), t0)
	dir := t.TempDir()
	good := BackupOptions{Keep: 2}
	bad := BackupOptions{Keep: 2, Verify: truncatingVerify(t)}
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	for h := range 2 {
		if _, _, err := st.BackupToDir(dir, at(h), good); err != nil {
			t.Fatalf("good backup %d: %v", h, err)
		}
	}
	_, _, err := st.BackupToDir(dir, at(2), bad)
	var re *RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("backup of a damaged copy: err = %v, want a *RejectedError", err)
	}
	if re.Name != nameAt(at(2)) || re.Kept != filepath.Join(dir, RejectedDir, nameAt(at(2))) || !strings.Contains(re.Reason, "truncated") {
		t.Errorf("rejection = %+v, want the name, where it is kept and a reason saying it is truncated", re)
	}
	if strings.Contains(err.Error(), ".tmp") {
		t.Errorf("the error names the temporary file: %v", err)
	}
	if got, want := backupNames(t, dir), []string{nameAt(at(1)), nameAt(at(0))}; !slices.Equal(got, want) {
		t.Fatalf("backups after a rejected one: %v, want both good ones %v", got, want)
	}
	for _, n := range backupNames(t, dir) {
		verifyFile(t, filepath.Join(dir, n))
	}
	rejected, err := RejectedBackups(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) != 1 || rejected[0].Name != nameAt(at(2)) || rejected[0].Reason != re.Reason {
		t.Fatalf("rejected = %+v, want the one copy with its reason %q", rejected, re.Reason)
	}
	if err := VerifyFile(re.Kept); err == nil {
		t.Error("the rejected copy verifies: the test damaged nothing")
	}
	// No temporary file is left behind.
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}

	// The next good backup counts the good ones only.
	if _, _, err := st.BackupToDir(dir, at(3), good); err != nil {
		t.Fatal(err)
	}
	if got, want := backupNames(t, dir), []string{nameAt(at(3)), nameAt(at(1))}; !slices.Equal(got, want) {
		t.Errorf("backups after the next good one: %v, want %v", got, want)
	}

	// Four more rejections: the newest three are kept, each with its reason.
	for h := 4; h < 8; h++ {
		if _, _, err := st.BackupToDir(dir, at(h), bad); !errors.As(err, &re) {
			t.Fatalf("rejection %d: %v", h, err)
		}
	}
	rejected, err = RejectedBackups(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rejected {
		names = append(names, r.Name)
		if r.Reason == "" {
			t.Errorf("%s has no reason", r.Name)
		}
	}
	if want := []string{nameAt(at(7)), nameAt(at(6)), nameAt(at(5))}; !slices.Equal(names, want) {
		t.Errorf("rejected copies kept: %v, want the newest three %v", names, want)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, RejectedDir))
	if len(entries) != 6 {
		t.Errorf("the rejected folder holds %d entries, want three copies and three reasons", len(entries))
	}
	if got, want := backupNames(t, dir), []string{nameAt(at(3)), nameAt(at(1))}; !slices.Equal(got, want) {
		t.Errorf("good backups after four rejections: %v, want %v", got, want)
	}
}

// TestBackupWithUnreadableRecordsCounts: a copy whose only problems are
// unreadable records (the seam's error, returned after the real check
// passed) is kept, counts toward keep and carries its warnings, on disk
// and in the answer; the warnings go with it when it is pruned.
func TestBackupWithUnreadableRecordsCounts(t *testing.T) {
	boltOnly(t)
	st := openTest(t)
	record(t, st, key(1), t0)
	dir := t.TempDir()
	unreadable := []string{"event web:1 cannot be read: unexpected end of JSON input"}
	warn := BackupOptions{Keep: 1, Verify: func(p string) error {
		if err := VerifyFile(p); err != nil {
			return err
		}
		return &UnreadableRecordsError{Path: p, Records: []Unreadable{{Kind: "event", ID: "web:1", Reason: "unexpected end of JSON input"}}}
	}}
	if _, _, err := st.BackupToDir(dir, t0, BackupOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	f, _, err := st.BackupToDir(dir, t0.Add(time.Hour), warn)
	if err != nil {
		t.Fatalf("backup with unreadable records: %v", err)
	}
	if !slices.Equal(f.Warnings, unreadable) {
		t.Errorf("warnings = %v, want %v", f.Warnings, unreadable)
	}
	list, err := Backups(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != f.Name || !slices.Equal(list[0].Warnings, unreadable) {
		t.Fatalf("backups = %+v, want the one with warnings (keep 1 counted it)", list)
	}
	// The next clean backup prunes it, warnings and all.
	if _, _, err := st.BackupToDir(dir, t0.Add(2*time.Hour), BackupOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Path + warningsSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pruned backup's warnings are still there (%v)", err)
	}
	if list, _ := Backups(dir); len(list) != 1 || len(list[0].Warnings) != 0 {
		t.Errorf("backups after a clean one: %+v", list)
	}
}

// TestBackupNamesNeverRepeat: two backups in the same second get two
// names, the second the next second's, so none replaces the other.
func TestBackupNamesNeverRepeat(t *testing.T) {
	boltOnly(t)
	st := openTest(t)
	dir := t.TempDir()
	a, _, err := st.BackupToDir(dir, t0, BackupOptions{Keep: 5})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := st.BackupToDir(dir, t0.Add(300*time.Millisecond), BackupOptions{Keep: 5})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != nameAt(t0) || b.Name != nameAt(t0.Add(time.Second)) {
		t.Errorf("names %s and %s, want %s and the next second's", a.Name, b.Name, nameAt(t0))
	}
	if got := backupNames(t, dir); len(got) != 2 {
		t.Errorf("backups = %v, want two", got)
	}
}

func TestBackupVerdict(t *testing.T) {
	for _, c := range []struct {
		err      error
		ok       bool
		warnings int
	}{
		{nil, true, 0},
		{&UnreadableRecordsError{Path: "x", Records: []Unreadable{{Kind: "event", ID: "a"}, {Kind: "job", ID: "b"}}}, true, 2},
		{fmt.Errorf("wrapped: %w", &UnreadableRecordsError{Path: "x", Records: []Unreadable{{Kind: "event", ID: "a"}}, More: 3}), true, 2},
		{&DamagedError{Path: "x", Problem: "cannot be opened: it is truncated"}, false, 0},
		{inUseError{"x"}, false, 0},
	} {
		ok, w := BackupVerdict(c.err)
		if ok != c.ok || len(w) != c.warnings {
			t.Errorf("BackupVerdict(%v) = %v, %v; want %v with %d warnings", c.err, ok, w, c.ok, c.warnings)
		}
	}
}

// TestPruneKeptKeepsTheNewest: pruneKept deletes the databases earlier
// restores kept beside the live file and nothing else: not the one just
// kept, not the live file, not a file whose name only looks alike.
func TestPruneKeptKeepsTheNewest(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	live := filepath.Join(dir, FileName)
	names := []string{
		FileName,
		FileName + ".before-restore-20260101T010203Z",
		FileName + ".before-restore-20260101T010203Z-2",
		FileName + ".before-restore-20260301T000000Z", // the one just kept
		FileName + ".before-restore-notes.txt",
		"other.db.before-restore-20260101T010203Z",
		"." + FileName + ".restore-1.tmp",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kept := live + ".before-restore-20260301T000000Z"
	pruned, err := pruneKept(kept)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{live + ".before-restore-20260101T010203Z", live + ".before-restore-20260101T010203Z-2"}
	if !slices.Equal(pruned, want) {
		t.Errorf("pruned %v, want %v", pruned, want)
	}
	for _, n := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		if gone := errors.Is(err, fs.ErrNotExist); gone != slices.Contains(want, filepath.Join(dir, n)) {
			t.Errorf("%s: gone %v (%v)", n, gone, err)
		}
	}
	if _, err := pruneKept(live); err == nil {
		t.Error("pruneKept took the live file for a kept one")
	}
}
