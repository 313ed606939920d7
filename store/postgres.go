package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
)

// OpenURL opens the store on the PostgreSQL database at url (experimental,
// issue 33's first step: serve's database_url) and migrates it, as Open
// does a file. Unless read-only the engine is exclusive, as a bbolt file
// is: while this store is open, another OpenURL of the same database and
// schema fails in one sentence, since serve's start-up reaps every
// running job as its own. What only a bbolt file has (the page walk,
// restore by rename) is absent: Replace answers so.
func OpenURL(ctx context.Context, url string, opts Options) (*Store, error) {
	db, err := pgengine.Open(ctx, url, pgengine.Options{Exclusive: !opts.ReadOnly})
	if errors.Is(err, engine.ErrLocked) {
		return nil, fmt.Errorf("store: %w (is a server running?)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open the PostgreSQL database: %w", err)
	}
	return openOn(db, "PostgreSQL schema "+db.Schema(), opts.ReadOnly)
}
