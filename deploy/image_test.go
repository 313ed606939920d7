package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/handoff/handoff/proc"
)

// dockerignore is the repository's .dockerignore read by Docker's own
// matcher (the module BuildKit uses for the same file).
func dockerignore(t *testing.T, root string) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatalf("no .dockerignore: `COPY . .` would take .git and any local database into the image: %v", err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

func TestDockerignore(t *testing.T) {
	pm := dockerignore(t, repoRoot(t))
	for _, tt := range []struct {
		path string
		out  bool
	}{
		{".git/HEAD", true},
		{".git", true},
		{"data/handoff.db", true},
		{"data/backups/handoff-backup-20261201T030000Z.db", true},
		{"handoff.db", true},
		{"old/handoff.db.old", true},
		{"e2e/data/handoff.db", true},
		{"handoff", true}, // the binary of `go build .`
		{"handoff.test", true},
		{"cpu.prof", true},
		{"testdata/out/report.txt", true},
		{"hook/testdata/vectors/node_modules/standardwebhooks/index.js", true},
		{"go.mod", false},
		{"go.sum", false},
		{"main.go", false},
		{"static/htmx.min.js", false},
		{"drafter/schema.json", false},
		{"views/layout_templ.go", false},
		{"store/schema.go", false},
		{"handoff.example.yaml", false},
		{"docs/handoff.service", false},
	} {
		got, err := pm.MatchesOrParentMatches(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.out {
			t.Errorf("%s excluded from the build context: %v, want %v", tt.path, got, tt.out)
		}
	}
}

// copyContext copies the build context Docker would send: the repository
// without what .dockerignore excludes. It returns how many files it took.
func copyContext(t *testing.T, root, dst string, pm *patternmatcher.PatternMatcher) int {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		out, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if out {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			files++
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// copyTree copies the folder src into dst, overwriting, keeping modes and
// symbolic links (owners are the caller's to set).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode()&(fs.ModePerm|fs.ModeSticky))
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			return copyFile(path, target, info.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// image is the run stage's filesystem and configuration as the Dockerfile
// describes them.
type image struct {
	root        string   // the filesystem
	env         []string // ENV
	uid, gid    int      // USER
	volumes     []string // VOLUME
	entrypoint  []string
	cmd         []string
	healthcheck []string // HEALTHCHECK CMD
	stopSignal  string   // STOPSIGNAL
}

// buildImage carries out the Dockerfile: the build stage runs its RUN
// commands (go and mkdir only) on a copy of the build context taken through
// .dockerignore, and the run stage's COPY --from=build lays the files out,
// with their --chown, over what the base image is assumed to hold. An
// instruction the test does not know fails it: teach it rather than guess.
func buildImage(t *testing.T, ctx context.Context) image {
	t.Helper()
	root := repoRoot(t)
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) != 2 || stages[1].from == "" {
		t.Fatalf("want a build stage and a run stage, got %d stages", len(stages))
	}
	ctxDir := t.TempDir()
	if n := copyContext(t, root, ctxDir, dockerignore(t, root)); n == 0 {
		t.Fatal("the build context is empty")
	}

	// The build stage: its filesystem is a folder; absolute paths inside it
	// are joined under that folder.
	build := t.TempDir()
	in := func(p string) string { return filepath.Join(build, p) }
	workdir := "/"
	for _, ins := range stages[0].instrs {
		switch ins.cmd {
		case "WORKDIR":
			workdir = ins.args
			if err := os.MkdirAll(in(workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			parts := strings.Fields(ins.args)
			for _, src := range parts[:len(parts)-1] {
				dst := filepath.Join(in(workdir), parts[len(parts)-1])
				if src == "." {
					copyTree(t, ctxDir, dst)
					continue
				}
				info, err := os.Stat(filepath.Join(ctxDir, src))
				if err != nil {
					t.Fatalf("Dockerfile:%d: COPY %s: not in the build context: %v", ins.line, src, err)
				}
				if err := copyFile(filepath.Join(ctxDir, src), filepath.Join(dst, src), info.Mode().Perm()); err != nil {
					t.Fatal(err)
				}
			}
		case "RUN":
			cmds, err := shellWords(ins.args)
			if err != nil {
				t.Fatalf("Dockerfile:%d: RUN %s: %v", ins.line, ins.args, err)
			}
			for _, words := range cmds {
				runBuildStep(t, ctx, ins.line, words, in, in(workdir))
			}
		default:
			t.Fatalf("Dockerfile:%d: the test does not know %s in the build stage", ins.line, ins.cmd)
		}
	}

	// The run stage: what distroless static:nonroot is taken to provide
	// (a world-writable /tmp; its /etc/passwd names uid 65532 "nonroot",
	// which a static Go binary never reads), then the instructions.
	img := image{root: t.TempDir(), uid: -1, gid: -1}
	if err := os.Mkdir(filepath.Join(img.root, "tmp"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(img.root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, ins := range stages[1].instrs {
		switch ins.cmd {
		case "COPY":
			if ins.flags["from"] != stages[0].name {
				t.Fatalf("Dockerfile:%d: COPY without --from=%s: the test lays out build outputs only", ins.line, stages[0].name)
			}
			parts := strings.Fields(ins.args)
			if len(parts) != 2 {
				t.Fatalf("Dockerfile:%d: COPY with %d paths; the test knows one source and one destination", ins.line, len(parts))
			}
			dst := filepath.Join(img.root, parts[1])
			uid, gid := 0, 0
			if own := ins.flags["chown"]; own != "" {
				uid, gid = ids(t, ins, own)
			}
			layOut(t, in(parts[0]), dst, uid, gid)
		case "ENV":
			for _, kv := range strings.Fields(ins.args) {
				if !strings.Contains(kv, "=") {
					t.Fatalf("Dockerfile:%d: ENV %s: want NAME=value pairs", ins.line, kv)
				}
				img.env = append(img.env, kv)
			}
		case "VOLUME":
			img.volumes = ins.jsonArgs(t)
		case "USER":
			img.uid, img.gid = ids(t, ins, ins.args)
		case "ENTRYPOINT":
			img.entrypoint = ins.jsonArgs(t)
		case "CMD":
			img.cmd = ins.jsonArgs(t)
		case "HEALTHCHECK":
			_, exec, ok := strings.Cut(ins.args, "CMD ")
			if !ok {
				t.Fatalf("Dockerfile:%d: HEALTHCHECK without CMD", ins.line)
			}
			img.healthcheck = instruction{line: ins.line, cmd: "HEALTHCHECK", args: exec}.jsonArgs(t)
		case "STOPSIGNAL":
			img.stopSignal = ins.args
		case "EXPOSE":
		default:
			t.Fatalf("Dockerfile:%d: the test does not know %s in the run stage", ins.line, ins.cmd)
		}
	}
	if img.uid < 0 || len(img.entrypoint) == 0 {
		t.Fatal("the run stage sets no USER or no ENTRYPOINT")
	}
	return img
}

// ids reads a numeric uid:gid.
func ids(t *testing.T, ins instruction, s string) (int, int) {
	t.Helper()
	u, g, _ := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if err1 != nil || err2 != nil {
		t.Fatalf("Dockerfile:%d: %s %q: the test reads numeric uid:gid only", ins.line, ins.cmd, s)
	}
	return uid, gid
}

// runBuildStep runs one command of a RUN line in the build stage.
func runBuildStep(t *testing.T, ctx context.Context, line int, words []string, in func(string) string, dir string) {
	t.Helper()
	var env []string
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env, words = append(env, words[0]), words[1:]
	}
	switch {
	case len(words) >= 2 && words[0] == "mkdir" && words[1] == "-p":
		for _, p := range words[2:] {
			if err := os.MkdirAll(in(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	case len(words) >= 2 && words[0] == "go" && (words[1] == "build" || words[1] == "mod"):
		args := append([]string(nil), words[1:]...)
		for i := range args {
			if i > 0 && args[i-1] == "-o" && filepath.IsAbs(args[i]) {
				args[i] = in(args[i])
			}
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("Dockerfile:%d: %s go %s: %v\n%s", line, strings.Join(env, " "), strings.Join(words[1:], " "), err, out)
		}
	default:
		t.Fatalf("Dockerfile:%d: the test does not know the command %q", line, strings.Join(words, " "))
	}
}

// layOut copies src (a file, or a folder's contents) to dst, and gives dst
// and everything below it the owner uid:gid, as COPY --chown does. Parent
// folders it creates are root's.
func layOut(t *testing.T, src, dst string, uid, gid int) {
	t.Helper()
	info, err := os.Stat(src)
	if err != nil {
		t.Fatalf("COPY --from=build: the build stage made no %s: %v", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if info.IsDir() {
		copyTree(t, src, dst)
	} else if err := copyFile(src, dst, info.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dst, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// freshVolume mounts a new, empty named volume on path the way Docker's
// local volume driver does: the volume starts as an empty root-owned
// folder; when the image has that path, its contents, owner and mode are
// copied into the volume first (a volume is a bind mount on the image's
// path; here it takes the path's place).
func freshVolume(t *testing.T, img image, path string) {
	t.Helper()
	vol := filepath.Join(t.TempDir(), "_data")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(vol, 0, 0); err != nil {
		t.Fatal(err)
	}
	mount := filepath.Join(img.root, path)
	if info, err := os.Stat(mount); err == nil {
		copyTree(t, mount, vol)
		st := info.Sys().(*syscall.Stat_t)
		if err := os.Chown(vol, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(vol, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(mount); err != nil {
			t.Fatal(err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	} else if err := os.MkdirAll(filepath.Dir(mount), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(vol, mount); err != nil {
		t.Fatal(err)
	}
}

// chroot runs argv inside the image as its USER: coreutils' chroot(8),
// which execs argv, so the process is handoff itself.
func (img image) chroot(argv ...string) (string, []string) {
	return "chroot", append([]string{fmt.Sprintf("--userspec=%d:%d", img.uid, img.gid), img.root}, argv...)
}

// requireRoot skips a test that must switch to uid 65532 inside a chroot.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs the binary as uid 65532 inside a chroot (CI and this project's machines run as root)")
	}
	if _, err := exec.LookPath("chroot"); err != nil {
		t.Skip("needs coreutils' chroot(8) to run the binary inside the image's filesystem")
	}
}

// TestImageStartsOnAnEmptyVolume builds what the Dockerfile describes
// (the static binary from the .dockerignore'd context, the run stage's
// files with their owners) and starts it the way `docker run -v
// handoff-data:/data` would: in that filesystem alone, as uid 65532, with
// the image's environment and entry point, on a new named volume. Without
// a Docker engine this is as close as the machine allows; what it cannot
// show is in the README's "Container" section.
func TestImageStartsOnAnEmptyVolume(t *testing.T) {
	requireRoot(t)
	// A bound against a hang, not a measure: the image's build compiles
	// the whole program afresh (-trimpath, no -race: nothing shared with
	// the test builds running beside it), which took over 5 minutes on 2
	// cores with three benchmarks beside it (killed at 302 s, 2026-12-03).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img := buildImage(t, ctx)
	if len(img.volumes) != 1 || img.volumes[0] != "/data" {
		t.Fatalf("VOLUME %q; want [\"/data\"]", img.volumes)
	}
	// The image listens on 0.0.0.0:8080; here it must take a free port on
	// loopback. The HANDOFF_DATA of the image stays.
	env := append(append([]string(nil), img.env...), "HANDOFF_ADDR=127.0.0.1:0")
	argv := append(append([]string(nil), img.entrypoint...), img.cmd...)

	t.Run("without /data in the image the volume is root's and the start fails", func(t *testing.T) {
		// The image before issue 19: the same files but no /data. This is
		// the failure the test exists to catch, and it shows that the
		// process really runs as 65532 (root would be allowed).
		bare := img
		bare.root = t.TempDir()
		copyTree(t, img.root, bare.root)
		if err := os.RemoveAll(filepath.Join(bare.root, "data")); err != nil {
			t.Fatal(err)
		}
		freshVolume(t, bare, "/data")
		path, args := bare.chroot(argv...)
		p, err := proc.Start(ctx, proc.Cmd{Path: path, Args: args, Env: env, Within: 30 * time.Second})
		if err == nil {
			p.Stop(10 * time.Second)
			t.Fatal("handoff started on a root-owned volume as uid 65532; want permission denied")
		}
		if p == nil || !strings.Contains(p.Tail(20), "permission denied") {
			t.Fatalf("want a refusal naming permission denied, got %v", err)
		}
	})

	freshVolume(t, img, "/data")
	path, args := img.chroot(argv...)
	p, err := proc.Start(ctx, proc.Cmd{Path: path, Args: args, Env: env, Within: 30 * time.Second})
	if err != nil {
		if p != nil {
			t.Fatalf("the image did not start on an empty volume: %v\n%s", err, p.Tail(30))
		}
		t.Fatal(err)
	}
	if !strings.Contains(p.Tail(30), `"data_dir_source":"env"`) {
		t.Errorf("the start log does not say that HANDOFF_DATA set the data folder:\n%s", p.Tail(30))
	}

	// The image's HEALTHCHECK, run inside the image as its user.
	hc := append([]string(nil), img.healthcheck...)
	for i := range hc {
		if i > 0 && hc[i-1] == "--addr" {
			hc[i] = p.Addr()
		}
	}
	hpath, hargs := img.chroot(hc...)
	health := exec.CommandContext(ctx, hpath, hargs...)
	health.Env = proc.Environ("HANDOFF_ADDR=" + p.Addr())
	if out, err := health.CombinedOutput(); err != nil {
		t.Errorf("HEALTHCHECK %q: %v\n%s", img.healthcheck, err, out)
	}

	// docker stop: the image's STOPSIGNAL, then SIGKILL after 10 s. proc's
	// Stop sends SIGTERM, so that is the signal the image must name.
	if img.stopSignal != "SIGTERM" {
		t.Errorf("STOPSIGNAL %q; want SIGTERM, the signal handoff drains on", img.stopSignal)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop within docker stop's 10 s: %v\n%s", err, p.Tail(30))
	}
	db := filepath.Join(img.root, "data", "handoff.db")
	info, err := os.Stat(db)
	if err != nil {
		t.Fatalf("no database on the volume after the first start: %v", err)
	}
	st := info.Sys().(*syscall.Stat_t)
	if int(st.Uid) != img.uid || info.Mode().Perm()&0o077 != 0 {
		t.Errorf("handoff.db is owned by uid %d with mode %v; want uid %d and no access for others", st.Uid, info.Mode().Perm(), img.uid)
	}
}
