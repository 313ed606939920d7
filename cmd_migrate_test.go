package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/eval/evaltest"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit/corpus"
)

// migrateURL is a postgres:// URL of a new, empty schema of the test
// server (pgtest's private cluster speaks key=value over a unix socket).
func migrateURL(t *testing.T) string {
	t.Helper()
	base, schema := pgtest.URL(t), pgtest.Schema(t)
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(base) {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	u := &url.URL{Scheme: "postgres", User: url.User(kv["user"]), Host: "", Path: "/" + kv["dbname"]}
	if kv["password"] != "" {
		u.User = url.UserPassword(kv["user"], kv["password"])
	}
	q := url.Values{"search_path": {schema}}
	for _, k := range []string{"host", "port", "sslmode"} {
		if kv[k] != "" {
			q.Set(k, kv[k])
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// dump is every bucket's keys and values of an engine's read snapshot.
func dump(t *testing.T, eng engine.Engine) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	if err := eng.View(func(tx engine.Tx) error {
		return tx.ForEachBucket(func(name []byte) error {
			m := map[string]string{}
			out[string(name)] = m
			return tx.Bucket(name).ForEach(func(k, v []byte) error { m[string(k)] = string(v); return nil })
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpFile is dump of a closed bbolt file.
func dumpFile(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]string{}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			m := map[string]string{}
			out[string(name)] = m
			return b.ForEach(func(k, v []byte) error { m[string(k)] = string(v); return nil })
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpPostgres is dump of the schema url names.
func dumpPostgres(t *testing.T, u string) map[string]map[string]string {
	t.Helper()
	db, err := pgengine.Open(context.Background(), u, pgengine.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return dump(t, db)
}

// sameDump fails t where got and want differ: a bucket, a key or a value.
func sameDump(t *testing.T, what string, got, want map[string]map[string]string) {
	t.Helper()
	if !maps.Equal(keysOf(got), keysOf(want)) {
		t.Fatalf("%s: buckets %v, want %v", what, keysOf(got), keysOf(want))
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Errorf("%s: bucket %s has %d keys, want %d", what, name, len(g), len(w))
			continue
		}
		for k, v := range w {
			if gv, ok := g[k]; !ok || gv != v {
				t.Errorf("%s: bucket %s key %q: got %q (present %v), want %q", what, name, k, gv, ok, v)
				break
			}
		}
	}
}

func keysOf(m map[string]map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// movable is a stopped server's data folder: 150 approved turns (events,
// drafts, outbox rows, jobs, leads; the corpus's texts) and 72 events
// whose bodies are the corpus's demo bodies, every text and layout.
func movable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evaltest.Build(t, st, evaltest.Config("http://127.0.0.1:1"), 150)
	for n := range 72 {
		id := fmt.Sprintf("body-%d", n)
		b := corpus.Message(n, id, "conv-"+id, "")
		key := "demo:" + id
		ev := store.Event{
			ID: ulid.Make().String(), Key: key, Channel: "demo", MessageID: id, CorrelationID: ulid.Make().String(),
			ConversationID: "conv-" + id, Text: b.Want.Text, Name: b.Want.Name, ContentType: b.ContentType,
			Body: json.RawMessage(b.Raw), ReceivedAt: evaltest.Epoch.Add(time.Duration(n) * time.Second),
		}
		if _, err := leads.RecordEvent(context.Background(), st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMigrateOverAndBack(t *testing.T) {
	dir := movable(t)
	src := filepath.Join(dir, store.FileName)
	want := dumpFile(t, src)
	if len(want["events"]) < 222 || len(want["drafts"]) < 150 || len(want["outbox"]) < 150 {
		t.Fatalf("the fixture holds %d events, %d drafts, %d outbox rows", len(want["events"]), len(want["drafts"]), len(want["outbox"]))
	}
	u := migrateURL(t)

	c := runCLI(t, "", nil, "migrate", "--data", dir, "--to", u, "--batch", "97")
	c.wantOK(t)
	out := c.stdout.String()
	var keys int
	for _, b := range want {
		keys += len(b)
	}
	if !strings.Contains(out, fmt.Sprintf("copied %d buckets, %d keys", len(want), keys)) || !strings.Contains(out, "every bucket's key count and SHA-256") {
		t.Fatalf("migrate's report does not say what it copied and verified:\n%s", out)
	}
	sameDump(t, "PostgreSQL after the move", dumpPostgres(t, u), want)

	// The store opens on it, as serve does, and its check is clean.
	st, err := store.OpenURL(context.Background(), u, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("the store's check of the moved database: %v", err)
	}
	if ev, err := st.EventByKey("demo:body-5"); err != nil || !bytes.Equal(ev.Body, corpus.Message(5, "body-5", "conv-body-5", "").Raw) {
		t.Errorf("event demo:body-5 on PostgreSQL: %v, body %q", err, ev.Body)
	}
	st.Close()

	// A second move into it is refused, and changes nothing.
	again := runCLI(t, "", nil, "migrate", "--db", src, "--to", u)
	again.wantErr(t, "already holds handoff data", "migrate moves into an empty database only")
	sameDump(t, "PostgreSQL after a refused move", dumpPostgres(t, u), want)

	// And back, for a full exit.
	back := filepath.Join(t.TempDir(), "back.db")
	c = runCLI(t, "", nil, "migrate", "--from", u, "--to", back, "--batch", "101")
	c.wantOK(t)
	if !strings.Contains(c.stdout.String(), "the file's check (handoff verify) is clean") {
		t.Errorf("migrate back does not report its verification:\n%s", c.stdout.String())
	}
	sameDump(t, "the file moved back", dumpFile(t, back), want)
	runCLI(t, "", nil, "verify", back).wantOK(t)
	entries, _ := os.ReadDir(filepath.Dir(back))
	if len(entries) != 1 {
		t.Errorf("the folder of the new file holds %d entries, want the file alone: %v", len(entries), entries)
	}
	// Never over an existing file, even one from the same move.
	runCLI(t, "", nil, "migrate", "--from", u, "--to", back).wantErr(t, back, "already exists")
	// Nor from a file a server holds.
	held, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCLI(t, "", nil, "migrate", "--data", dir, "--to", migrateURL(t)).wantErr(t, "in use by a running server")
	held.Close()
	// With serve's config the source is its database: data_dir into
	// PostgreSQL, database_url into a file.
	cfgFile := filepath.Join(t.TempDir(), "handoff.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("data_dir: %q\ndatabase_url: %q\n", dir, u)), 0o600); err != nil {
		t.Fatal(err)
	}
	fromCfg := filepath.Join(t.TempDir(), "from-config.db")
	runCLI(t, "", nil, "migrate", "--config", cfgFile, "--to", fromCfg).wantOK(t)
	sameDump(t, "the file moved back by the config's database_url", dumpFile(t, fromCfg), want)
	u2 := migrateURL(t)
	runCLI(t, "", nil, "migrate", "--config", cfgFile, "--to", u2).wantOK(t)
	sameDump(t, "PostgreSQL filled from the config's data_dir", dumpPostgres(t, u2), want)
	// Nor from a database a server holds (serve's exclusive lock).
	served, err := store.OpenURL(context.Background(), u, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCLI(t, "", nil, "migrate", "--from", u, "--to", filepath.Join(t.TempDir(), "x.db")).wantErr(t, "in use")
	runCLI(t, "", nil, "migrate", "--data", dir, "--to", u).wantErr(t, "in use by a running server")
	served.Close()
}

func TestMigrateRefusals(t *testing.T) {
	dir := database(t, 3)
	exists := filepath.Join(t.TempDir(), "there.db")
	if err := os.WriteFile(exists, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"--data", dir}, []string{"migrate needs --to"}},
		{[]string{"--to", "postgres://u@h/db"}, []string{"migrate needs a source"}},
		{[]string{"--data", dir, "--db", "x.db", "--to", "postgres://u@h/db"}, []string{"one of --data, --db and --from"}},
		{[]string{"--data", dir, "--to", "mysql://u:s3cret-pw@h/db"}, []string{"is not a PostgreSQL URL", "[redacted]"}},
		{[]string{"--data", dir, "--to", "elsewhere.db"}, []string{"is not a postgres:// URL"}},
		{[]string{"--data", t.TempDir(), "--to", "postgres://u@h/db"}, []string{"there is no database at"}},
		{[]string{"--from", "postgres://u:s3cret-pw@h/db", "--to", exists}, []string{exists, "already exists"}},
		{[]string{"--from", "postgres://u:s3cret-pw@h/db", "--to", "postgres://u@h/db2"}, []string{"is a URL"}},
		{[]string{"--from", "postgres://u@h/db", "--to", filepath.Join(t.TempDir(), "no", "such", "x.db")}, []string{"does not exist"}},
		{[]string{"--data", dir, "--to", "postgres://u:s3cret-pw@127.0.0.1:1/db?connect_timeout=5"}, []string{"open the PostgreSQL database"}},
		{[]string{"--from", "postgres://u:s3cret-pw@127.0.0.1:1/db?connect_timeout=5", "--to", filepath.Join(t.TempDir(), "x.db")}, []string{"open the PostgreSQL database"}},
		{[]string{"--data", dir, "--to", "postgres://u@h/db", "extra"}, []string{"takes no arguments"}},
	} {
		c := runCLI(t, "", nil, append([]string{"migrate"}, tc.args...)...)
		c.wantErr(t, tc.wants...)
		if msg := c.err.Error(); strings.Contains(msg, "s3cret-pw") || strings.Contains(msg, "\n") {
			t.Errorf("migrate %q: %q shows the password or is more than one line", tc.args, msg)
		}
	}
	// A file of an older schema: serve migrates it first.
	old := filepath.Join(t.TempDir(), "old.db")
	gz, err := os.ReadFile("store/testdata/schema8-1591ed6.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	older := migrateURL(t)
	runCLI(t, "", nil, "migrate", "--db", old, "--to", older).wantErr(t, "is at schema 8", "open it once with this handoff's serve")
	if got := dumpPostgres(t, older); len(got) != 0 {
		t.Errorf("a refused move wrote %d buckets", len(got))
	}
	// An empty database is no source.
	runCLI(t, "", nil, "migrate", "--from", migrateURL(t), "--to", filepath.Join(t.TempDir(), "x.db")).wantErr(t, "holds no handoff data")
}

// TestMigrateKilledMidCopy kills the migrate process once it has sent part
// of the file (in batches of 20 keys, one transaction): the target is left
// empty, and a re-run moves it all.
func TestMigrateKilledMidCopy(t *testing.T) {
	dir := database(t, 1500)
	want := dumpFile(t, filepath.Join(dir, store.FileName))
	u := migrateURL(t)
	list, err := json.Marshal([]string{"migrate", "--data", dir, "--to", u, "--batch", "20"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(list), childVarsEnv+"={}")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	copied := 0
	for sc.Scan() {
		// Several batches on the server, the transaction still open.
		if strings.Contains(sc.Text(), "keys copied") {
			if copied++; copied == 5 {
				cmd.Process.Kill()
				break
			}
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the migrate child was not killed mid-copy (it printed %d batches): %v", copied, err)
	}
	if got := dumpPostgres(t, u); len(got) != 0 {
		t.Fatalf("after the kill the target holds %d buckets; want none (the copy is one transaction)", len(got))
	}
	// The re-run: once the server has seen the killed session go (its
	// exclusive lock goes with it), the move completes.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c := runCLI(t, "", nil, "migrate", "--data", dir, "--to", u)
		if c.err == nil {
			break
		}
		if !strings.Contains(c.err.Error(), "in use") || time.Now().After(deadline) {
			t.Fatalf("the re-run after the kill: %v", c.err)
		}
		time.Sleep(50 * time.Millisecond) // the next try of a condition with a deadline
	}
	sameDump(t, "PostgreSQL after the re-run", dumpPostgres(t, u), want)
}

// TestMigrateKeyTooLong: a key PostgreSQL's index cannot hold (bbolt takes
// up to 32 KiB) fails the move in a sentence naming its size, and the
// target stays empty.
func TestMigrateKeyTooLong(t *testing.T) {
	dir := database(t, 3)
	path := filepath.Join(dir, store.FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put(bytes.Repeat([]byte("k"), 3000), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	u := migrateURL(t)
	c := runCLI(t, "", nil, "migrate", "--data", dir, "--to", u)
	c.wantErr(t, `bucket "meta", a key of 3000 bytes`, "longer than the 2600 bytes")
	if strings.Contains(c.err.Error(), "kkkkkkkk") {
		t.Errorf("the refusal quotes the key: %v", c.err)
	}
	if got := dumpPostgres(t, u); len(got) != 0 {
		t.Errorf("a failed move left %d buckets", len(got))
	}
}
