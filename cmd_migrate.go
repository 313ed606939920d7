package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// migrateCmd moves a stopped server's database between its bbolt file and
// PostgreSQL, either way (store.MoveToPostgres, store.MoveToFile): copied
// from one read snapshot into an empty target, then verified (every
// bucket's key count and hash on both sides, and the store's check of the
// target) before it says done.
func migrateCmd(ctx context.Context, args []string, e env) error {
	fset := newFlagSet("migrate", e)
	cfgPath := fset.String("config", "", "serve's configuration file: with no source flag, the source is its data_dir (--to a URL) or its database_url (--to a FILE)")
	dataDir := fset.String("data", "", "a stopped server's data folder to move to PostgreSQL")
	dbFile := fset.String("db", "", "a database file to move to PostgreSQL")
	from := fset.String("from", "", "a PostgreSQL database URL to move to a new file (default HANDOFF_DATABASE_URL)")
	to := fset.String("to", "", "where to: a postgres:// URL (from --data or --db), or a new FILE (from --from)")
	batch := fset.Int("batch", store.DefaultMoveBatch, "keys per round trip to PostgreSQL or per bbolt transaction")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("migrate takes no arguments (got %q): give --to and one of --data, --db and --from", fset.Arg(0))
	}
	if *batch < 1 {
		return fmt.Errorf("--batch must be at least 1, not %d", *batch)
	}
	if *to == "" {
		return errors.New("migrate needs --to: a postgres:// URL to move a file into, or a new FILE to move a PostgreSQL database into")
	}
	if *from == "" && *dataDir == "" && *dbFile == "" && *cfgPath != "" {
		// The database serve would open: the environment overrides the
		// file, as for serve (HANDOFF_DATA, HANDOFF_DATABASE_URL).
		cfg, _, err := config.LoadSources(*cfgPath, e.getenv)
		if err != nil {
			return err
		}
		if v := e.getenv("HANDOFF_DATABASE_URL"); v != "" {
			cfg.DatabaseURL = v
		}
		switch {
		case looksLikeURL(*to):
			*dataDir = cfg.DataDir
			e.override(dataDir, "HANDOFF_DATA")
			if *dataDir == "" {
				*dataDir = "./data"
			}
		case cfg.DatabaseURL != "":
			*from = cfg.DatabaseURL
		default:
			return fmt.Errorf("%s sets no database_url to move into %s: give --from postgres://…", *cfgPath, *to)
		}
	}
	if *from == "" && *dataDir == "" && *dbFile == "" {
		*from = e.getenv("HANDOFF_DATABASE_URL")
	}
	if n := countSet(*dataDir != "", *dbFile != "", *from != ""); n != 1 {
		if n == 0 {
			return errors.New("migrate needs a source: --data DIR or --db FILE (to PostgreSQL), or --from URL (to a file)")
		}
		return errors.New("migrate takes one of --data, --db and --from")
	}
	opts := store.MoveOptions{Batch: *batch, Progress: progress(e)}
	start := time.Now()
	if *from != "" {
		if err := checkPostgresURL("--from", *from); err != nil {
			return err
		}
		if looksLikeURL(*to) {
			return fmt.Errorf("--to %s is a URL: from PostgreSQL migrate writes a new bbolt FILE (to copy a database, use pg_dump)", redactURL(*to))
		}
		if _, err := os.Lstat(*to); err == nil {
			return fmt.Errorf("%s already exists: migrate writes a new file only", *to)
		}
		if fi, err := os.Stat(filepath.Dir(*to)); err != nil || !fi.IsDir() {
			return fmt.Errorf("the folder of %s does not exist", *to)
		}
		fmt.Fprintf(e.stdout, "moving %s into the new file %s\n", redactURL(*from), *to)
		m, err := store.MoveToFile(ctx, *from, *to, opts)
		if err != nil {
			return oneLine(redactErr(err, *from))
		}
		report(e, m, time.Since(start), "the file's check (handoff verify) is clean")
		return nil
	}
	src := *dbFile
	if *dataDir != "" {
		src = filepath.Join(*dataDir, store.FileName)
	}
	if !looksLikeURL(*to) {
		return fmt.Errorf("--to %s is not a postgres:// URL: from a file migrate moves into PostgreSQL (to copy a file, use handoff backup)", *to)
	}
	if err := checkPostgresURL("--to", *to); err != nil {
		return err
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("there is no database at %s: give --data DIR (a stopped server's data folder) or --db FILE", src)
	}
	// The file first: damaged or held by a running server, nothing is copied.
	verr := store.VerifyFile(src)
	if store.InUse(verr) {
		return fmt.Errorf("%s is in use by a running server: stop it first, then migrate", src)
	}
	if verr != nil {
		return fmt.Errorf("%s does not pass verify, so it is not moved: %w", src, verr)
	}
	fmt.Fprintf(e.stdout, "moving %s into %s\n", src, redactURL(*to))
	m, err := store.MoveToPostgres(ctx, src, *to, opts)
	if store.InUse(err) {
		if strings.Contains(err.Error(), src) {
			return fmt.Errorf("%s is in use by a running server: stop it first, then migrate", src)
		}
		return fmt.Errorf("the database at %s is in use by a running server: stop it first, then migrate", redactURL(*to))
	}
	var ne *store.NotEmptyError
	if errors.As(err, &ne) {
		return fmt.Errorf("the database at %s already holds handoff data (%d buckets in %s): migrate moves into an empty database only", redactURL(*to), ne.Buckets, strings.TrimPrefix(ne.Target, "PostgreSQL "))
	}
	if err != nil {
		return oneLine(redactErr(err, *to))
	}
	report(e, m, time.Since(start), "the store's check of the target is clean")
	return nil
}

// progress prints each batch: a long copy shows it moves. On stdout,
// with the report: stderr holds only a failure's one sentence.
func progress(e env) func(string, int64) {
	return func(bucket string, keys int64) {
		fmt.Fprintf(e.stdout, "migrate: %d keys copied (bucket %s)\n", keys, bucket)
	}
}

// report prints what was copied and how it was verified.
func report(e env, m store.Moved, took time.Duration, check string) {
	for _, b := range m.Buckets {
		fmt.Fprintf(e.stdout, "  %-32s %8d keys %12d bytes\n", b.Name, b.Keys, b.Bytes)
	}
	fmt.Fprintf(e.stdout, "copied %d buckets, %d keys, %d bytes of keys and values into %s in %s\n",
		len(m.Buckets), m.Keys(), m.Bytes(), m.Target, m.Copy.Round(time.Millisecond))
	fmt.Fprintf(e.stdout, "verified in %s: every bucket's key count and SHA-256 of its keys and values equal on both sides (digest %s); %s (%s in all)\n",
		m.Verify.Round(time.Millisecond), m.Digest()[:16], check, took.Round(time.Millisecond))
}

// looksLikeURL says s has a scheme (postgres://, mysql://…), not a path.
func looksLikeURL(s string) bool { return strings.Contains(s, "://") }

// checkPostgresURL refuses a URL that is not PostgreSQL's in a sentence.
func checkPostgresURL(flag, s string) error {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return fmt.Errorf("%s %s is not a PostgreSQL URL: give postgres://USER:PASSWORD@HOST:PORT/DATABASE", flag, redactURL(s))
	}
	if _, err := url.Parse(s); err != nil {
		// Only the reason: url.Error quotes the URL, password and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s is not a valid URL: %v", flag, err)
	}
	return nil
}

// redactURL is s as config shows a URL: its password, query values (a
// libpq URL may carry ?password=) and fragment replaced.
func redactURL(s string) string { return config.RedactURL(s) }

// redactErr is err with the password of the URL s replaced wherever its
// message quotes it (a driver's error may quote the URL).
func redactErr(err error, s string) error {
	u, perr := url.Parse(s)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "[redacted]"))
}

// oneLine is err in one sentence: a driver's error lists each connection
// attempt on a line of its own, the same reason often twice (with and
// without TLS); the lines are joined, each once.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	var parts []string
	seen := map[string]bool{}
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		parts = append(parts, l)
	}
	return errors.New(strings.Join(parts, " "))
}
