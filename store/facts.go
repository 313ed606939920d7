package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// A client's facts (hours, prices, policies: what its drafts may state)
// are kept as numbered versions, each written once and never changed, so
// a draft can say which version it was written from and a person can see
// what changed between two:
//
//	facts        client id 0x00 version (4 bytes BE) -> FactsVersion JSON
//	facts_files  client id -> FactsFile JSON (the facts_file text last read)
//
// The rules (entries and their ids, seeding from the config, what a
// changed facts_file does) are the facts package's; the store keeps the
// records and refuses a version that is not the next number. Both buckets
// are created by the first record written (a file without them has no
// facts; reads find nothing), as push_tokens is: a backup from before them
// still verifies, so no migration and no schema version.
var (
	bucketFacts      = []byte("facts")
	bucketFactsFiles = []byte("facts_files")
)

// FactsVersion is one version of a client's facts.
type FactsVersion struct {
	V       int    `json:"v"`
	Client  string `json:"client"`
	Version int    `json:"version"` // 1, 2, …: the client's versions in the order they were written
	// Text is the facts as written; Entries the facts one by one, each
	// with the id a draft cites it by.
	Text    string      `json:"text"`
	Entries []FactEntry `json:"entries,omitempty"`
	// NextID is the number the next new entry of the client gets: an id
	// is never given to another text, in this version or a later one.
	NextID int `json:"next_id"`
	// Author is who wrote it: a person's name, or "config" for a
	// facts_file read at start.
	Author string `json:"author"`
	// Source is where it came from: "config" (facts_file read at start),
	// "facts_file" (read again from the dashboard), "dashboard", "api".
	Source string `json:"source"`
	// File is the facts_file a version read from a file came from.
	File      string    `json:"file,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// FactEntry is one fact of a version: its id ("F3") and its text.
type FactEntry struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// FactsFile is the text of a client's facts_file as last read (at start,
// or from the dashboard), so that a changed file is noticed once.
type FactsFile struct {
	V      int       `json:"v"`
	Client string    `json:"client"`
	Path   string    `json:"path"`
	Text   string    `json:"text"`
	ReadAt time.Time `json:"read_at"`
	// Version is the facts version made of this text; 0 while it is only
	// offered (the current version was edited by a person, so the file's
	// text waits for an admin to adopt it).
	Version int `json:"version,omitempty"`
}

// VersionError refuses a facts version that is not the client's next.
type VersionError struct {
	Client     string
	Got, After int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("store: facts version %d of client %s is not the next one (the latest is %d)", e.Got, e.Client, e.After)
}

func factsKey(client string, version int) []byte {
	k := make([]byte, 0, len(client)+5)
	k = append(append(k, client...), 0)
	return binary.BigEndian.AppendUint32(k, uint32(version))
}

func (tx *Tx) factsBucket(name []byte, write bool) (engine.Bucket, error) {
	if b := tx.bucket(name); b != nil || !write {
		return b, nil
	}
	b, err := tx.tx.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return b, nil
}

// InsertFacts writes v, which must be the client's next version (1 when it
// has none): a version is never rewritten.
func (tx *Tx) InsertFacts(v FactsVersion) error {
	if v.Client == "" || v.Version < 1 || v.CreatedAt.IsZero() {
		return errors.New("store: a facts version needs its client, a number from 1 and a time")
	}
	latest, err := tx.LatestFacts(v.Client)
	switch {
	case errors.Is(err, ErrNotFound):
		latest = FactsVersion{}
	case err != nil && !tx.Skip(err):
		return err
	case err != nil: // the latest cannot be read: its number still counts
		latest.Version = tx.latestFactsNumber(v.Client)
	}
	if v.Version != latest.Version+1 {
		return &VersionError{Client: v.Client, Got: v.Version, After: latest.Version}
	}
	b, err := tx.factsBucket(bucketFacts, true)
	if err != nil {
		return err
	}
	v.V = recordVersion
	return putJSON(b, factsKey(v.Client, v.Version), v)
}

// latestFactsNumber is the number of the client's last stored version,
// from its key alone; 0 when it has none.
func (tx *Tx) latestFactsNumber(client string) int {
	b, _ := tx.factsBucket(bucketFacts, false)
	if b == nil {
		return 0
	}
	k, _ := lastFacts(b.Cursor(), client)
	if k == nil {
		return 0
	}
	return int(binary.BigEndian.Uint32(k[len(k)-4:]))
}

// lastFacts is the key and value of the client's last version, nil when
// it has none.
func lastFacts(c engine.Cursor, client string) ([]byte, []byte) {
	prefix := append([]byte(client), 0)
	k, v := c.Seek(append([]byte(client), 1)) // the first key past the client's
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+4 {
		return nil, nil
	}
	return k, v
}

// FactsVersion reads version n of client's facts; ErrNotFound when it
// has no such version.
func (tx *Tx) FactsVersion(client string, n int) (FactsVersion, error) {
	b, _ := tx.factsBucket(bucketFacts, false)
	if b == nil || n < 1 {
		return FactsVersion{}, ErrNotFound
	}
	return readFacts(factsKey(client, n), b.Get(factsKey(client, n)))
}

func readFacts(k, raw []byte) (FactsVersion, error) {
	if raw == nil {
		return FactsVersion{}, ErrNotFound
	}
	var v FactsVersion
	if err := decode(raw, &v); err != nil {
		return FactsVersion{}, unreadableOf("facts version", []byte(factsName(k)), err)
	}
	return v, nil
}

// factsName is a facts key as a person reads it: "acme/3".
func factsName(k []byte) string {
	i := bytes.IndexByte(k, 0)
	if i < 0 || len(k) != i+5 {
		return fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("%s/%d", k[:i], binary.BigEndian.Uint32(k[i+1:]))
}

// LatestFacts reads client's newest facts version; ErrNotFound when it
// has none.
func (tx *Tx) LatestFacts(client string) (FactsVersion, error) {
	b, _ := tx.factsBucket(bucketFacts, false)
	if b == nil {
		return FactsVersion{}, ErrNotFound
	}
	k, raw := lastFacts(b.Cursor(), client)
	if k == nil {
		return FactsVersion{}, ErrNotFound
	}
	return readFacts(k, raw)
}

// FactsHistory is client's facts versions, newest first, at most limit
// (an unreadable one is stepped over and listed with the store's).
func (tx *Tx) FactsHistory(client string, limit int) ([]FactsVersion, error) {
	b, _ := tx.factsBucket(bucketFacts, false)
	if b == nil {
		return nil, nil
	}
	prefix := append([]byte(client), 0)
	var out []FactsVersion
	c := b.Cursor()
	k, raw := lastFacts(c, client)
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, raw = c.Prev() {
		if len(k) != len(prefix)+4 {
			continue
		}
		v, err := readFacts(k, raw)
		if err != nil {
			tx.skip(err, nil)
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// FactsFile reads the facts_file text last read for client; ErrNotFound
// when none was.
func (tx *Tx) FactsFile(client string) (FactsFile, error) {
	b, _ := tx.factsBucket(bucketFactsFiles, false)
	if b == nil {
		return FactsFile{}, ErrNotFound
	}
	raw := b.Get([]byte(client))
	if raw == nil {
		return FactsFile{}, ErrNotFound
	}
	var f FactsFile
	if err := decode(raw, &f); err != nil {
		return FactsFile{}, unreadableOf("facts file", []byte(client), err)
	}
	return f, nil
}

// PutFactsFile records f as the client's facts_file last read.
func (tx *Tx) PutFactsFile(f FactsFile) error {
	if f.Client == "" {
		return errors.New("store: a facts file needs its client")
	}
	b, err := tx.factsBucket(bucketFactsFiles, true)
	if err != nil {
		return err
	}
	f.V = recordVersion
	return putJSON(b, []byte(f.Client), f)
}

// checkFacts proves the facts versions: each key is a client and a
// number, its record says the same, each client's numbers run from 1
// without a gap, and no version gives one id to two entries; a facts
// file's record names its key's client. A record that does not decode
// strictly is unreadable, not damage.
func checkFacts(tx *Tx, r *checking) []error {
	var problems []error
	if b := tx.bucket(bucketFacts); b != nil {
		last := map[string]int{}
		_ = b.ForEach(func(k, raw []byte) error {
			i := bytes.IndexByte(k, 0)
			if i <= 0 || len(k) != i+5 {
				problems = append(problems, fmt.Errorf("check: facts key %q is not a client and a version", k))
				return nil
			}
			client, n := string(k[:i]), int(binary.BigEndian.Uint32(k[i+1:]))
			if n != last[client]+1 {
				problems = append(problems, fmt.Errorf("check: facts version %d of client %s follows version %d", n, client, last[client]))
			}
			last[client] = n
			var v FactsVersion
			if err := unmarshal(raw, &v, true); err != nil {
				r.unreadable = append(r.unreadable, Unreadable{Kind: "facts version", ID: fmt.Sprintf("%s/%d", client, n), Reason: clip(err.Error())})
				return nil
			}
			if v.Client != client || v.Version != n {
				problems = append(problems, fmt.Errorf("check: facts version %d of client %s says it is version %d of %s", n, client, v.Version, v.Client))
			}
			ids := map[string]bool{}
			for _, e := range v.Entries {
				if ids[e.ID] {
					problems = append(problems, fmt.Errorf("check: facts version %d of client %s gives the id %s to two entries", n, client, e.ID))
				}
				ids[e.ID] = true
			}
			return nil
		})
	}
	if b := tx.bucket(bucketFactsFiles); b != nil {
		_ = b.ForEach(func(k, raw []byte) error {
			var f FactsFile
			if err := unmarshal(raw, &f, true); err != nil {
				r.unreadable = append(r.unreadable, Unreadable{Kind: "facts file", ID: string(k), Reason: clip(err.Error())})
				return nil
			}
			if f.Client != string(k) {
				problems = append(problems, fmt.Errorf("check: the facts file of client %s names client %s", k, f.Client))
			}
			return nil
		})
	}
	return problems
}
