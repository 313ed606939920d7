package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// bareReply is about the size of handoff's answer, so both targets write the
// same number of response bytes and the difference is only the work behind.
var bareReply = []byte(`{"status":"accepted","event_key":"demo:m001-000000000","correlation_id":"00000000000000000000000000"}` + "\n")

// serveBare is the baseline target: the same HTTP stack a Go service starts
// from, reading the whole body and answering 202, storing nothing. It runs in
// its own process so that the load generator competes with it for CPU exactly
// as it competes with handoff.
func serveBare(ctx context.Context, addrFile string, logw io.Writer) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{channel}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBodySize)); err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, []byte(`{"error":"the body is over the limit"}`+"\n"))
			return
		}
		writeJSON(w, http.StatusAccepted, bareReply)
	})
	return serveUntil(ctx, mux, addrFile, slog.New(slog.NewJSONHandler(logw, nil)))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// serveUntil serves mux (plus GET /readyz) on a free loopback port until ctx
// ends. It writes the address to addrFile and logs the line handoff logs, so
// the parent finds every target one way.
func serveUntil(ctx context.Context, mux *http.ServeMux, addrFile string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	addr := ln.Addr().String()
	if addrFile != "" {
		// Written then renamed, so a reader never sees half an address.
		tmp := filepath.Join(filepath.Dir(addrFile), "."+filepath.Base(addrFile)+".tmp")
		if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
			ln.Close()
			return err
		}
		if err := os.Rename(tmp, addrFile); err != nil {
			ln.Close()
			return err
		}
	}
	log.Info("listening", "addr", addr)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}
