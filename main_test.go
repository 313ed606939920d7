package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/crypto/bcrypt"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/storetest"
)

// childArgsEnv, when set, makes the test binary run the CLI with these
// arguments (a JSON list) instead of the tests: a command that may crash
// the process is run in a child, so a crash fails one test, not all.
const childArgsEnv = "HANDOFF_TEST_CLI_ARGS"

// childVarsEnv holds the child's environment as the CLI sees it (a JSON
// object); the test process's own is not passed on.
const childVarsEnv = "HANDOFF_TEST_CLI_VARS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		var list []string
		if err := json.Unmarshal([]byte(args), &list); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var vars map[string]string
		if raw := os.Getenv(childVarsEnv); raw != "" {
			if err := json.Unmarshal([]byte(raw), &vars); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		err := run(context.Background(), list, env{getenv: func(k string) string { return vars[k] }, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
		if err != nil {
			fmt.Fprintln(os.Stderr, "handoff:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cli is one run of the command line with buffers for its streams.
type cli struct {
	stdout, stderr bytes.Buffer
	err            error
}

// runCLI runs args with stdin and the given environment (nil: empty).
func runCLI(t *testing.T, stdin string, vars map[string]string, args ...string) *cli {
	t.Helper()
	c := &cli{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.err = run(ctx, args, env{
		getenv: func(k string) string { return vars[k] },
		stdin:  strings.NewReader(stdin),
		stdout: &c.stdout,
		stderr: &c.stderr,
	})
	return c
}

func (c *cli) wantOK(t *testing.T) {
	t.Helper()
	if c.err != nil {
		t.Fatalf("got error %v; want success (stdout %q, stderr %q)", c.err, c.stdout.String(), c.stderr.String())
	}
}

func (c *cli) wantErr(t *testing.T, parts ...string) {
	t.Helper()
	if c.err == nil {
		t.Fatalf("succeeded (stdout %q); want an error mentioning %q", c.stdout.String(), parts)
	}
	for _, p := range parts {
		if !strings.Contains(c.err.Error(), p) {
			t.Errorf("error %q does not mention %q", c.err, p)
		}
	}
}

// database makes a data folder with a closed database holding n events.
func database(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Recorded from several goroutines, so group commit keeps it quick.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := fmt.Sprintf("demo:m-%d", i)
				_, err := leads.RecordEvent(context.Background(), st, store.Event{
					ID: ulid.Make().String(), Key: k, Channel: "demo", MessageID: k, CorrelationID: ulid.Make().String(),
					ConversationID: fmt.Sprintf("c-%d", i), Text: strings.Repeat("lorem ipsum ", 10), ReceivedAt: time.Now().UTC(),
				}, store.NewJob{ID: ulid.Make().String(), Kind: "draft", Key: k, MaxAttempts: 3})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func dbFile(dir string) string { return filepath.Join(dir, store.FileName) }

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// damagedCopy copies a database and deletes one entry of an index behind
// the store's back: a valid bbolt file whose index no longer agrees.
func damagedCopy(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("idx_events_by_key")).Delete([]byte("demo:m-1"))
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

func randomFile(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32<<10)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "random.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVersionCommand is in version_test.go.

func TestUnknownCommand(t *testing.T) {
	c := runCLI(t, "", nil, "frobnicate", "--now")
	c.wantErr(t, `unknown command "frobnicate"`, "usage:", "handoff backup", "handoff verify")
	if c.stdout.Len() != 0 {
		t.Errorf("an unknown command printed %q to stdout", c.stdout.String())
	}
}

// TestHelp: a help flag first asks for the command list; it must not reach
// serve, whose flag set would print only its own flags.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "-help", "--help"} {
		t.Run(arg, func(t *testing.T) {
			c := runCLI(t, "", nil, arg)
			c.wantOK(t)
			for _, want := range []string{"usage:", "handoff [serve]", "handoff backup", "handoff user add", "[--owner NAME]", "handoff health"} {
				if !strings.Contains(c.stdout.String(), want) {
					t.Errorf("%s printed %q; want it to mention %q", arg, c.stdout.String(), want)
				}
			}
			if c.stderr.Len() != 0 {
				t.Errorf("%s wrote %q to stderr; want only the command list on stdout", arg, c.stderr.String())
			}
		})
	}
}

func TestVerify(t *testing.T) {
	good := dbFile(database(t, 3))
	c := runCLI(t, "", nil, "verify", good)
	c.wantOK(t)
	if want := fmt.Sprintf("%s: ok (schema %d)\n", good, store.SchemaVersion); c.stdout.String() != want {
		t.Errorf("verify printed %q, want %q", c.stdout.String(), want)
	}
	// An older file names its own schema, not the binary's.
	old := filepath.Join(t.TempDir(), "schema8.db")
	gz, err := os.Open(filepath.Join("store", "testdata", "schema8-1591ed6.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	gz.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c = runCLI(t, "", nil, "verify", old)
	c.wantOK(t)
	if want := fmt.Sprintf("%s: ok (schema 8; this binary writes schema %d and migrates it when serve opens it)\n", old, store.SchemaVersion); c.stdout.String() != want {
		t.Errorf("verify of a schema 8 file printed %q, want %q", c.stdout.String(), want)
	}
	before := sha256File(t, good)

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"random bytes", []string{randomFile(t)}, []string{"random.db"}},
		{"damaged index", []string{damagedCopy(t, good)}, []string{"damaged.db failed verification", "idx_events_by_key"}},
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.db")}, []string{"nope.db"}},
		{"no file", nil, []string{"verify needs exactly one FILE"}},
		{"two files", []string{good, good}, []string{"verify needs exactly one FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runCLI(t, "", nil, append([]string{"verify"}, tc.args...)...).wantErr(t, tc.want...)
		})
	}
	if sha256File(t, good) != before {
		t.Errorf("verify modified the file it checked")
	}
}

// TestVerifyTruncatedFile runs verify on a backup cut in half (a broken
// download) in a child process: it must fail with a clear error, not crash.
func TestVerifyTruncatedFile(t *testing.T) {
	// A backup file ends at the database's last page (a live file may
	// have room to spare), so half of it surely loses pages.
	st, err := store.Open(database(t, 2000), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var full bytes.Buffer
	_, err = st.Backup(&full)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	b := full.Bytes()
	half := filepath.Join(t.TempDir(), "half.db")
	if err := os.WriteFile(half, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", half}, {"restore", "--data", t.TempDir(), half}} {
		t.Run(args[0], func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			list, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(os.Environ(), childArgsEnv+"="+string(list))
			out, err := cmd.CombinedOutput()
			code := cmd.ProcessState.ExitCode()
			if code != 1 || bytes.Contains(out, []byte("fatal error")) || bytes.Contains(out, []byte("SIGBUS")) {
				t.Fatalf("handoff %s on a truncated file: exit %d (%v); want exit 1 with an error, got:\n%.600s", args[0], code, err, out)
			}
			if !bytes.Contains(out, []byte("half.db")) {
				t.Errorf("the error does not name the file:\n%s", out)
			}
		})
	}
}

// userOf reads a user back from a closed data folder.
func userOf(t *testing.T, dir, name string) (store.User, error) {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return st.User(name)
}

func TestUserAdd(t *testing.T) {
	dir := t.TempDir()

	// A password from stdin.
	c := runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "dana", "--role", "approver")
	c.wantOK(t)
	if c.stdout.String() != "created approver dana\n" {
		t.Errorf("stdout %q", c.stdout.String())
	}
	u, err := userOf(t, dir, "dana")
	if err != nil {
		t.Fatalf("dana: %v", err)
	}
	if u.Role != store.RoleApprover || bcrypt.CompareHashAndPassword(u.PasswordHash, []byte("correct horse battery")) != nil {
		t.Errorf("dana: role %s, and the stdin password does not match her hash", u.Role)
	}

	// A generated password, printed once; HANDOFF_DATA overrides --data.
	c = runCLI(t, "", map[string]string{"HANDOFF_DATA": dir}, "user", "add", "--data", t.TempDir(), "--role", "admin", "root")
	c.wantOK(t)
	m := regexp.MustCompile(`^created admin root with password: (\S+)\n\(shown once; it is stored hashed\)\n$`).FindStringSubmatch(c.stdout.String())
	if m == nil {
		t.Fatalf("stdout %q; want the generated password shown once", c.stdout.String())
	}
	pw := m[1]
	if len(pw) < password.MinLen || strings.Count(c.stdout.String()+c.stderr.String(), pw) != 1 {
		t.Errorf("generated password %q: too short, or printed more than once", pw)
	}
	u, err = userOf(t, dir, "root")
	if err != nil {
		t.Fatalf("root (in HANDOFF_DATA): %v", err)
	}
	if u.Role != store.RoleAdmin || bcrypt.CompareHashAndPassword(u.PasswordHash, []byte(pw)) != nil {
		t.Errorf("root: role %s, and the printed password does not match the hash", u.Role)
	}

	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        []string
	}{
		{"bad role", "correct horse battery\n", []string{"--role", "boss", "erin"}, []string{`--role "boss"`, "admin or approver"}},
		{"bad name", "correct horse battery\n", []string{"Erin Smith", "--role", "admin"}, []string{`user name "Erin Smith"`}},
		{"name with a slash", "correct horse battery\n", []string{"../erin"}, []string{`user name "../erin"`}},
		{"no name", "correct horse battery\n", []string{"--role", "admin"}, []string{"exactly one NAME"}},
		{"two names", "correct horse battery\n", []string{"erin", "--role", "admin", "fay"}, []string{"exactly one NAME"}},
		{"duplicate", "another password 1\n", []string{"dana"}, []string{`a user named "dana" already exists`}},
		{"short password", "short\n", []string{"erin"}, []string{"at least 12 characters"}},
		{"common password", "password1234\n", []string{"erin"}, []string{"a common one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"user", "add", "--data", dir}, tc.args...)
			runCLI(t, tc.stdin, nil, args...).wantErr(t, tc.want...)
		})
	}
	runCLI(t, "", nil, "user", "rename", "dana").wantErr(t, "usage: handoff user add|passwd")

	// Nothing was created by the refusals, and dana is unchanged.
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	users, err := st.Users()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Name)
	}
	if strings.Join(names, ",") != "dana,root" {
		t.Errorf("users %v, want dana and root only", names)
	}
	if u, _ := st.User("dana"); bcrypt.CompareHashAndPassword(u.PasswordHash, []byte("correct horse battery")) != nil {
		t.Errorf("the duplicate add changed dana's password")
	}

	// With the database held (a server running), it refuses.
	runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "erin").wantErr(t, "in use")
	st.Close()
}

// liveServer runs the whole process (apptest, wired by app as serve wires
// it) in a fresh data folder, with API token token, records n events and
// returns the server's URL.
func liveServer(t *testing.T, token string, n int) string {
	t.Helper()
	url := apptest.URL(apptest.Start(t, nil, app.Deps{APIToken: token}))
	for i := range n {
		resp, err := http.Post(url+"/hooks/demo", "application/json", strings.NewReader(fmt.Sprintf(`{"id":"b-%d","from":"x%d@example.com"}`, i, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("hook %d: %d", i, resp.StatusCode)
		}
	}
	return url
}

func TestBackupCommand(t *testing.T) {
	const token = "T-backup-token-123"
	url := liveServer(t, token, 20)
	out := filepath.Join(t.TempDir(), "snap.db")

	c := runCLI(t, "", map[string]string{"HANDOFF_API_TOKEN": token}, "backup", "--url", url, "-o", out)
	c.wantOK(t)
	if c.stderr.Len() != 0 {
		t.Errorf("backup from the real server warned: %q", c.stderr.String())
	}
	// The token as a flag works too, with a warning that ps shows it.
	flagged := runCLI(t, "", nil, "backup", "--url", url, "--token", token, "-o", out+".2")
	flagged.wantOK(t)
	if !strings.Contains(flagged.stderr.String(), "prefer HANDOFF_API_TOKEN") {
		t.Errorf("a token on the command line gave no warning: %q", flagged.stderr.String())
	}
	sum := sha256File(t, out)
	if want := regexp.MustCompile(`^` + regexp.QuoteMeta(out) + `: \d+ bytes, verified \(sha256 ` + sum + `\)\n$`); !want.MatchString(c.stdout.String()) {
		t.Errorf("stdout %q; want the file, its size and its sha256 %s", c.stdout.String(), sum)
	}
	runCLI(t, "", nil, "verify", out).wantOK(t)
	ro, err := store.OpenFile(out, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.EventByKey("demo:b-19"); err != nil {
		t.Errorf("the backup lacks an event: %v", err)
	}
	ro.Close()

	// The token may come from the environment, and the URL may end in a slash.
	out2 := filepath.Join(t.TempDir(), "snap2.db")
	runCLI(t, "", map[string]string{"HANDOFF_API_TOKEN": token}, "backup", "--url", url+"/", "-o", out2).wantOK(t)
	runCLI(t, "", nil, "verify", out2).wantOK(t)

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"wrong token", []string{"--url", url, "--token", "nope", "-o", "X"}, []string{"401"}},
		{"no token", []string{"--url", url, "-o", "X"}, []string{"--token"}},
		{"no output", []string{"--url", url, "--token", token}, []string{"-o FILE"}},
		{"no server", []string{"--url", "http://127.0.0.1:1", "--token", token, "-o", "X"}, []string{"download the backup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"backup"}, tc.args...)
			for i, a := range args {
				if a == "X" {
					args[i] = filepath.Join(dir, "x.db")
				}
			}
			runCLI(t, "", nil, args...).wantErr(t, tc.want...)
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a failed backup left %d files behind", len(entries))
			}
		})
	}
}

// TestBackupCommandRefusesAnUnconfirmedDownload: a stream that ends early
// or carries another SHA-256 than the bytes is not written; one without the
// trailer (proxies drop trailers) is verified, written and warned about.
func TestBackupCommandRefusesAnUnconfirmedDownload(t *testing.T) {
	good, err := os.ReadFile(dbFile(database(t, 5)))
	if err != nil {
		t.Fatal(err)
	}
	goodSum := sha256.Sum256(good)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"no trailer (a proxy dropped it): written, with a warning", func(w http.ResponseWriter, r *http.Request) {
			w.Write(good)
		}, ""},
		{"another sum", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Backup-SHA256")
			w.Write(good)
			w.Header().Set("X-Backup-SHA256", strings.Repeat("0", 64))
		}, "damaged in transit"},
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Backup-SHA256")
			w.Write(good[:len(good)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, "write the backup"},
		{"a good download", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Backup-SHA256")
			w.Write(good)
			w.Header().Set("X-Backup-SHA256", hex.EncodeToString(goodSum[:]))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := httptest.NewServer(tc.handler)
			defer hs.Close()
			dir := t.TempDir()
			out := filepath.Join(dir, "snap.db")
			c := runCLI(t, "", nil, "backup", "--url", hs.URL, "--token", "t", "-o", out)
			if tc.want == "" {
				c.wantOK(t)
				if got := sha256File(t, out); got != hex.EncodeToString(goodSum[:]) {
					t.Errorf("the file written is not the download")
				}
				if warned := strings.Contains(c.stderr.String(), "no X-Backup-SHA256 trailer"); warned != strings.Contains(tc.name, "warning") {
					t.Errorf("warning on stderr: %v (%q)", warned, c.stderr.String())
				}
				return
			}
			c.wantErr(t, tc.want)
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused download left %d files behind", len(entries))
			}
		})
	}
}

func TestRestoreCommand(t *testing.T) {
	backup := dbFile(database(t, 4))
	backupSum := sha256File(t, backup)

	// Into an empty folder.
	fresh := filepath.Join(t.TempDir(), "data")
	c := runCLI(t, "", nil, "restore", "--data", fresh, backup)
	c.wantOK(t)
	if c.stdout.String() != fmt.Sprintf("restored %s into %s\n", backup, fresh) {
		t.Errorf("stdout %q", c.stdout.String())
	}
	if sha256File(t, dbFile(fresh)) != backupSum {
		t.Errorf("the restored database is not the backup")
	}
	runCLI(t, "", nil, "verify", dbFile(fresh)).wantOK(t)

	// Over an existing database, FILE before the flags: the old one is kept.
	existing := database(t, 1)
	oldSum := sha256File(t, dbFile(existing))
	c = runCLI(t, "", nil, "restore", backup, "--data", existing)
	c.wantOK(t)
	m := regexp.MustCompile(`the previous database is kept as (\S+)\n$`).FindStringSubmatch(c.stdout.String())
	if m == nil {
		t.Fatalf("stdout %q; want where the previous database is kept", c.stdout.String())
	}
	if sha256File(t, m[1]) != oldSum || sha256File(t, dbFile(existing)) != backupSum {
		t.Errorf("after restore: kept copy or live file is not what it should be")
	}
	// Again: only the newest kept database stays, and the deleted one is named.
	c = runCLI(t, "", nil, "restore", backup, "--data", existing)
	c.wantOK(t)
	m2 := regexp.MustCompile(`^deleted (\S+), the database an earlier restore kept\n.*the previous database is kept as (\S+)\n$`).FindStringSubmatch(c.stdout.String())
	if m2 == nil || m2[1] != m[1] || m2[2] == m[1] {
		t.Fatalf("second restore's stdout %q; want the first kept copy %s deleted and a new one named", c.stdout.String(), m[1])
	}
	if left, _ := filepath.Glob(dbFile(existing) + ".before-restore-*"); !slices.Equal(left, []string{m2[2]}) {
		t.Errorf("kept databases after two restores: %v, want only %s", left, m2[2])
	}

	// HANDOFF_DATA overrides --data.
	viaEnv := filepath.Join(t.TempDir(), "env-data")
	runCLI(t, "", map[string]string{"HANDOFF_DATA": viaEnv}, "restore", "--data", fresh, backup).wantOK(t)
	if _, err := os.Stat(dbFile(viaEnv)); err != nil {
		t.Errorf("HANDOFF_DATA was not used: %v", err)
	}

	runCLI(t, "", nil, "restore", "--data", fresh).wantErr(t, "restore needs the backup FILE")
	before := sha256File(t, dbFile(fresh))
	runCLI(t, "", nil, "restore", "--data", fresh, randomFile(t)).wantErr(t, "random.db")
	damaged := damagedCopy(t, backup)
	runCLI(t, "", nil, "restore", "--data", fresh, damaged).wantErr(t, "failed verification", "nothing was changed", "idx_events_by_key")
	if sha256File(t, dbFile(fresh)) != before {
		t.Errorf("a refused restore changed the database")
	}

	// A server holds the database: refused, with what to do.
	st, err := store.Open(fresh, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runCLI(t, "", nil, "restore", "--data", fresh, backup).wantErr(t, "stop the server")
}

// childRun is one run of the CLI in a child process.
type childRun struct {
	code           int
	stdout, stderr string
	started        bool // a server came up and was stopped
}

// runChild runs args in a child process (see childArgsEnv) with the
// environment vars, so that a crash fails one test and its output can be
// read. A server that starts listening is killed at once and reported as
// started: nothing waits.
func runChild(t *testing.T, vars map[string]string, args ...string) childRun {
	t.Helper()
	list, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	varList, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(list), childVarsEnv+"="+string(varList))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var r childRun
	var stderr strings.Builder
	sc := bufio.NewScanner(pipe)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		if !r.started && strings.Contains(line, `"msg":"listening"`) {
			r.started = true
			cmd.Process.Kill()
		}
	}
	cmd.Wait()
	r.code, r.stdout, r.stderr = cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	return r
}

// wantRefused fails unless the run exited 1 with exactly one line that is
// not a JSON log line: "handoff: …" naming path. A panic, a goroutine dump
// or a signal would be another exit status or more lines.
func (r childRun) wantRefused(t *testing.T, path string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(r.stdout+r.stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	switch {
	case r.started:
		t.Fatalf("the server started; want it to refuse the file. Output:\n%.2000s", r.stdout+r.stderr)
	case r.code != 1 || len(lines) != 1:
		t.Fatalf("exit %d with %d lines; want exit 1 and one line. Output:\n%.2000s", r.code, len(lines), r.stdout+r.stderr)
	case !strings.HasPrefix(lines[0], "handoff: ") || !strings.Contains(lines[0], path):
		t.Errorf("the message %q does not name %s", lines[0], path)
	}
	t.Log(lines[0])
}

// foreignBolt is a bbolt file of another program: buckets, no handoff meta.
func foreignBolt(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("w-1"), []byte("blue"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamagedFilesEveryCommand gives every damaged file to serve, verify,
// restore and backup's verification, each in a child process: each must
// exit 1 with one sentence naming the file, never crash; restore keeps the
// database it would have replaced and backup writes nothing. serve checks
// a file this small in full, so it refuses damage inside a record's bytes
// too (a large file gets the page walk only: store's
// TestOpenLargeFileWalksPagesOnly).
func TestDamagedFilesEveryCommand(t *testing.T) {
	st, err := store.Open(database(t, 400), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var full bytes.Buffer
	_, err = st.Backup(&full)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	good := full.Bytes()
	cases, err := storetest.Cases(good, "events")
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		storetest.Case{Name: "another program's bbolt file", Data: foreignBolt(t)},
		storetest.Case{Name: "backup cut short", Data: good[:len(good)*2/3]},
	)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Run("verify", func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "suspect.db")
				if err := os.WriteFile(path, tc.Data, 0o600); err != nil {
					t.Fatal(err)
				}
				r := runChild(t, nil, "verify", path)
				if tc.RecordsOnly {
					// Each unreadable record on its own line, then the sentence.
					if out := r.stdout + r.stderr; r.code != 1 || !strings.Contains(out, path+": event ") || !strings.Contains(out, " cannot be read: ") || !strings.Contains(out, "handoff: store: "+path) {
						t.Errorf("verify: exit %d; want 1, naming the record and the file. Output:\n%s", r.code, out)
					}
					return
				}
				r.wantRefused(t, path)
			})
			t.Run("restore", func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "suspect.db")
				if err := os.WriteFile(path, tc.Data, 0o600); err != nil {
					t.Fatal(err)
				}
				live := t.TempDir()
				if err := os.WriteFile(dbFile(live), good, 0o600); err != nil {
					t.Fatal(err)
				}
				r := runChild(t, nil, "restore", "--data", live, path)
				if tc.RecordsOnly {
					// As good as the live file it was copied from: restored.
					if r.code != 0 || !strings.Contains(r.stdout, "restored ") {
						t.Errorf("restore of a file whose only damage is one record: exit %d; want it restored. Output:\n%s", r.code, r.stdout+r.stderr)
					}
					return
				}
				r.wantRefused(t, path)
				if b, err := os.ReadFile(dbFile(live)); err != nil || !bytes.Equal(b, good) {
					t.Errorf("a refused restore changed the live database (%v)", err)
				}
				if entries, _ := os.ReadDir(live); len(entries) != 1 {
					t.Errorf("a refused restore left %d files in the data folder; want only %s", len(entries), store.FileName)
				}
			})
			t.Run("serve", func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				if err := os.WriteFile(dbFile(dir), tc.Data, 0o600); err != nil {
					t.Fatal(err)
				}
				// A file this small is checked in full at start-up
				// (store.fullCheckLimit): a damaged record is found, and
				// served as unreadable; damage to the pages is refused.
				r := runChild(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0")
				if tc.RecordsOnly {
					if !r.started {
						t.Errorf("serve refused a file whose only damage is one record. Output:\n%.2000s", r.stdout+r.stderr)
					}
					return
				}
				r.wantRefused(t, dbFile(dir))
			})
			t.Run("backup", func(t *testing.T) {
				t.Parallel()
				sum := sha256.Sum256(tc.Data)
				hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					// The server vouches for these bytes: only the verification can refuse them.
					w.Header().Set("Trailer", "X-Backup-SHA256")
					w.Write(tc.Data)
					w.Header().Set("X-Backup-SHA256", hex.EncodeToString(sum[:]))
				}))
				defer hs.Close()
				dir := t.TempDir()
				out := filepath.Join(dir, "snap.db")
				r := runChild(t, map[string]string{"HANDOFF_API_TOKEN": "t"}, "backup", "--url", hs.URL, "-o", out)
				if tc.RecordsOnly {
					// Written, and saying which records it carries unreadable.
					if out := r.stdout + r.stderr; r.code != 0 || !strings.Contains(out, "verified with warnings") || !strings.Contains(out, " cannot be read: ") {
						t.Errorf("backup of a file whose only damage is one record: exit %d; want it written with its warnings. Output:\n%s", r.code, out)
					}
					return
				}
				r.wantRefused(t, out)
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("a refused backup left %d files behind", len(entries))
				}
			})
		})
	}
}

// TestServeRefusesAnEmptyDatabase: a zero-length handoff.db is refused,
// not silently made into an empty database; the same folder without the
// file starts with a new one.
func TestServeRefusesAnEmptyDatabase(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dbFile(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runChild(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0")
	r.wantRefused(t, dbFile(dir))
	if !strings.Contains(r.stderr, "is empty (0 bytes)") {
		t.Errorf("the refusal does not say the file is empty:\n%s", r.stderr)
	}
	if fi, err := os.Stat(dbFile(dir)); err != nil || fi.Size() != 0 {
		t.Fatalf("the refused file was changed: %v", err)
	}
	if err := os.Remove(dbFile(dir)); err != nil {
		t.Fatal(err)
	}
	if r := runChild(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0"); !r.started {
		t.Fatalf("serve with no database file: exit %d; want a new database. Output:\n%.2000s", r.code, r.stdout+r.stderr)
	}
}
