package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

func TestVersionCommand(t *testing.T) {
	c := runCLI(t, "", nil, "version")
	c.wantOK(t)
	lines := strings.Split(strings.TrimSuffix(c.stdout.String(), "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^handoff \S+$`),
		regexp.MustCompile(fmt.Sprintf(`^schema %d: opens databases of schema 1 to %d .*refuses newer ones$`, store.SchemaVersion, store.SchemaVersion)),
		regexp.MustCompile(`^built with go1\.\d+\S* for \w+/\w+`),
	}
	if len(lines) != len(want) {
		t.Fatalf("version printed %d lines, want %d:\n%s", len(lines), len(want), c.stdout.String())
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d is %q; want it to match %s", i+1, lines[i], re)
		}
	}
}

// newerSchema makes a data folder whose database says it was written by
// the next schema: what a rollback to this binary after an upgrade meets.
func newerSchema(t *testing.T) string {
	t.Helper()
	dir := database(t, 3)
	db, err := bolt.Open(dbFile(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte(strconv.Itoa(store.SchemaVersion+1)))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNewerSchemaIsRefused: every command that opens a database refuses one
// from a newer schema with one sentence naming the file and both versions,
// and changes nothing (restore keeps the database it would have replaced).
func TestNewerSchemaIsRefused(t *testing.T) {
	newer := newerSchema(t)
	file := dbFile(newer)
	before := sha256File(t, file)
	current := database(t, 2)
	currentSum := sha256File(t, dbFile(current))
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "--data", newer, "--addr", "127.0.0.1:0"}},
		{"user add", []string{"user", "add", "--data", newer, "--role", "approver", "ada"}},
		{"verify", []string{"verify", file}},
		{"restore", []string{"restore", "--data", current, file}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runChild(t, map[string]string{"HANDOFF_ADMIN_PASSWORD": "a-password-long-enough"}, tt.args...)
			r.wantRefused(t, file)
			msg := r.stdout + r.stderr
			for _, want := range []string{"newer", fmt.Sprintf("schema %d", store.SchemaVersion+1), strconv.Itoa(store.SchemaVersion)} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not mention %q:\n%s", want, msg)
				}
			}
		})
	}
	if sha256File(t, file) != before {
		t.Error("a refused command changed the newer database")
	}
	if sha256File(t, dbFile(current)) != currentSum {
		t.Error("restore replaced the current database with one it cannot read")
	}
	if _, err := os.Stat(filepath.Join(newer, "backups")); err == nil {
		t.Error("a refused serve wrote backups")
	}
}

// TestServeLogsWhereAddrAndDataCameFrom: the first log line names the
// source of addr and data_dir, so an environment variable that wins over
// the file is never silent.
func TestServeLogsWhereAddrAndDataCameFrom(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "handoff.yaml")
	fileData := filepath.Join(dir, "from-file")
	envData := filepath.Join(dir, "from-env")
	if err := os.WriteFile(cfg, []byte("addr: 127.0.0.1:0\ndata_dir: "+fileData+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name               string
		vars               map[string]string
		args               []string
		addrFrom, dataFrom string
		data               string
	}{
		{"file", nil, []string{"serve", "--config", cfg}, "file", "file", fileData},
		{"env over file", map[string]string{"HANDOFF_DATA": envData}, []string{"serve", "--config", cfg}, "file", "env", envData},
		{"env over flag", map[string]string{"HANDOFF_DATA": envData}, []string{"serve", "--config", cfg, "--data", fileData + "-flag"}, "file", "env", envData},
		{"flag over file", nil, []string{"serve", "--config", cfg, "--data", fileData + "-flag", "--addr", "127.0.0.1:0"}, "flag", "flag", fileData + "-flag"},
		{"defaults but the flag", nil, []string{"serve", "--data", filepath.Join(dir, "demo")}, "default", "flag", filepath.Join(dir, "demo")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{"HANDOFF_ADMIN_PASSWORD": "a-password-long-enough"}
			for k, v := range tt.vars {
				vars[k] = v
			}
			atDefault := tt.addrFrom == "default"
			if atDefault {
				// The default address is fixed, and may not be free to
				// serve on: hold it (or find it held), so the server logs
				// its configuration, then cannot listen there and stops.
				if ln, err := net.Listen("tcp", config.DefaultAddr); err == nil {
					t.Cleanup(func() { ln.Close() })
				} else if !errors.Is(err, syscall.EADDRINUSE) {
					t.Fatalf("hold %s: %v", config.DefaultAddr, err)
				}
			}
			r := runChild(t, vars, tt.args...)
			switch {
			case atDefault && r.started:
				t.Fatalf("the server started on %s, which is held:\n%s", config.DefaultAddr, r.stderr)
			case atDefault && (r.code != 1 || !strings.Contains(r.stdout+r.stderr, "listen on "+config.DefaultAddr)):
				t.Fatalf("exit %d; want 1 with the default address in use:\n%s", r.code, r.stdout+r.stderr)
			case !atDefault && !r.started:
				t.Fatalf("the server did not start:\n%s", r.stderr)
			}
			first, _, _ := strings.Cut(r.stderr, "\n")
			var rec struct{ Msg, Addr, Data, AddrSource, DataSource string }
			var raw map[string]any
			if err := json.Unmarshal([]byte(first), &raw); err != nil {
				t.Fatalf("the first log line is not JSON: %q", first)
			}
			rec.Msg, _ = raw["msg"].(string)
			rec.Addr, _ = raw["addr"].(string)
			rec.AddrSource, _ = raw["addr_source"].(string)
			rec.DataSource, _ = raw["data_dir_source"].(string)
			rec.Data, _ = raw["data_dir"].(string)
			if rec.Msg != "configuration" || rec.AddrSource != tt.addrFrom || rec.DataSource != tt.dataFrom || rec.Data != tt.data {
				t.Errorf("first log line %s; want msg configuration, addr from %s, data_dir %s from %s", first, tt.addrFrom, tt.data, tt.dataFrom)
			}
			if atDefault && rec.Addr != config.DefaultAddr {
				t.Errorf("first log line %s; want addr %s", first, config.DefaultAddr)
			}
			if _, err := os.Stat(filepath.Join(tt.data, store.FileName)); err != nil {
				t.Errorf("the database is not where the log says: %v", err)
			}
		})
	}
}
