package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

var argsT0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// keyedArgs are args whose key is the job's Key, left out of the payload,
// with one field beside it: the shape of every kind's args.
type keyedArgs struct {
	Name    string `json:"-"`
	Version int    `json:"version,omitempty"`
}

func (keyedArgs) Kind() string       { return "keyed" }
func (a keyedArgs) Key() string      { return a.Name }
func (a *keyedArgs) SetKey(k string) { a.Name = k }

// otherArgs are args of another kind, with nothing but a key.
type otherArgs struct {
	ID string `json:"-"`
}

func (otherArgs) Kind() string       { return "other" }
func (a otherArgs) Key() string      { return a.ID }
func (a *otherArgs) SetKey(k string) { a.ID = k }

// enqueueArgs enqueues args in one transaction through Enqueue.
func enqueueArgs(t *testing.T, st *store.Store, args Args, o Opts) (store.Job, bool) {
	t.Helper()
	var (
		j       store.Job
		created bool
	)
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		var err error
		j, created, err = Enqueue(tx, args, o)
		return err
	})
	if err != nil {
		t.Fatalf("Enqueue(%+v): %v", args, err)
	}
	return j, created
}

// TestEnqueueDecode: typed arguments go in under their kind and key and
// come back out as they went in; the key is the job's Key, not repeated
// in its payload, and arguments with nothing but a key store no payload.
func TestEnqueueDecode(t *testing.T) {
	tests := []struct {
		name        string
		args        Args
		wantKind    string
		wantKey     string
		wantPayload string
	}{
		{"key only", keyedArgs{Name: "web:m-1"}, "keyed", "web:m-1", ""},
		{"key and field", keyedArgs{Name: "web:m-2", Version: 3}, "keyed", "web:m-2", `{"version":3}`},
		{"other kind", otherArgs{ID: "conv-1:d-1"}, "other", "conv-1:d-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			j, created := enqueueArgs(t, st, tt.args, Opts{MaxAttempts: 3, CorrelationID: "corr", Now: argsT0})
			if !created || j.Kind != tt.wantKind || j.Key != tt.wantKey || string(j.Payload) != tt.wantPayload || j.MaxAttempts != 3 || j.CorrelationID != "corr" {
				t.Fatalf("job %+v created %v, want kind %s key %s payload %q", j, created, tt.wantKind, tt.wantKey, tt.wantPayload)
			}
			var got Args
			var err error
			switch tt.args.(type) {
			case keyedArgs:
				got, err = Decode[keyedArgs](j)
			case otherArgs:
				got, err = Decode[otherArgs](j)
			}
			if err != nil || got != tt.args {
				t.Errorf("Decode = %+v, %v; want %+v", got, err, tt.args)
			}
		})
	}
}

// TestEnqueueKeepsOneLiveJobPerKey: the business key stays the unique key:
// a second enqueue for the same kind and key returns the live job, one of
// another kind on the same key is a job of its own.
func TestEnqueueKeepsOneLiveJobPerKey(t *testing.T) {
	st := openStore(t)
	first, _ := enqueueArgs(t, st, keyedArgs{Name: "web:m-1"}, Opts{Now: argsT0})
	again, created := enqueueArgs(t, st, keyedArgs{Name: "web:m-1", Version: 2}, Opts{Now: argsT0})
	if created || again.ID != first.ID {
		t.Errorf("second keyed job for web:m-1: created %v id %s, want the live job %s", created, again.ID, first.ID)
	}
	other, created := enqueueArgs(t, st, otherArgs{ID: "web:m-1"}, Opts{Now: argsT0})
	if !created || other.ID == first.ID {
		t.Errorf("other job on the same key: created %v id %s, want a new job", created, other.ID)
	}
}

// TestDecodeRefuses: a payload that does not decode, or a job of another
// kind, is a Discard: running it again cannot help.
func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		job  store.Job
	}{
		{"bad payload", store.Job{ID: "j1", Kind: "keyed", Key: "web:m-1", Payload: []byte(`{"version":"two"}`)}},
		{"other kind", store.Job{ID: "j2", Kind: "other", Key: "web:m-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var discard *Discard
			if _, err := Decode[keyedArgs](tt.job); !errors.As(err, &discard) {
				t.Errorf("Decode[keyedArgs](%+v) = %v, want a *Discard", tt.job, err)
			}
		})
	}
}
