package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFactsVersions: versions read back as written, per client (a client
// whose id is another's prefix keeps its own), newest first in the
// history; only the next number is taken, so a version is never
// rewritten; the facts_file record reads back too.
func TestFactsVersions(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	mk := func(client string, n int, text string) FactsVersion {
		return FactsVersion{Client: client, Version: n, Text: text, Entries: []FactEntry{{ID: "F1", Text: text}}, NextID: 2, Author: "root", Source: "dashboard", CreatedAt: at.Add(time.Duration(n) * time.Minute)}
	}
	vs := []FactsVersion{mk("acme", 1, "Open 9–17 & <b>Sat</b>"), mk("acme-2", 1, "مرحبا 😀"), mk("acme", 2, "Haircut €35\n\"quoted\" \\ slash")}
	for _, v := range vs {
		if err := st.Update(ctx, func(tx *Tx) error { return tx.InsertFacts(v) }); err != nil {
			t.Fatalf("insert %s v%d: %v", v.Client, v.Version, err)
		}
	}
	for _, bad := range []FactsVersion{mk("acme", 2, "again"), mk("acme", 4, "a gap"), mk("acme-2", 3, "a gap")} {
		err := st.Update(ctx, func(tx *Tx) error { return tx.InsertFacts(bad) })
		var ve *VersionError
		if !errors.As(err, &ve) {
			t.Errorf("insert %s v%d = %v, want a VersionError", bad.Client, bad.Version, err)
		}
	}
	err := st.View(func(tx *Tx) error {
		latest, err := tx.LatestFacts("acme")
		if err != nil {
			return err
		}
		want := vs[2]
		want.V = recordVersion
		if !reflect.DeepEqual(latest, want) {
			t.Errorf("latest of acme = %+v, want %+v", latest, want)
		}
		if v, err := tx.FactsVersion("acme-2", 1); err != nil || v.Text != "مرحبا 😀" {
			t.Errorf("acme-2 v1 = %+v, %v", v, err)
		}
		if _, err := tx.LatestFacts("acm"); !errors.Is(err, ErrNotFound) {
			t.Errorf("latest of a client without facts = %v, want ErrNotFound", err)
		}
		if _, err := tx.FactsVersion("acme", 3); !errors.Is(err, ErrNotFound) {
			t.Errorf("a version not written = %v, want ErrNotFound", err)
		}
		h, err := tx.FactsHistory("acme", 10)
		if err != nil || len(h) != 2 || h[0].Version != 2 || h[1].Version != 1 {
			t.Errorf("history of acme = %+v, %v; want versions 2 then 1", h, err)
		}
		if h, _ := tx.FactsHistory("acme", 1); len(h) != 1 || h[0].Version != 2 {
			t.Errorf("history limited to 1 = %+v", h)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := FactsFile{Client: "acme", Path: "/etc/handoff/acme.md", Text: "Open 9–17", ReadAt: at, Version: 1}
	if err := st.Update(ctx, func(tx *Tx) error { return tx.PutFactsFile(f) }); err != nil {
		t.Fatal(err)
	}
	var got FactsFile
	if err := st.View(func(tx *Tx) (err error) { got, err = tx.FactsFile("acme"); return err }); err != nil {
		t.Fatal(err)
	}
	f.V = recordVersion
	if got != f {
		t.Errorf("facts file = %+v, want %+v", got, f)
	}
}

// TestFactsOnAFileWithout: a store that never had facts (no bucket) reads
// none, and is writable then.
func TestFactsOnAFileWithout(t *testing.T) {
	st := openTest(t)
	err := st.View(func(tx *Tx) error {
		if _, err := tx.LatestFacts("default"); !errors.Is(err, ErrNotFound) {
			t.Errorf("latest = %v", err)
		}
		if h, err := tx.FactsHistory("default", 10); err != nil || len(h) != 0 {
			t.Errorf("history = %v, %v", h, err)
		}
		if _, err := tx.FactsFile("default"); !errors.Is(err, ErrNotFound) {
			t.Errorf("facts file = %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckFacts: Check finds a facts version under another's key, a gap
// in a client's numbers and an id given twice; a record that does not
// decode is unreadable.
func TestCheckFacts(t *testing.T) {
	for _, tc := range []struct {
		name string
		put  func(tx *Tx) error
		want string
	}{
		{"another's key", func(tx *Tx) error {
			b, _ := tx.factsBucket(bucketFacts, true)
			return putJSON(b, factsKey("acme", 1), FactsVersion{V: 1, Client: "bolt", Version: 1, CreatedAt: time.Now()})
		}, "says it is version 1 of bolt"},
		{"a gap", func(tx *Tx) error {
			b, _ := tx.factsBucket(bucketFacts, true)
			return putJSON(b, factsKey("acme", 2), FactsVersion{V: 1, Client: "acme", Version: 2, CreatedAt: time.Now()})
		}, "follows version 0"},
		{"an id twice", func(tx *Tx) error {
			return tx.InsertFacts(FactsVersion{Client: "acme", Version: 1, Entries: []FactEntry{{ID: "F1", Text: "a"}, {ID: "F1", Text: "b"}}, CreatedAt: time.Now()})
		}, "gives the id F1 to two entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t)
			if err := st.Update(context.Background(), tc.put); err != nil {
				t.Fatal(err)
			}
			rep, err := st.Inspect()
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0].Error(), tc.want) {
				t.Errorf("damaged = %v, want %q", rep.Damaged, tc.want)
			}
			// Put it right, so the cleanup's check passes.
			if err := st.Update(context.Background(), func(tx *Tx) error { return tx.tx.DeleteBucket(bucketFacts) }); err != nil {
				t.Fatal(err)
			}
		})
	}
	st := openTest(t)
	if err := st.Update(context.Background(), func(tx *Tx) error {
		b, _ := tx.factsBucket(bucketFactsFiles, true)
		return b.Put([]byte("acme"), []byte(`{"v":1,"client":"acme","surprise":true}`))
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := st.Inspect()
	if err != nil || len(rep.Unreadable) != 1 || rep.Unreadable[0].Kind != "facts file" {
		t.Errorf("inspect = %+v, %v; want the facts file unreadable", rep, err)
	}
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.tx.DeleteBucket(bucketFactsFiles) }); err != nil {
		t.Fatal(err)
	}
}
