package drill

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
)

// TestMain removes the binary that TestDrill built (proc.Binary).
func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBinary()
	os.Exit(code)
}

// buildBinary builds the handoff command from the repository root, once, so
// the drill runs exactly what a user would install.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the real binary; skipped with -short")
	}
	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// verdicts reads the result column of the printed table, by fixture label.
func verdicts(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 7 {
			continue
		}
		got[strings.TrimSpace(cells[0])] = strings.TrimSpace(cells[len(cells)-1])
	}
	return got
}

func TestDrill(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name     string
		sabotage string
		only     []string // run only these fixtures; empty runs all
		wantOK   bool
		wantFail string // the one fixture that must fail; every other that ran must pass
	}{
		{name: "healthy instance", wantOK: true},
		{name: "no idempotency key support", sabotage: "idempotency", wantFail: "3 timeout after accept, idempotency key"},
		{name: "no lookup after a crash", sabotage: "lookup", wantFail: "5 SIGKILL mid-delivery"},
		// These sabotages touch only an outside provider's config, which
		// no other fixture uses, so the fixture alone is run.
		{name: "not found counts at once", sabotage: "settle", only: []string{"late-lookup"}, wantFail: "8 provider slower than the timeout, with lookup"},
		{name: "declared to deduplicate but does not", sabotage: "dedupe", only: []string{"drop-reused"}, wantFail: "7 provider drops a reused connection after accepting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
			defer cancel()
			var out bytes.Buffer
			ok, err := Run(ctx, Options{Binary: bin, Break: tt.sabotage, Only: tt.only, Out: &out})
			t.Logf("drill output:\n%s", out.String())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if ok != tt.wantOK {
				t.Errorf("Run ok = %v, want %v", ok, tt.wantOK)
			}
			got := verdicts(out.String())
			ran, err := selectFixtures(tt.only)
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			for _, v := range got {
				if v == "PASS" || v == "FAIL" { // not the header or the rule under it
					rows++
				}
			}
			if rows != len(ran) {
				t.Errorf("the table has %d fixture rows, want %d (one per fixture that ran): %v", rows, len(ran), got)
			}
			for _, f := range ran {
				want := "PASS"
				if f.label == tt.wantFail {
					want = "FAIL"
				}
				if got[f.label] != want {
					t.Errorf("fixture %q: table says %q, want %s", f.label, got[f.label], want)
				}
			}
		})
	}
}

// TestRunRefusesUnknownNames checks the options that stop a drill before it
// starts anything.
func TestRunRefusesUnknownNames(t *testing.T) {
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"no binary", Options{}, "no binary"},
		{"unknown sabotage", Options{Binary: "handoff", Break: "everything"}, `"everything" is not a sabotage`},
		{"unknown fixture", Options{Binary: "handoff", Only: []string{"nope"}}, `there is no fixture "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := Run(context.Background(), tt.opt)
			if ok || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, %v; want false and an error containing %q", ok, err, tt.want)
			}
		})
	}
}

func TestSelectFixturesAddsWhatTheyBuildOn(t *testing.T) {
	got, err := selectFixtures([]string{"replay-reply"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, f.name)
	}
	if want := "no-key,replay-reply"; strings.Join(names, ",") != want {
		t.Errorf("selectFixtures(replay-reply) = %v, want %s", names, want)
	}
}
