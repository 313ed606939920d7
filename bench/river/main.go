// Command river is the bench's River target (go run ./bench pg): a small
// HTTP server that takes handoff's demo webhook (POST /hooks/demo, a JSON
// body with id, from, name and text) and inserts it as a unique River job
// on PostgreSQL, unique by the channel and message id, before it answers:
// 202 {"status":"accepted",...} for a new one, 200 {"status":"duplicate",...}
// with the first job's id for a repeat, as handoff answers. River's workers
// "draft" each job by completing it. Every connection runs with
// synchronous_commit on, so a 202 is durable as handoff's is.
//
// It is its own Go module so that handoff's module does not depend on
// River; the bench builds it with go build in this folder once per run.
//
//	river -database-url URL [-conns 80] [-workers 100]
//
// It logs {"msg":"listening","addr":"127.0.0.1:PORT"} and answers GET
// /readyz once River's migrations have run and its client has started,
// as handoff does, so the bench starts it the way it starts handoff.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// maxBody is handoff's default body limit.
const maxBody = 1 << 20

// DraftArgs is one webhook as a job: what handoff records of a demo event
// (the fields it extracts and the body as received). Unique by channel and
// message id, as handoff's dedup key is.
type DraftArgs struct {
	Channel   string          `json:"channel" river:"unique"`
	MessageID string          `json:"message_id" river:"unique"`
	From      string          `json:"from"`
	Name      string          `json:"name"`
	Text      string          `json:"text"`
	Body      json.RawMessage `json:"body"`
}

func (DraftArgs) Kind() string { return "draft" }

// DraftWorker is the trivial draft: the job completes.
type DraftWorker struct {
	river.WorkerDefaults[DraftArgs]
}

func (DraftWorker) Work(context.Context, *river.Job[DraftArgs]) error { return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "river: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	url := fs.String("database-url", "", "PostgreSQL database (pgx URL or key=value string)")
	conns := fs.Int("conns", 80, "connection pool size")
	workers := fs.Int("workers", 100, "River workers of the default queue; 0: an insert-only client")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return errors.New("-database-url is required")
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	cfg, err := pgxpool.ParseConfig(*url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "river-bench"
	cfg.MaxConns = int32(*conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	log.Info("migrated", "versions", len(res.Versions))

	workersReg := river.NewWorkers()
	river.AddWorker(workersReg, &DraftWorker{})
	rc := &river.Config{
		Workers: workersReg,
		Logger:  slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if *workers > 0 {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}}
	}
	client, err := river.NewClient(driver, rc)
	if err != nil {
		return err
	}
	if *workers > 0 {
		if err := client.Start(ctx); err != nil {
			return err
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{channel}", func(w http.ResponseWriter, r *http.Request) {
		hook(w, r, client)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	if *workers > 0 {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if serr := client.Stop(sctx); serr != nil && err == nil {
			err = serr
		}
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// reply is handoff's webhook answer; the correlation id is the job's id,
// zero-padded to the width of handoff's (a ULID), so both answers weigh
// the same.
type reply struct {
	Status        string `json:"status"`
	EventKey      string `json:"event_key"`
	CorrelationID string `json:"correlation_id"`
}

func hook(w http.ResponseWriter, r *http.Request, client *river.Client[pgx.Tx]) {
	channel := r.PathValue("channel")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		answer(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "the body is over the limit"})
		return
	}
	var msg struct{ ID, From, Name, Text string }
	if err := json.Unmarshal(body, &msg); err != nil || msg.ID == "" {
		answer(w, http.StatusBadRequest, map[string]string{"error": "the body is not JSON with an id"})
		return
	}
	args := DraftArgs{Channel: channel, MessageID: msg.ID, From: msg.From, Name: msg.Name, Text: msg.Text, Body: body}
	res, err := client.Insert(r.Context(), args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
	if err != nil {
		answer(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	out := reply{Status: "accepted", EventKey: channel + ":" + msg.ID, CorrelationID: fmt.Sprintf("%026d", res.Job.ID)}
	status := http.StatusAccepted
	if res.UniqueSkippedAsDuplicate {
		out.Status, status = "duplicate", http.StatusOK
	}
	answer(w, status, out)
}

func answer(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
