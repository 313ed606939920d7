package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff/handoff/proc"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line  int
	cmd   string            // upper case: FROM, COPY, RUN, ...
	flags map[string]string // --from=build, --chown=65532:65532
	args  string            // the rest, raw
}

// stage is one FROM and the instructions under it.
type stage struct {
	from, name string
	instrs     []instruction
}

// parseDockerfile reads the subset of Dockerfile syntax this repository
// uses: comments, parser directives, backslash continuations and --flags.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	start, n := 0, 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, rest, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			flag, after, _ := strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			in.flags[k] = v
			rest = strings.TrimSpace(after)
		}
		in.args = rest
		if in.cmd == "FROM" {
			from, name, _ := strings.Cut(rest, " AS ")
			stages = append(stages, stage{from: strings.TrimSpace(from), name: strings.TrimSpace(name)})
			return
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return stages
}

// jsonArgs decodes an exec-form argument list: ["a", "b"].
func (in instruction) jsonArgs(t *testing.T) []string {
	t.Helper()
	var list []string
	if err := json.Unmarshal([]byte(in.args), &list); err != nil {
		t.Fatalf("Dockerfile:%d: %s %s: want the exec form [\"...\"]: %v", in.line, in.cmd, in.args, err)
	}
	return list
}

// shellWords splits a RUN command the way sh would for the words used
// here: blanks separate, quotes group, && separates commands.
func shellWords(s string) ([][]string, error) {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	end := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			end()
		case r == '&' && i+1 < len(rs) && rs[i+1] == '&':
			end()
			cmds = append(cmds, words)
			words = nil
			i++
		case strings.ContainsRune(";|<>`$(){}", r):
			return nil, fmt.Errorf("%q: the test's shell reads words, quotes and && only", string(r))
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	end()
	return append(cmds, words), nil
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`CGO_ENABLED=0 go build -ldflags="-s -w" -o /out/x . && mkdir -p '/out/a b'`)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"CGO_ENABLED=0", "go", "build", "-ldflags=-s -w", "-o", "/out/x", "."}, {"mkdir", "-p", "/out/a b"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := shellWords("go build $(pwd)"); err == nil {
		t.Error("a command substitution was accepted; want an error, so that the test never misreads a RUN line")
	}
}

// repoRoot is the module root, the Docker build context.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := proc.Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestDockerfileShape pins what the image's start on an empty volume rests
// on, in words a reviewer can check against the file.
func TestDockerfileShape(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot(t), "Dockerfile"))
	if len(stages) != 2 {
		t.Fatalf("%d stages; want a build stage and a run stage", len(stages))
	}
	run := stages[1]
	if !strings.HasPrefix(run.from, "gcr.io/distroless/static") || !strings.HasSuffix(run.from, ":nonroot") {
		t.Errorf("the run stage is FROM %s; want distroless static, nonroot", run.from)
	}
	var user string
	volumes := map[string]bool{}
	owned := map[string]string{}
	for _, in := range run.instrs {
		switch in.cmd {
		case "USER":
			user = in.args
		case "VOLUME":
			for _, v := range in.jsonArgs(t) {
				volumes[v] = true
			}
		case "COPY":
			parts := strings.Fields(in.args)
			owned[parts[len(parts)-1]] = in.flags["chown"]
		}
	}
	if user != "65532:65532" {
		t.Errorf("USER %q; want the numeric 65532:65532 (distroless's nonroot)", user)
	}
	if !volumes["/data"] {
		t.Errorf("no VOLUME [\"/data\"]")
	}
	if owned["/data"] != user {
		t.Errorf("/data is copied with --chown=%q; want it owned by the USER %q, so a new named volume takes that owner", owned["/data"], user)
	}
}
