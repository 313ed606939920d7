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
	"runtime/debug"
	"strings"
	"time"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/boltengine"
)

// bbolt cannot be asked to read a damaged file safely: its page walk at
// the open of a file without a stored freelist (rebuilt from the pages,
// see OpenFile) and tx.Check run in goroutines of their own, where an
// index out of range on a corrupt page kills the process, and it maps the
// file, so a page pointer past the end is SIGBUS. Neither can be recovered by the caller. So the walk runs
// in a child process, this same program started again with checkerEnv set:
// the child opens the file read-only, walks it and prints a verdict; a
// child that dies instead means the file is damaged, and its last words
// say how.
//
// The child is dispatched from init, not from main: every program that
// links the store (handoff itself, and each package's test binary, which
// may restore a backup) then answers as a checker without any wiring, and
// none can run its own main or tests by mistake when started as one.

// checkerEnv, when set, makes the process a checker of the file it names.
const checkerEnv = "HANDOFF_STORE_CHECKER"

func init() {
	if raw, ok := os.LookupEnv(checkerEnv); ok {
		os.Exit(runChecker(raw, os.Stdout, os.Stderr))
	}
}

// checkLevel is how much of the file the child reads.
type checkLevel string

const (
	// checkPages is what bbolt itself reads when it opens a file for
	// writing: every branch and leaf page of every bucket, their types
	// and key order. If the child survives it, so will the server's open.
	checkPages checkLevel = "pages"
	// checkFull is Check: the pages, the schema, and every record against
	// its indexes.
	checkFull checkLevel = "full"
)

// checkRequest is what the parent asks of the child.
type checkRequest struct {
	Path  string     `json:"path"`
	Level checkLevel `json:"level"`
}

// verdict is the child's answer: a problem, or that the file is locked by
// another process, or (both empty) that the file is sound.
type verdict struct {
	Problem string `json:"problem,omitempty"`
	Busy    bool   `json:"busy,omitempty"`
	// Unreadable, with no Problem, is a file whose only problems are
	// records that cannot be read (CheckReport.Unreadable).
	Unreadable     []Unreadable `json:"unreadable,omitempty"`
	MoreUnreadable int          `json:"more_unreadable,omitempty"`
}

// checkerLockTimeout is how long the child waits for another process's lock.
const checkerLockTimeout = 100 * time.Millisecond

// inUseError is the answer for a file another process holds.
type inUseError struct{ path string }

func (e inUseError) Error() string {
	return fmt.Sprintf("store: %s is in use by another process (is a server running?)", e.path)
}

// checkInChild checks the file at path at level in a child process and
// returns its verdict: nil, a *DamagedError, an *UnreadableRecordsError
// (no damage, but records that cannot be read), or errInUse.
func checkInChild(ctx context.Context, path string, level checkLevel) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("store: check %s: find this program to run the check in: %w", path, err)
	}
	req, err := json.Marshal(checkRequest{Path: path, Level: level})
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), checkerEnv+"="+string(req))
	var stdout bytes.Buffer
	stderr := &headWriter{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("store: check %s: %w", path, ctx.Err())
	}
	var v verdict
	if runErr == nil {
		if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
			return fmt.Errorf("store: check %s: the checker answered %q", path, stdout.Bytes())
		}
		switch {
		case v.Busy:
			return inUseError{path}
		case v.Problem != "":
			return &DamagedError{Path: path, Problem: v.Problem}
		case len(v.Unreadable) > 0:
			return &UnreadableRecordsError{Path: path, Records: v.Unreadable, More: v.MoreUnreadable}
		}
		return nil
	}
	return &DamagedError{Path: path, Problem: "is damaged: bbolt crashed reading its pages (" + lastWords(stderr.String(), runErr) + ")"}
}

// runChecker is the child: it checks the file named by raw and prints its
// verdict on out. It returns the process's exit status.
func runChecker(raw string, out, errOut io.Writer) int {
	var req checkRequest
	if err := json.Unmarshal([]byte(raw), &req); err != nil {
		fmt.Fprintf(errOut, "%s: %v\n", checkerEnv, err)
		return 2
	}
	v := childCheck(req)
	if err := json.NewEncoder(out).Encode(v); err != nil {
		return 2
	}
	return 0
}

// childCheck runs the check itself. A panic in this goroutine (a damaged
// record met by Check's walk, or bbolt's own "failed to get all reachable
// pages") and a fault in it (SetPanicOnFault) become the verdict; what
// happens in bbolt's goroutines ends the process, which the parent reports.
func childCheck(req checkRequest) (v verdict) {
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			v = verdict{Problem: "is damaged: reading its pages failed (" + clip(fmt.Sprint(r)) + ")"}
		}
	}()
	var err error
	switch req.Level {
	case checkPages:
		err = walkPages(req.Path)
	case checkFull:
		err = verifyHere(req.Path)
	default:
		err = fmt.Errorf("unknown check level %q", req.Level)
	}
	var de *DamagedError
	var ue *UnreadableRecordsError
	switch {
	case err == nil:
		return verdict{}
	case errors.As(err, &ue):
		return verdict{Unreadable: ue.Records, MoreUnreadable: ue.More}
	case errors.Is(err, engine.ErrLocked) || errors.As(err, new(inUseError)):
		return verdict{Busy: true}
	case errors.As(err, &de):
		return verdict{Problem: de.Problem}
	}
	return verdict{Problem: "cannot be opened: " + clip(err.Error())}
}

// walkPages reads what bbolt reads at a read-write open, read-only, and
// refuses a bbolt file of another program (buckets, but no meta bucket),
// which a read-write open would otherwise fill with handoff's buckets.
func walkPages(path string) error {
	if err := preflight(path); err != nil {
		return err
	}
	// PreLoadFreelist rebuilds the freelist from the pages of a file
	// without a stored one, as the server's open then does (the only
	// files OpenFile sends here above fullCheckLimit).
	db, err := boltengine.Open(path, boltengine.Options{ReadOnly: true, Timeout: checkerLockTimeout, PreLoadFreelist: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx engine.Tx) error {
		if tx.Bucket(bucketMeta) != nil {
			return nil
		}
		var names []string
		_ = tx.ForEachBucket(func(name []byte) error {
			names = append(names, fmt.Sprintf("%q", name))
			return nil
		})
		if len(names) == 0 {
			return nil // a new file whose first migration never committed
		}
		return &DamagedError{Path: path, Problem: "is not a handoff database: it holds the buckets " + clip(strings.Join(names, ", ")) + " but no meta bucket"}
	})
}

// verifyHere is VerifyFile's check, in this process.
func verifyHere(path string) error {
	st, err := OpenFile(path, Options{ReadOnly: true, Timeout: checkerLockTimeout})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.refuseNewerSchema(path); err != nil {
		return err
	}
	r, err := st.Inspect()
	if err != nil {
		return err
	}
	if len(r.Damaged) > 0 {
		return &DamagedError{Path: path, Problem: "failed verification: " + firstProblem(errors.Join(r.Damaged...))}
	}
	if len(r.Unreadable) > 0 {
		return &UnreadableRecordsError{Path: path, Records: r.Unreadable, More: r.MoreUnreadable}
	}
	return nil
}

// firstProblem puts Check's list of problems in one line: the first, and how many more.
func firstProblem(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	s := clip(lines[0])
	if len(lines) > 1 {
		s += fmt.Sprintf(" (and %d more problems)", len(lines)-1)
	}
	return s
}

// lastWords picks, out of a crashed Go process's stderr, the lines that
// say what happened ("panic: runtime error: index out of range …",
// "unexpected fault address …", "[signal SIGBUS: bus error …]"), before
// the goroutine dump.
func lastWords(stderr string, runErr error) string {
	var words []string
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "goroutine ") && len(words) > 0 {
			break
		}
		for _, p := range []string{"panic: ", "fatal error: ", "[signal ", "unexpected fault address", "runtime: goroutine stack exceeds"} {
			if strings.HasPrefix(line, p) {
				words = append(words, line)
				break
			}
		}
	}
	if len(words) == 0 {
		return runErr.Error()
	}
	return clip(strings.Join(words, "; "))
}

// clip shortens a message to one readable line: bbolt's messages can carry
// whole keys in hex.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

// headWriter keeps the first max bytes written to it: a crashed child's
// goroutine dump can be long, and only its start says what happened.
type headWriter struct {
	buf bytes.Buffer
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *headWriter) String() string { return w.buf.String() }
