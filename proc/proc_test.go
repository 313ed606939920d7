package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary, started as a child, play a server
// instead of running the tests (see helper).
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helper(mode)
		return
	}
	os.Exit(m.Run())
}

// helper is the child: in mode serve it prints what it was given, logs the
// listening line, answers /readyz 503 three times and then 200, and exits 0
// on SIGTERM; the other modes misbehave.
func helper(mode string) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot start")
		os.Exit(3)
	case "elsewhere":
		fmt.Fprintln(os.Stderr, `{"msg":"listening","addr":"0.0.0.0:8080"}`)
		<-term
		os.Exit(0)
	case "silent":
		<-term
		os.Exit(0)
	case "deaf":
		signal.Ignore(syscall.SIGTERM)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var asked atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	go func() { _ = http.Serve(ln, mux) }()
	wd, _ := os.Getwd()
	fmt.Printf("args %q\n", os.Args[1:])
	fmt.Printf("wd %s\n", wd)
	fmt.Printf("HANDOFF_DATA=%q HANDOFF_API_TOKEN=%q\n", os.Getenv("HANDOFF_DATA"), os.Getenv("HANDOFF_API_TOKEN"))
	fmt.Fprintf(os.Stderr, `{"level":"INFO","msg":"listening","addr":%q}`+"\n", ln.Addr().String())
	fmt.Fprint(os.Stderr, "a last line without a newline")
	<-term
	os.Exit(0)
}

// helperCmd starts this test binary as a helper in mode.
func helperCmd(mode string) Cmd {
	return Cmd{Path: os.Args[0], Env: []string{helperEnv + "=" + mode}, Within: 10 * time.Second}
}

func TestStartWaitsForReadyAndStopIsClean(t *testing.T) {
	t.Setenv("HANDOFF_DATA", "/someone/elses/data")
	var log bytes.Buffer
	c := helperCmd("serve")
	c.Env = append(c.Env, "HANDOFF_API_TOKEN=tok")
	c.Log = &log
	p, err := Start(t.Context(), c)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Kill()
	resp, err := http.Get(p.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz after Start = %d, want 200: Start returns only once it is ready", resp.StatusCode)
	}
	if host, _, _ := net.SplitHostPort(p.Addr()); host != "127.0.0.1" {
		t.Errorf("Addr = %q, want 127.0.0.1:PORT", p.Addr())
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Errorf("Stop = %v, want nil for exit status 0 after SIGTERM", err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Errorf("second Stop = %v, want the first answer again", err)
	}
	if p.ExitCode() != 0 || p.ExitSignal() != 0 || p.Exit() != "exit status 0" {
		t.Errorf("after Stop: code %d, signal %v, %q; want 0, 0, exit status 0", p.ExitCode(), p.ExitSignal(), p.Exit())
	}
	tail := p.Tail(TailLines)
	for _, want := range []string{
		`stdout: HANDOFF_DATA="" HANDOFF_API_TOKEN="tok"`, // the caller's HANDOFF_* dropped, Cmd.Env kept
		`"msg":"listening"`,
		"a last line without a newline",
	} {
		if !strings.Contains(tail, want) {
			t.Errorf("tail lacks %q:\n%s", want, tail)
		}
	}
	if got := strings.TrimSuffix(log.String(), "\n"); got != tail {
		t.Errorf("the log holds\n%s\nbut the tail\n%s\nwant every line in both", got, tail)
	}
	if got := p.Tail(1); got != "a last line without a newline" {
		t.Errorf("Tail(1) = %q, want the last line", got)
	}
}

func TestLaunchLeavesReadyToTheCaller(t *testing.T) {
	p, err := Launch(t.Context(), helperCmd("serve"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer p.Kill()
	if p.Pid() <= 0 || p.Addr() == "" {
		t.Errorf("after Launch: pid %d, addr %q; want both", p.Pid(), p.Addr())
	}
	if err := p.Ready(t.Context(), 10*time.Second); err != nil {
		t.Errorf("Ready = %v, want nil after the helper's three 503s", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(t.Context(), 10*time.Second); err == nil || !strings.Contains(err.Error(), "exited (signal: killed)") {
		t.Errorf("Ready of a dead process = %v, want it to say the process exited", err)
	}
}

func TestKill(t *testing.T) {
	p, err := Start(t.Context(), helperCmd("serve"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !p.Exited() || p.ExitSignal() != syscall.SIGKILL || p.ExitCode() != -1 || p.Exit() != "signal: killed" {
		t.Errorf("after Kill: exited %v, signal %v, code %d, %q; want killed by SIGKILL", p.Exited(), p.ExitSignal(), p.ExitCode(), p.Exit())
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill of a dead process = %v, want nil", err)
	}
	if err := p.Stop(time.Second); err == nil || !strings.Contains(err.Error(), "had exited before the stop (signal: killed)") {
		t.Errorf("Stop after Kill = %v, want it to say the process had already died", err)
	}
}

func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	p, err := Start(t.Context(), helperCmd("deaf"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	err = p.Stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still running 200ms after SIGTERM; killed") {
		t.Errorf("Stop = %v, want killed after 200ms", err)
	}
	if p.ExitSignal() != syscall.SIGKILL {
		t.Errorf("ended with %s, want SIGKILL", p.Exit())
	}
}

func TestStartFails(t *testing.T) {
	tests := []struct {
		mode   string
		within time.Duration
		want   string
	}{
		{"exit", 10 * time.Second, "exited (exit status 3) before logging"},
		{"elsewhere", 10 * time.Second, `listening on "0.0.0.0:8080", not on 127.0.0.1`},
		{"silent", 300 * time.Millisecond, `logged no {"msg":"listening","addr":...} line within 300ms`},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			c := helperCmd(tt.mode)
			c.Within = tt.within
			p, err := Start(t.Context(), c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start = %v, want an error containing %q", err, tt.want)
			}
			if p == nil || !p.Exited() {
				t.Fatalf("Start failed but left the process %v running", p)
			}
		})
	}
	if _, err := Start(t.Context(), Cmd{Path: filepath.Join(t.TempDir(), "nothing")}); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
}

func TestStartEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p, err := Start(ctx, helperCmd("silent"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start = %v, want context.Canceled", err)
	}
	if p != nil && !p.Exited() {
		t.Error("the process outlived its failed start")
	}
}

func TestInstanceRestartsOnTheSameFiles(t *testing.T) {
	var log bytes.Buffer
	inst := &Instance{
		Binary: os.Args[0],
		Dir:    filepath.Join(t.TempDir(), "inst"),
		Config: "workers: 2\n",
		Env:    []string{helperEnv + "=serve"},
		Log:    &log,
		Within: 10 * time.Second,
	}
	if inst.Current() != nil {
		t.Fatal("Current before the first Start is not nil")
	}
	first, err := inst.Start(t.Context(), "HANDOFF_FAULT=first-run-only")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer first.Kill()
	if _, err := inst.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "run 1 is still running") {
		t.Errorf("Start while run 1 runs = %v, want a refusal", err)
	}
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	second, err := inst.Start(t.Context())
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer second.Kill()

	if first.Number() != 1 || second.Number() != 2 || inst.Current() != second || len(inst.Runs()) != 2 {
		t.Errorf("runs %d and %d, current %d, %d runs; want 1, 2, 2, 2", first.Number(), second.Number(), inst.Current().Number(), len(inst.Runs()))
	}
	wantArgs := fmt.Sprintf("stdout: args %q", []string{"serve", "--data", inst.Data(), "--addr", "127.0.0.1:0", "--config", inst.ConfigPath()})
	for _, p := range []*Process{first, second} {
		if tail := p.Tail(TailLines); !strings.Contains(tail, wantArgs) || !strings.Contains(tail, "stdout: wd "+inst.Dir) {
			t.Errorf("run %d was not started as serve on the instance's files in its folder; want %s:\n%s", p.Number(), wantArgs, tail)
		}
	}
	if b, err := os.ReadFile(inst.ConfigPath()); err != nil || string(b) != inst.Config {
		t.Errorf("config file %q, %v; want %q", b, err, inst.Config)
	}
	if inst.Data() != filepath.Join(inst.Dir, "data") {
		t.Errorf("Data = %s, want Dir/data", inst.Data())
	}
	for _, want := range []string{"---- run 1: ", "HANDOFF_FAULT=first-run-only\n", "---- run 2: "} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	if n := strings.Count(log.String(), "HANDOFF_FAULT"); n != 1 {
		t.Errorf("HANDOFF_FAULT named %d times in the log, want once: the run's env is for that run only", n)
	}
}

func TestEventually(t *testing.T) {
	calls := 0
	err := Eventually(t.Context(), 10*time.Second, func() (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Eventually = %v after %d calls, want nil after 3", err, calls)
	}

	stop := errors.New("broken")
	calls = 0
	err = Eventually(t.Context(), 10*time.Second, func() (bool, error) { calls++; return false, stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Eventually = %v after %d calls, want cond's error after 1", err, calls)
	}

	calls = 0
	began := time.Now()
	err = Eventually(t.Context(), 100*time.Millisecond, func() (bool, error) { calls++; return false, nil })
	if err == nil || err.Error() != "not within 100ms" {
		t.Errorf("Eventually = %v, want not within 100ms", err)
	}
	if took := time.Since(began); took < 100*time.Millisecond || calls < 2 {
		t.Errorf("gave up after %v and %d calls, want at least 100ms and a last call at the deadline", took, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = Eventually(ctx, 10*time.Second, func() (bool, error) { return false, nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Eventually with an ended ctx = %v, want context.Canceled", err)
	}
}

func TestParseListening(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    string
		wantErr bool
	}{
		{"slog line", `{"time":"2025-01-01T00:00:00Z","level":"INFO","msg":"listening","addr":"127.0.0.1:43127"}`, "127.0.0.1:43127", false},
		{"trailing newline and spaces", "  {\"msg\":\"listening\",\"addr\":\"127.0.0.1:8080\"}\r\n", "127.0.0.1:8080", false},
		{"other message", `{"msg":"store opened","addr":"127.0.0.1:1"}`, "", false},
		{"listening text but not the msg", `{"msg":"starting","note":"listening"}`, "", false},
		{"not json", `listening on 127.0.0.1:8080`, "", false},
		{"truncated json", `{"msg":"listening","addr":"127.0.0.1:80`, "", false},
		{"empty", ``, "", false},
		{"all interfaces", `{"msg":"listening","addr":"0.0.0.0:8080"}`, "", true},
		{"ipv6 any", `{"msg":"listening","addr":"[::]:8080"}`, "", true},
		{"localhost name", `{"msg":"listening","addr":"localhost:8080"}`, "", true},
		{"port zero", `{"msg":"listening","addr":"127.0.0.1:0"}`, "", true},
		{"no port", `{"msg":"listening","addr":"127.0.0.1"}`, "", true},
		{"missing addr", `{"msg":"listening"}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseListening([]byte(tt.line))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseListening(%q) error = %v, wantErr %v", tt.line, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseListening(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}

// A process's output arrives in arbitrary chunks, so a listening line split
// across writes must still be found, and every line logged whole.
func TestOutputSplitWrites(t *testing.T) {
	var log bytes.Buffer
	o := newOutput(&log)
	w := o.stream("")
	out := "{\"msg\":\"starting\"}\n{\"msg\":\"liste" + "ning\",\"addr\":\"127.0.0.1:5555\"}\n{\"msg\":\"listening\",\"addr\":\"127.0.0.1:6666\"}\n"
	for i := 0; i < len(out); i += 7 {
		w.Write([]byte(out[i:min(i+7, len(out))]))
	}
	select {
	case got := <-o.found:
		if got.err != nil || got.addr != "127.0.0.1:5555" {
			t.Errorf("found %+v, want the first listening line's 127.0.0.1:5555", got)
		}
	default:
		t.Fatal("listening line not found")
	}
	if log.String() != out {
		t.Errorf("log = %q, want everything written: %q", log.String(), out)
	}
}

func TestTailKeepsTheLastLines(t *testing.T) {
	o := newOutput(nil)
	w := o.stream("")
	for i := range 3 * TailLines {
		fmt.Fprintf(w, "line %d\n", i)
	}
	lines := strings.Split(o.tail(TailLines+50), "\n")
	if len(lines) != TailLines || lines[0] != fmt.Sprintf("line %d", 2*TailLines) || lines[len(lines)-1] != fmt.Sprintf("line %d", 3*TailLines-1) {
		t.Errorf("tail has %d lines, %q … %q; want the last %d", len(lines), lines[0], lines[len(lines)-1], TailLines)
	}
	if got := o.tail(2); got != fmt.Sprintf("line %d\nline %d", 3*TailLines-2, 3*TailLines-1) {
		t.Errorf("tail(2) = %q", got)
	}
	w.Write(bytes.Repeat([]byte("x"), maxLine+1))
	if got := o.tail(1); len(got) != maxLine+1 {
		t.Errorf("a line without end of %d bytes was kept as %d bytes, want it cut off whole", maxLine+1, len(got))
	}
}

func TestEnviron(t *testing.T) {
	got := environ([]string{"PATH=/bin", "HANDOFF_ADDR=0.0.0.0:80", "HANDOFF_FAULT=exit-after-draft-commit", "HANDOFF_DATA=/srv", "GOGC=400", "MY_HANDOFF_X=1"}, "HANDOFF_API_TOKEN=t")
	if want := []string{"PATH=/bin", "GOGC=400", "MY_HANDOFF_X=1", "HANDOFF_API_TOKEN=t"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("environ = %q, want %q", got, want)
	}
}

func TestRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Root(deep)
	if err != nil {
		t.Fatal(err)
	}
	if got != root {
		t.Errorf("Root(%q) = %q, want %q", deep, got, root)
	}
}
