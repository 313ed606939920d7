package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// The floor target is the least a server can do and still keep handoff's
// promise for one webhook: recorded once, durable before the answer. It
// stores the raw body under a ULID and the event key in a dedup index — two
// bucket writes, where handoff's ingest transaction makes nine (event, its
// indexes, the lead, the draft job and its queue indexes) — with the same
// bbolt options and a copy of the store's group commit loop (the store's is
// not exported): one committer takes every queued write into one
// transaction, no timer. The store's 512-write cap and its rerun without a
// failed caller are left out; 64 connections and two plain puts never need
// them. It parses nothing but the id and renders no templates.
//
// Measured in the same run as bare and handoff, it shows how much of the gap
// between handoff and the bare server any bbolt design pays on this machine
// (two fdatasyncs per commit), and how much is handoff's own work.

var (
	floorEvents = []byte("events")
	floorKeys   = []byte("keys")
)

// floorFile is the floor target's database inside its data folder.
const floorFile = "floor.db"

type floorWrite struct {
	key, id string
	body    []byte
	done    chan floorResult
}

type floorResult struct {
	correlationID string // the first write's id
	created       bool
	err           error
}

type floorStore struct {
	db      *bolt.DB
	writes  chan *floorWrite
	quit    chan struct{}
	stopped chan struct{}
}

// serveFloor runs the floor target until ctx ends.
func serveFloor(ctx context.Context, addrFile, dataDir string, logw io.Writer) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	db, err := bolt.Open(filepath.Join(dataDir, floorFile), 0o600, &bolt.Options{
		Timeout:         time.Second,
		InitialMmapSize: 1 << 30,
		NoFreelistSync:  false, // as store.Open: the freelist written on every commit
		FreelistType:    bolt.FreelistMapType,
	})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{floorEvents, floorKeys} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return err
	}
	f := &floorStore{db: db, writes: make(chan *floorWrite), quit: make(chan struct{}), stopped: make(chan struct{})}
	go f.commitLoop()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{channel}", f.receive)
	err = serveUntil(ctx, mux, addrFile, slog.New(slog.NewJSONHandler(logw, nil)))
	// Shutdown has waited for every handler, so nothing is queued any more.
	close(f.quit)
	<-f.stopped
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *floorStore) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, []byte(`{"error":"the body is over the limit"}`+"\n"))
		return
	}
	var msg struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.ID == "" {
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":"the body is not a JSON object with an id"}`+"\n"))
		return
	}
	req := &floorWrite{key: r.PathValue("channel") + ":" + msg.ID, id: ulid.Make().String(), body: body, done: make(chan floorResult, 1)}
	select {
	case f.writes <- req:
	case <-f.stopped:
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"error":"stopping"}`+"\n"))
		return
	}
	res := <-req.done
	if res.err != nil {
		writeJSON(w, http.StatusServiceUnavailable, []byte(fmt.Sprintf(`{"error":%q}`+"\n", res.err.Error())))
		return
	}
	status, reply := http.StatusOK, hookReply{Status: "duplicate", EventKey: req.key, CorrelationID: res.correlationID}
	if res.created {
		status, reply.Status = http.StatusAccepted, "accepted"
	}
	out, _ := json.Marshal(reply)
	writeJSON(w, status, append(out, '\n'))
}

// commitLoop is the single writer: it blocks for one write, takes whatever
// else is queued, and commits them together.
func (f *floorStore) commitLoop() {
	defer close(f.stopped)
	var batch []*floorWrite
	for {
		select {
		case w := <-f.writes:
			batch = append(batch[:0], w)
		case <-f.quit:
			return
		}
	drain:
		for {
			select {
			case w := <-f.writes:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		results := make([]floorResult, len(batch))
		err := f.db.Update(func(tx *bolt.Tx) error {
			events, keys := tx.Bucket(floorEvents), tx.Bucket(floorKeys)
			for i, w := range batch {
				if first := keys.Get([]byte(w.key)); first != nil {
					results[i] = floorResult{correlationID: string(first)}
					continue
				}
				if err := events.Put([]byte(w.id), w.body); err != nil {
					return err
				}
				if err := keys.Put([]byte(w.key), []byte(w.id)); err != nil {
					return err
				}
				results[i] = floorResult{correlationID: w.id, created: true}
			}
			return nil
		})
		for i, w := range batch {
			if err != nil {
				results[i] = floorResult{err: err}
			}
			w.done <- results[i]
		}
	}
}
