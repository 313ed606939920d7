package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit/corpus"
)

// TestAuditPages: the audit log reads a page at a time, newest first, on
// a real file: pages follow one another without a gap or a repeat to the
// end, a filter by who, by action or by a part of the target or detail
// (accents and case aside) keeps only its entries across pages, and a
// scan bound ends a page early with where to go on.
func TestAuditPages(t *testing.T) {
	st := openTest(t)
	texts := corpus.Texts()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var ids []string // oldest first
	for i := range 25 {
		e := AuditEntry{At: at.Add(time.Duration(i) * time.Minute), Who: []string{"ann", "Bob"}[i%2], Action: []string{"approve", "reject", "close"}[i%3],
			Target: fmt.Sprintf("draft-%02d", i), Detail: texts[i%len(texts)].Body, From: "127.0.0.1"}
		if i == 7 {
			e.Detail = "closed for Zoë Müller"
		}
		if err := st.Audit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	all, err := st.AuditLog(100)
	if err != nil || len(all) != 25 {
		t.Fatalf("AuditLog = %d entries, %v", len(all), err)
	}
	for i := len(all) - 1; i >= 0; i-- {
		ids = append(ids, all[i].ID)
	}

	var got []string
	before, pages := "", 0
	for {
		p, err := st.AuditPageOf(AuditFilter{Before: before, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range p.Entries {
			got = append(got, e.ID)
		}
		if p.Next == "" {
			break
		}
		before = p.Next
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
	}
	if pages != 3 || len(got) != 25 {
		t.Fatalf("%d pages, %d entries; want 3 pages of 10, 10, 5", pages, len(got))
	}
	for i, id := range got {
		if want := ids[len(ids)-1-i]; id != want {
			t.Fatalf("entry %d of the pages is %s; want %s (newest first, no gap, no repeat)", i, id, want)
		}
	}

	count := func(f AuditFilter) (n int, each func(AuditEntry) bool) {
		t.Helper()
		f.Limit = 4
		for {
			p, err := st.AuditPageOf(f)
			if err != nil {
				t.Fatal(err)
			}
			n += len(p.Entries)
			for _, e := range p.Entries {
				if each != nil && !each(e) {
					t.Errorf("filter %+v let through %+v", f, e)
				}
			}
			if p.Next == "" {
				return n, nil
			}
			f.Before = p.Next
		}
	}
	if n, _ := count(AuditFilter{Who: "bob"}); n != 12 {
		t.Errorf("who=bob: %d entries; want 12 (case aside)", n)
	}
	if n, _ := count(AuditFilter{Who: "ann", Action: "close"}); n != 4 {
		t.Errorf("who=ann action=close: %d entries; want 4", n)
	}
	if n, _ := count(AuditFilter{Text: "zoe muller"}); n != 1 {
		t.Errorf("text 'zoe muller': %d entries; want the one about Zoë Müller", n)
	}
	if n, _ := count(AuditFilter{Text: "draft-1"}); n != 10 {
		t.Errorf("text draft-1: %d entries; want draft-10 to draft-19", n)
	}

	// A scan bound: who=nobody reads 6 entries a page, finds none, and
	// says where to go on until the log ends.
	p, err := st.AuditPageOf(AuditFilter{Who: "nobody", Limit: 10, Scan: 6})
	if err != nil || len(p.Entries) != 0 || !p.Partial || p.Next != ids[len(ids)-6] || p.Scanned != 6 {
		t.Errorf("a bounded scan = %+v, %v; want no entries, partial, next %s", p, err, ids[len(ids)-6])
	}
	// An id that is not in the log still places the page.
	p, err = st.AuditPageOf(AuditFilter{Before: ids[3] + "0", Limit: 100})
	if err != nil || len(p.Entries) != 4 || p.Entries[0].ID != ids[3] || p.Next != "" {
		t.Errorf("before a key between entries: %d entries, next %q, %v; want the 4 oldest, from %s", len(p.Entries), p.Next, err, ids[3])
	}
}
