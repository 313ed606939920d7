package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// journal is the run's resume state: one JSON line per finished turn,
// each appended and fsynced before the next is counted, so that a run
// killed at any moment resumes without drafting a finished turn again. A
// line the kill cut short (no newline at its end) is cut off at the open;
// it was never counted.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

// openJournal opens (creating) the journal at path and returns the turns
// it holds by draft id.
func openJournal(path string) (*journal, map[string]Turn, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("eval: open the journal: %w", err)
	}
	// The file's name is made durable too, so that a power cut cannot
	// lose the lines fsynced into it.
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("eval: sync the output folder: %w", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("eval: read the journal: %w", err)
	}
	done := map[string]Turn{}
	whole := bytes.LastIndexByte(raw, '\n') + 1 // the lines that ended
	for n, line := range bytes.Split(raw[:whole], []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var t Turn
		if err := decodeStrict(line, &t); err != nil || t.DraftID == "" {
			f.Close()
			return nil, nil, fmt.Errorf("eval: line %d of %s cannot be read (%v): give another --out folder, or delete that line to draft its turn again", n+1, path, err)
		}
		done[t.DraftID] = t
	}
	if whole < len(raw) {
		if err := f.Truncate(int64(whole)); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("eval: cut the journal's unfinished last line: %w", err)
		}
	}
	if _, err := f.Seek(int64(whole), 0); err != nil {
		f.Close()
		return nil, nil, err
	}
	return &journal{f: f}, done, nil
}

// append writes t as one line and fsyncs it.
func (j *journal) append(t Turn) error {
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("eval: encode turn %s: %w", t.DraftID, err)
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("eval: append to the journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("eval: sync the journal: %w", err)
	}
	return nil
}

func (j *journal) close() error { return j.f.Close() }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
