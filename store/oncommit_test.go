package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestOnCommitFiresForTheCommittedRunOnly: a round in which one caller
// fails is rolled back and run again without it, so the other callers'
// functions run twice; what they register with tx.OnCommit fires once
// each, for the run that committed, and never for the failed caller.
func TestOnCommitFiresForTheCommittedRunOnly(t *testing.T) {
	st := openTest(t)
	fail := []bool{false, true, false, false}
	runs := make([]int, len(fail))
	fired := make([][]int, len(fail)) // the run number each firing came from
	batch := make([]*writeReq, len(fail))
	for i, f := range fail {
		batch[i] = &writeReq{done: make(chan error, 1), fn: func(tx *Tx) error {
			runs[i]++
			run := runs[i]
			tx.OnCommit(func() { fired[i] = append(fired[i], run) })
			if err := tx.bucket(bucketMeta).Put(fmt.Appendf(nil, "oncommit-%d", i), []byte("x")); err != nil {
				return err
			}
			if f {
				return errCaller
			}
			return nil
		}}
	}
	st.commit(slices.Clone(batch))
	for i, f := range fail {
		err := <-batch[i].done
		switch {
		case f:
			if !errors.Is(err, errCaller) || len(fired[i]) != 0 {
				t.Errorf("caller %d (fails): answer %v, fired %v; want its error and nothing fired", i, err, fired[i])
			}
		case err != nil:
			t.Errorf("caller %d: answer %v, want nil", i, err)
		case i == 0 && runs[i] != 2:
			t.Errorf("caller %d ran %d times, want 2 (its round was rolled back and run again)", i, runs[i])
		case len(fired[i]) != 1 || fired[i][0] != runs[i]:
			t.Errorf("caller %d ran %d times and fired for runs %v, want once, for its last run", i, runs[i], fired[i])
		}
	}
}
