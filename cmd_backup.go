package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/handoff/handoff/store"
)

// backupCmd runs `handoff backup --url URL --token TOKEN -o FILE`: it
// downloads a consistent snapshot from a running server, writes it to a
// temporary file beside FILE, verifies it, and renames it into place (the
// folder fsynced, as the server's own backups are). With `--to s3` it has
// the server write a backup now and copy it to its backups.target instead
// (backupToTarget).
func backupCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("backup", e)
	base := fs.String("url", "http://127.0.0.1:8080", "the server's base URL")
	token := fs.String("token", "", "an admin API token (better: HANDOFF_API_TOKEN, which ps does not show)")
	out := fs.String("o", "", "the file to write")
	to := fs.String("to", "", "s3: have the server back up now and copy the backup to its backups.target")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *token == "" {
		*token = e.getenv("HANDOFF_API_TOKEN")
	} else {
		fmt.Fprintln(e.stderr, "handoff backup: a token on the command line shows in ps and shell history; prefer HANDOFF_API_TOKEN")
	}
	if *to != "" && *to != "s3" {
		return fmt.Errorf("backup --to %q: the only target is s3 (the server's backups.target)", *to)
	}
	if *out == "" && *to == "" {
		return errors.New("backup needs -o FILE (or --to s3)")
	}
	if *out != "" && *to != "" {
		return errors.New("backup takes -o FILE or --to s3, not both")
	}
	if *token == "" {
		return errors.New("backup needs --token (or HANDOFF_API_TOKEN)")
	}
	if *to == "s3" {
		return backupToTarget(ctx, *base, *token, e)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(*base, "/")+"/api/v1/backup", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+*token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("download the backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("the server answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	h := sha256.New()
	var (
		n        int64
		sum      string
		warnings []string
	)
	err = store.WriteFileAtomic(*out, func(w io.Writer) error {
		var err error
		if n, err = io.Copy(io.MultiWriter(w, h), resp.Body); err != nil {
			return fmt.Errorf("write the backup: %w", err)
		}
		return nil
	}, func(tmp string) error {
		// The server sends the snapshot's SHA-256 as a trailer once the whole
		// file is out: another sum means the bytes are not the snapshot it
		// took. Some proxies drop trailers, so a missing one is only a
		// warning; the verification below still checks the whole file.
		sum = hex.EncodeToString(h.Sum(nil))
		switch want := resp.Trailer.Get("X-Backup-SHA256"); {
		case want == "":
			fmt.Fprintln(e.stderr, "warning: the server sent no X-Backup-SHA256 trailer (a proxy may have dropped it); the file's checksum could not be compared, only verified")
		case want != sum:
			return fmt.Errorf("the download's SHA-256 is %s but the server sent %s: the file was damaged in transit; nothing was written", sum, want)
		}
		// A copy that does not verify never takes FILE's name, so a good
		// FILE from an earlier run stays as it was. One whose only
		// problems are unreadable records is as good as the live file
		// (store.BackupVerdict): it is written, and says so.
		verr := store.VerifyFile(tmp)
		if ok, w := store.BackupVerdict(verr); ok {
			warnings = w
			return nil
		}
		// Name the file asked for, not the temporary one, which is gone.
		var de *store.DamagedError
		if errors.As(verr, &de) {
			return fmt.Errorf("%s was not written (a file already there is left as it was): the download %s", *out, de.Problem)
		}
		return fmt.Errorf("the downloaded backup was not written: %w", verr)
	})
	if err != nil {
		return err
	}
	if len(warnings) > 0 {
		fmt.Fprintf(e.stdout, "%s: %d bytes, verified with warnings (sha256 %s): %d unreadable records, as in the live database:\n", *out, n, sum, len(warnings))
		for _, w := range warnings {
			fmt.Fprintf(e.stdout, "  %s\n", w)
		}
		return nil
	}
	fmt.Fprintf(e.stdout, "%s: %d bytes, verified (sha256 %s)\n", *out, n, sum)
	return nil
}

// restoreCmd runs `handoff restore --data DIR FILE` with the server stopped.
func restoreCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("restore", e)
	dataDir := fs.String("data", "./data", "the data folder to restore into")
	file := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	}
	if file == "" {
		return errors.New("restore needs the backup FILE")
	}
	if v := e.getenv("HANDOFF_DATA"); v != "" {
		*dataDir = v
	}
	r, err := store.Restore(ctx, *dataDir, file)
	if err != nil {
		return err
	}
	if r.Kept != "" {
		// Only the newest kept database stays: each is a whole copy.
		for _, p := range r.Pruned {
			fmt.Fprintf(e.stdout, "deleted %s, the database an earlier restore kept\n", p)
		}
		if r.PruneErr != nil {
			fmt.Fprintf(e.stderr, "the databases earlier restores kept could not all be deleted: %v\n", r.PruneErr)
		}
		fmt.Fprintf(e.stdout, "restored %s into %s; the previous database is kept as %s\n", file, *dataDir, r.Kept)
	} else {
		fmt.Fprintf(e.stdout, "restored %s into %s\n", file, *dataDir)
	}
	return nil
}

// backupToTarget asks the server at base for a backup now with its offsite
// copy (POST /api/v1/backups?to=s3) and prints where it went. The server
// holds the credentials; this command needs only an admin token.
func backupToTarget(ctx context.Context, base, token string, e env) error {
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/api/v1/backups?to=s3", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask the server for a backup: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Error == "" {
			msg.Error = strings.TrimSpace(string(body))
		}
		return fmt.Errorf("the server answered %s: %s", resp.Status, msg.Error)
	}
	var res struct {
		File struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"file"`
		SHA256  string `json:"sha256"`
		Offsite *struct {
			Key  string `json:"key"`
			Size int64  `json:"size"`
		} `json:"offsite"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Errorf("the server's answer is not a backup result: %w", err)
	}
	if res.Offsite == nil {
		return fmt.Errorf("the server wrote %s but reported no offsite copy", res.File.Name)
	}
	fmt.Fprintf(e.stdout, "%s: %d bytes (sha256 %s), copied to %s and verified there\n", res.File.Name, res.File.Size, res.SHA256, res.Offsite.Key)
	return nil
}
