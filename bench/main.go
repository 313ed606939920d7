// Command bench measures durable webhook ingest of the real handoff binary
// against a bare net/http server, side by side in one run, and prints ratios.
//
//	go run ./bench [flags]
//	go run ./bench sustained [flags]   # a fixed arrival rate: does drafting keep up?
//	go run ./bench footprint [flags]   # RSS, start-up and page latency on a big file
//	go run ./bench grow [flags]        # ingest on a fresh file vs files of 50k, 200k, 1M events
//	go run ./bench pg [flags]          # handoff on PostgreSQL (1 and 3 processes) beside River on PostgreSQL
//
// See README.md for how to read the output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		if !errors.Is(err, errInvalidRun) {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
		os.Exit(1)
	}
}

// errInvalidRun means the measurements exist but must not be trusted; the
// details have already been printed loudly.
var errInvalidRun = errors.New("invalid run")

// bareServeFlag and floorServeFlag re-execute the bench binary as the bare
// and floor targets. They are handled before the normal flag set so that
// they stay out of -help: they are a contract between the bench and its own
// children, not user options.
const (
	bareServeFlag  = "bare-serve"
	floorServeFlag = "floor-serve"
	floorDataFlag  = "floor-data"
)

// config is the parsed command line.
type config struct {
	n, c, size, rounds, warmup int
	bin, repo, dir             string
	baseBin                    string // the base target's binary: an older build to compare with
	targets                    []string
	keep                       bool
	timeout                    time.Duration
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch strings.TrimLeft(args[0], "-") {
		case bareServeFlag, floorServeFlag:
			return serveBaseline(ctx, args)
		case growFillFlag: // grow.go
			return growFillChild(ctx, args)
		}
		switch args[0] {
		case "sustained": // sustained.go
			return sustained(ctx, args[1:], stdout)
		case "footprint": // footprint.go
			return footprint(ctx, args[1:], stdout)
		case "grow": // grow.go
			return grow(ctx, args[1:], stdout)
		case "bodies": // bodies.go
			return bodies(ctx, args[1:], stdout)
		case "flood": // flood.go
			return flood(ctx, args[1:], stdout)
		case "pg": // pg.go
			return pgBench(ctx, args[1:], stdout)
		}
	}

	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	return bench(ctx, cfg, stdout)
}

// serveBaseline runs this binary as the bare or the floor target.
func serveBaseline(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	bare := fs.String(bareServeFlag, "", "serve the bare target; write the listening address to this file")
	floor := fs.String(floorServeFlag, "", "serve the floor target; write the listening address to this file")
	data := fs.String(floorDataFlag, "", "the floor target's data folder")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *floor != "" {
		if *data == "" {
			return fmt.Errorf("-%s needs -%s", floorServeFlag, floorDataFlag)
		}
		return serveFloor(ctx, *floor, *data, os.Stderr)
	}
	return serveBare(ctx, *bare, os.Stderr)
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var targets string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&cfg.n, "n", 20000, "unique events per measured run")
	fs.IntVar(&cfg.c, "c", 64, "concurrent keep-alive connections")
	fs.IntVar(&cfg.size, "size", 512, "request body size in bytes")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; each runs every target once and the summary takes the median")
	fs.IntVar(&cfg.warmup, "warmup", 500, "unmeasured requests (separate ids) sent to each target before measuring")
	fs.StringVar(&cfg.bin, "bin", "", "prebuilt handoff binary (default: go build the repository)")
	fs.StringVar(&cfg.baseBin, "base-bin", "", "a second handoff binary, run as the target base in every round beside handoff, so two builds are compared under the same load (adds base to -targets)")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from (default: walk up from the working directory to go.mod)")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories; put it on the disk you want to measure (default: $TMPDIR)")
	fs.StringVar(&targets, "targets", "handoff,floor,bare", "comma-separated targets to run: handoff, floor (durable bbolt ingest at its least), bare")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directories (data, child logs)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "upper bound for the whole run")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench [flags]\n       go run ./bench sustained|footprint [flags]  (see -help of each)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	// The upper bounds keep event ids fixed-width (see eventID), which keeps
	// every body exactly -size bytes.
	switch {
	case cfg.n < 1 || cfg.n > maxSeq:
		return cfg, fmt.Errorf("-n must be between 1 and %d", maxSeq)
	case cfg.warmup < 0 || cfg.warmup > maxSeq:
		return cfg, fmt.Errorf("-warmup must be between 0 and %d", maxSeq)
	case cfg.c < 1 || cfg.c > 4096:
		return cfg, errors.New("-c must be between 1 and 4096")
	case cfg.rounds < 1 || cfg.rounds > maxRound:
		return cfg, fmt.Errorf("-rounds must be between 1 and %d", maxRound)
	case cfg.size < minBodySize || cfg.size > maxBodySize:
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	case cfg.timeout <= 0:
		return cfg, errors.New("-timeout must be positive")
	}
	seen := map[string]bool{}
	for _, t := range strings.Split(targets, ",") {
		t = strings.TrimSpace(t)
		if t != targetHandoff && t != targetFloor && t != targetBare {
			return cfg, fmt.Errorf("-targets: unknown target %q (want %s, %s or %s)", t, targetHandoff, targetFloor, targetBare)
		}
		if !seen[t] {
			seen[t] = true
			cfg.targets = append(cfg.targets, t)
		}
	}
	if cfg.baseBin != "" {
		cfg.targets = append([]string{targetBase}, cfg.targets...)
	}
	return cfg, nil
}
