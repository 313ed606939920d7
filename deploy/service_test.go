package deploy

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/proc"
)

// unitSettings reads the [Service] section of a unit file: every key with
// every value it is given, in order.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			settings[k] = append(settings[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return settings
}

// TestServiceUnitIsHardened runs systemd's own review of the unit file and
// wants "OK" (an exposure of at most 2.5 out of 10).
func TestServiceUnitIsHardened(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package has it); the unit's rating is not checked")
	}
	unit := filepath.Join(repoRoot(t), "docs", "handoff.service")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The offline review reads the file, not the running system's units;
	// it takes the unit's name from the file name.
	out, err := exec.CommandContext(ctx, analyze, "security", "--offline=true", "--no-pager", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=true %s: %v\n%s", unit, err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for handoff\.service: ([0-9.]+) (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure level in:\n%s", out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security: %.1f %s", score, m[2])
	if score > 2.5 {
		t.Errorf("the unit's exposure is %.1f %s; want at most 2.5 (OK). The review:\n%s", score, m[2], out)
	}
}

// TestServiceUnitLeavesAddrAndDataToTheFile: the unit must not set what
// the YAML sets, or the file's addr and data_dir would silently lose.
func TestServiceUnitLeavesAddrAndDataToTheFile(t *testing.T) {
	root := repoRoot(t)
	s := unitSettings(t, filepath.Join(root, "docs", "handoff.service"))
	for _, env := range s["Environment"] {
		if strings.Contains(env, "HANDOFF_ADDR") || strings.Contains(env, "HANDOFF_DATA") || strings.Contains(env, "HANDOFF_CONFIG") {
			t.Errorf("Environment=%s overrides the configuration file", env)
		}
	}
	exec := strings.Join(s["ExecStart"], " ")
	if strings.Contains(exec, "--addr") || strings.Contains(exec, "--data") {
		t.Errorf("ExecStart=%s overrides the configuration file", exec)
	}
	if !strings.Contains(exec, "--config /etc/handoff/handoff.yaml") {
		t.Errorf("ExecStart=%s does not read /etc/handoff/handoff.yaml", exec)
	}
	if !slices.ContainsFunc(s["SystemCallFilter"], func(v string) bool { return strings.HasPrefix(v, "@system-service") }) {
		t.Errorf("SystemCallFilter=%q does not allow @system-service, which Go's runtime needs", s["SystemCallFilter"])
	}

	c, from, err := config.LoadSources(filepath.Join(root, "handoff.example.yaml"), exampleEnv)
	if err != nil {
		t.Fatal(err)
	}
	state := "/var/lib/" + strings.Join(s["StateDirectory"], "")
	if c.DataDir != state {
		t.Errorf("handoff.example.yaml sets data_dir %q; the unit's StateDirectory is %s", c.DataDir, state)
	}
	if from.Addr != config.SourceFile || from.DataDir != config.SourceFile {
		t.Errorf("sources %+v; want addr and data_dir from the file", from)
	}
}

// exampleEnv supplies the secrets handoff.example.yaml names, as a unit's
// EnvironmentFile would.
func exampleEnv(name string) string {
	switch name {
	case "HANDOFF_WEB_SECRET", "HANDOFF_CRM_SIGNING_SECRET":
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}
	return ""
}

// TestExampleConfig loads handoff.example.yaml with the loader serve uses:
// it must be valid as shipped (with its secrets set) and say what it shows.
func TestExampleConfig(t *testing.T) {
	path := filepath.Join(repoRoot(t), "handoff.example.yaml")
	c, err := config.Load(path, exampleEnv)
	if err != nil {
		t.Fatalf("handoff.example.yaml is refused: %v", err)
	}
	if c.Addr != "127.0.0.1:8080" || len(c.Channels) != 1 || c.Channels[0].Signature == nil || len(c.Providers) != 1 {
		t.Errorf("got addr %s, %d channels, %d providers; want a loopback address, one signed channel and one provider", c.Addr, len(c.Channels), len(c.Providers))
	}
	for _, w := range c.Warnings() {
		t.Errorf("the example draws a warning: %s", w)
	}
	if _, err := config.Load(path, nil); err == nil || !strings.Contains(err.Error(), "HANDOFF_WEB_SECRET") {
		t.Errorf("without its secrets the example loaded (%v); want a refusal naming HANDOFF_WEB_SECRET", err)
	}
}

// syscallGroups reads every group systemd-analyze knows: "@name" -> its
// system calls, nested groups expanded.
func syscallGroups(t *testing.T, analyze string) map[string][]string {
	t.Helper()
	out, err := exec.Command(analyze, "syscall-filter", "--no-pager").Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v", err)
	}
	raw := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(string(out), "\n") {
		s := strings.TrimSpace(line)
		switch {
		case s == "" || strings.HasPrefix(s, "#"):
		case !strings.HasPrefix(line, " "):
			cur = s
		default:
			raw[cur] = append(raw[cur], s)
		}
	}
	var expand func(name string, depth int) []string
	expand = func(name string, depth int) []string {
		var calls []string
		for _, x := range raw[name] {
			if strings.HasPrefix(x, "@") && depth < 8 {
				calls = append(calls, expand(x, depth+1)...)
			} else if !strings.HasPrefix(x, "@") {
				calls = append(calls, x)
			}
		}
		return calls
	}
	groups := map[string][]string{}
	for name := range raw {
		groups[name] = expand(name, 0)
	}
	return groups
}

// unitAllows is the set of system calls the unit's SystemCallFilter lines
// let through: the allow lists, less every "~" deny list.
func unitAllows(t *testing.T, filters []string, groups map[string][]string) map[string]bool {
	t.Helper()
	allowed, denied := map[string]bool{}, map[string]bool{}
	for _, f := range filters {
		set := allowed
		if rest, ok := strings.CutPrefix(f, "~"); ok {
			set, f = denied, rest
		}
		for _, name := range strings.Fields(f) {
			if strings.HasPrefix(name, "@") {
				if groups[name] == nil {
					t.Fatalf("SystemCallFilter names %s, which systemd-analyze does not know", name)
				}
				for _, c := range groups[name] {
					set[c] = true
				}
			} else {
				set[name] = true
			}
		}
	}
	for c := range denied {
		delete(allowed, c)
	}
	return allowed
}

// TestServiceSyscallFilterLetsHandoffRun traces the real binary with strace
// through what a day of service does (start on an empty folder, a webhook,
// its draft, an approval and its send, a backup download, /metrics, a
// restart that runs the damaged-file checker child, a clean stop) and wants
// every system call it made inside the unit's SystemCallFilter: a call
// outside would fail with EPERM under systemd.
func TestServiceSyscallFilterLetsHandoffRun(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit's system-call filter cannot be expanded")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (Debian's strace package): the calls handoff makes cannot be traced")
	}
	filters := unitSettings(t, filepath.Join(repoRoot(t), "docs", "handoff.service"))["SystemCallFilter"]
	allowed := unitAllows(t, filters, syscallGroups(t, analyze))
	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	token := strings.Repeat("t0ken", 8)
	used := map[string]bool{}
	for run := 1; run <= 2; run++ {
		trace := filepath.Join(dir, fmt.Sprintf("trace-%d.txt", run))
		p, err := proc.Start(ctx, proc.Cmd{
			Path: strace, Args: []string{"-f", "-qq", "-o", trace, bin, "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"},
			Env: []string{"HANDOFF_API_TOKEN=" + token, "HANDOFF_ADMIN_PASSWORD=a-password-long-enough"},
		})
		if err != nil {
			if p != nil && strings.Contains(p.Tail(10), "ptrace") {
				t.Skipf("strace cannot trace here: %s", p.Tail(3))
			}
			t.Fatalf("run %d under strace: %v", run, err)
		}
		if run == 1 {
			d := &demo{t: t, url: p.URL(), token: token}
			out := d.outbox()
			err := proc.Eventually(ctx, 30*time.Second, func() (bool, error) {
				var row struct {
					Status string `json:"status"`
				}
				code := d.api("GET", "/api/v1/outbox/"+url.PathEscape(out), "", &row)
				return code == http.StatusOK && row.Status == "sent", nil
			})
			if err != nil {
				t.Fatalf("the reply was not sent: %v", err)
			}
			if code := d.api("GET", "/api/v1/backup", "", nil); code != http.StatusOK {
				t.Errorf("GET /api/v1/backup: %d", code)
			}
			if code := d.api("GET", "/metrics", "", nil); code != http.StatusOK {
				t.Errorf("GET /metrics: %d", code)
			}
		}
		// SIGTERM to handoff itself: strace passes signals on only to a
		// tracee it started when asked, and exits when its tracee does.
		if err := terminateTracee(p.Pid()); err != nil {
			t.Fatal(err)
		}
		if !p.Wait(30 * time.Second) {
			p.Kill()
			t.Fatalf("run %d did not stop after SIGTERM:\n%s", run, p.Tail(20))
		}
		if !strings.Contains(p.Tail(5), `"msg":"stopped"`) {
			t.Errorf("run %d did not stop cleanly:\n%s", run, p.Tail(10))
		}
		b, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\d+\s+([a-z_0-9]+)\(`).FindAllSubmatch(b, -1) {
			used[string(m[1])] = true
		}
	}
	if len(used) < 20 {
		t.Fatalf("the trace holds %d system calls; want the whole run's", len(used))
	}
	var outside []string
	for c := range used {
		// execve starts the traced binary; systemd runs it before the filter applies.
		if !allowed[c] && c != "execve" {
			outside = append(outside, c)
		}
	}
	slices.Sort(outside)
	t.Logf("%d distinct system calls traced, %d outside the unit's filter", len(used), len(outside))
	if len(outside) > 0 {
		t.Errorf("handoff called %v, which SystemCallFilter=%q refuses", outside, filters)
	}
}

// terminateTracee sends SIGTERM to the process strace (pid) started.
func terminateTracee(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return err
	}
	child, err := strconv.Atoi(strings.TrimSpace(strings.Fields(string(b) + " 0")[0]))
	if err != nil || child == 0 {
		return fmt.Errorf("strace %d has no child to stop", pid)
	}
	return syscall.Kill(child, syscall.SIGTERM)
}
