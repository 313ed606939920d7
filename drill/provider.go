package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// lateStore is how long the "late" provider takes to store a message after
// receiving it; the instance's timeout for it is well below.
const lateStore = time.Second

// remote is an outside provider of kind http in the drill process, on
// 127.0.0.1 over real keep-alive connections, for the failures that no
// sandbox inside the binary can show: what the HTTP client under handoff
// does on its own. It serves two behaviours, each under its own path and
// pointed at by its own provider of the instance:
//
//   - /drop/: stores every POST it reads whole at once, answers the first
//     request of a connection with {"id":…}, and closes a reused
//     connection without answering, after accepting the message;
//   - /late/: stores a message lateStore after the request, then answers.
//
// Both look a message up at GET /{behaviour}/messages/{ref}: 200 with its
// id once stored, 404 before. Neither deduplicates, so every POST is a
// message, and every POST after the first for a reference is a repeat.
type remote struct {
	srv  *http.Server
	base string

	mu       sync.Mutex
	seq      int
	msgs     map[string]*remoteMessage // by client_ref
	notFound map[string]int            // lookups answered 404, by behaviour
}

// remoteMessage is what the remote received for one reference.
type remoteMessage struct {
	behaviour string
	id        string // the first POST's id
	posts     int
	dropped   int // POSTs whose connection was closed instead of answering
	stored    bool
}

// connRequests holds, in a request's context, how many requests its
// connection has carried.
type connRequests struct{}

func newRemote() (*remote, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("drill: the outside provider cannot listen: %w", err)
	}
	rm := &remote{base: "http://" + ln.Addr().String(), msgs: map[string]*remoteMessage{}, notFound: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /drop/send", func(w http.ResponseWriter, r *http.Request) { rm.send(w, r, "drop") })
	mux.HandleFunc("POST /late/send", func(w http.ResponseWriter, r *http.Request) { rm.send(w, r, "late") })
	mux.HandleFunc("GET /drop/messages/{ref}", func(w http.ResponseWriter, r *http.Request) { rm.lookup(w, r, "drop") })
	mux.HandleFunc("GET /late/messages/{ref}", func(w http.ResponseWriter, r *http.Request) { rm.lookup(w, r, "late") })
	rm.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connRequests{}, new(atomic.Int64))
		},
	}
	go func() { _ = rm.srv.Serve(ln) }()
	return rm, nil
}

// url is where the instance's provider for behaviour sends.
func (rm *remote) url(behaviour string) string { return rm.base + "/" + behaviour + "/send" }

// lookupURL is that provider's lookup_url.
func (rm *remote) lookupURL(behaviour string) string {
	return rm.base + "/" + behaviour + "/messages/{ref}"
}

// close stops the server; a late handler still sleeping ends on its own.
func (rm *remote) close() { _ = rm.srv.Close() }

func (rm *remote) send(w http.ResponseWriter, r *http.Request, behaviour string) {
	n := r.Context().Value(connRequests{}).(*atomic.Int64).Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // never read whole: not accepted
	}
	var in struct {
		Ref string `json:"client_ref"`
	}
	if json.Unmarshal(body, &in) != nil || in.Ref == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"no client_ref"}`)
		return
	}
	rm.mu.Lock()
	m := rm.msgs[in.Ref]
	if m == nil {
		rm.seq++
		m = &remoteMessage{behaviour: behaviour, id: fmt.Sprintf("remote-%s-%d", behaviour, rm.seq)}
		rm.msgs[in.Ref] = m
	}
	m.posts++
	id := m.id
	if behaviour == "drop" {
		m.stored = true
	}
	rm.mu.Unlock()

	switch behaviour {
	case "drop":
		if n > 1 {
			// Accepted, and the answer never leaves: the client sees its
			// reused connection die before the first answer byte.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				rm.mu.Lock()
				m.dropped++
				rm.mu.Unlock()
				_ = conn.Close()
				return
			}
		}
	case "late":
		// The provider's own slowness, whether or not anyone still waits.
		time.Sleep(lateStore)
		rm.mu.Lock()
		m.stored = true
		rm.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

func (rm *remote) lookup(w http.ResponseWriter, r *http.Request, behaviour string) {
	r.Context().Value(connRequests{}).(*atomic.Int64).Add(1)
	rm.mu.Lock()
	defer rm.mu.Unlock()
	m := rm.msgs[r.PathValue("ref")]
	w.Header().Set("Content-Type", "application/json")
	if m == nil || m.behaviour != behaviour || !m.stored {
		rm.notFound[behaviour]++
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"no such message"}`)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"id": m.id, "status": "sent"})
}

// messages is what the remote received, in the form the sandbox reports
// it: one entry per reference, every POST after the first a repeat.
func (rm *remote) messages() map[string]sandboxMessage {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	out := make(map[string]sandboxMessage, len(rm.msgs))
	for ref, m := range rm.msgs {
		out[ref] = sandboxMessage{Ref: ref, Provider: "remote-" + m.behaviour, ID: m.id, Repeats: m.posts - 1}
	}
	return out
}

// remoteCounts is what the remote saw for some references.
type remoteCounts struct {
	posts, dropped, notFound int
}

// counts sums the POSTs and drops of refs, and the 404 lookups of behaviour.
func (rm *remote) counts(behaviour string, refs []string) remoteCounts {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	c := remoteCounts{notFound: rm.notFound[behaviour]}
	for _, ref := range refs {
		if m := rm.msgs[ref]; m != nil {
			c.posts += m.posts
			c.dropped += m.dropped
		}
	}
	return c
}
