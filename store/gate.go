package store

import (
	"context"
	"errors"
	"sync"
)

// gate lets Replace swap the database file under a running process: every
// transaction passes through it, and Replace closes it, waits for the
// transactions already inside to end, swaps, and opens it again. New
// transactions wait at the gate meanwhile. A reader that would wait
// forever (a transaction that starts another from inside, while a swap
// waits) cannot hold the swap up past its context: the swap gives up and
// reopens the gate.
type gate struct {
	mu     sync.Mutex
	active int
	closed chan struct{} // non-nil while a swap waits or runs; closed when it ends
	idle   chan struct{} // closed when active reaches 0 while a swap waits
}

func (g *gate) enter() {
	for {
		g.mu.Lock()
		if g.closed == nil {
			g.active++
			g.mu.Unlock()
			return
		}
		wait := g.closed
		g.mu.Unlock()
		<-wait
	}
}

func (g *gate) exit() {
	g.mu.Lock()
	g.active--
	if g.active == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
}

// shut closes the gate and waits until no transaction is inside; the
// returned function opens it again. It fails when ctx ends first (the gate
// is open again then), or when another swap holds it.
func (g *gate) shut(ctx context.Context) (func(), error) {
	g.mu.Lock()
	if g.closed != nil {
		g.mu.Unlock()
		return nil, errSwapping
	}
	g.closed = make(chan struct{})
	var idle chan struct{}
	if g.active > 0 {
		idle = make(chan struct{})
		g.idle = idle
	}
	g.mu.Unlock()
	open := func() {
		g.mu.Lock()
		close(g.closed)
		g.closed, g.idle = nil, nil
		g.mu.Unlock()
	}
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			open()
			return nil, ctx.Err()
		}
	}
	return open, nil
}

// errSwapping is a second Replace while one runs.
var errSwapping = errors.New("another restore is running")
