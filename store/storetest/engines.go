package storetest

import (
	"os"
	"testing"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

// EngineEnv names the engine the store's tests run on (one of Engines);
// unset or empty is the first, bbolt.
const EngineEnv = "HANDOFF_TEST_ENGINE"

// Bolt is the name of the bbolt engine, the store's first and default one.
const Bolt = "bolt"

// Postgres is the name of the PostgreSQL engine (store/engine/pgengine).
const Postgres = "postgres"

// An Engine is one engine the store's conformance suite runs on: every
// store test opens its store through Chosen, so an engine added here runs
// the whole suite (HANDOFF_TEST_ENGINE=<name> go test ./store/). The tests
// of the bbolt engine's own file (its pages, freelist, mmap, damage,
// backups and restore by file) are marked as such and skipped on another.
type Engine struct {
	Name string
	// Open makes a new, empty database for one test, open, with its
	// cleanup registered on tb (the store closes the engine first).
	// Nil for bbolt: the store opens its own file in a fresh folder
	// (store.Open), the path every bbolt open takes.
	Open func(tb testing.TB) engine.Engine
}

// Engines is every engine the store's tests can run on.
var Engines = []Engine{
	{Name: Bolt},
	// A new schema of a real PostgreSQL server per test: the one
	// HANDOFF_TEST_DATABASE_URL names, or a private cluster started once
	// per test process (pgtest).
	{Name: Postgres, Open: func(tb testing.TB) engine.Engine { return pgtest.Open(tb) }},
}

// Chosen is the engine EngineEnv names; a name not in Engines fails tb.
func Chosen(tb testing.TB) Engine {
	tb.Helper()
	name := os.Getenv(EngineEnv)
	if name == "" {
		return Engines[0]
	}
	for _, e := range Engines {
		if e.Name == name {
			return e
		}
	}
	tb.Fatalf("%s=%q: no such engine (the engines are in storetest.Engines)", EngineEnv, name)
	return Engine{}
}

// BoltOnly marks a test of the bbolt engine's own file: it is skipped
// when the suite runs on another engine.
func BoltOnly(tb testing.TB) {
	tb.Helper()
	if e := Chosen(tb); e.Name != Bolt {
		tb.Skipf("a test of the bbolt engine's own file; the suite runs on %s", e.Name)
	}
}
