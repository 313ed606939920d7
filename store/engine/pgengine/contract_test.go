package pgengine_test

import (
	"testing"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/store/storetest"
)

// TestContract runs the engine contract on a schema of a real PostgreSQL server.
func TestContract(t *testing.T) {
	storetest.Contract(t, func(t *testing.T) engine.Engine { return pgtest.Open(t) })
}
