package facts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

var at = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// TestEntries: one entry a line, bullets off, blank and repeated lines
// none; an unchanged line keeps its id in the next version, an edited
// line is a new id, and a removed id is never given again.
func TestEntries(t *testing.T) {
	v1, next := Entries("# Acme\r\n- Open 9–17\n\n* Haircut €35\n• Parking & <free>\n- Open 9–17\n", nil, 0)
	want := []store.FactEntry{{ID: "F1", Text: "# Acme"}, {ID: "F2", Text: "Open 9–17"}, {ID: "F3", Text: "Haircut €35"}, {ID: "F4", Text: "Parking & <free>"}}
	if !reflect.DeepEqual(v1, want) || next != 5 {
		t.Fatalf("entries = %+v next %d, want %+v next 5", v1, next, want)
	}
	v2, next := Entries("# Acme\n- Haircut €40\n- Open 9–17\nمرحبا 😀", v1, next)
	want = []store.FactEntry{{ID: "F1", Text: "# Acme"}, {ID: "F5", Text: "Haircut €40"}, {ID: "F2", Text: "Open 9–17"}, {ID: "F6", Text: "مرحبا 😀"}}
	if !reflect.DeepEqual(v2, want) || next != 7 {
		t.Fatalf("entries of the edit = %+v next %d, want %+v next 7", v2, next, want)
	}
	v3, _ := Entries("Haircut €35", v2, next)
	if v3[0].ID != "F7" {
		t.Errorf("a text removed and written again = %s, want a new id F7 (F3 is never given again)", v3[0].ID)
	}
}

// TestSave: a save is the next version, with ids kept from the one
// before; the same text again makes none; facts too long or not text are
// refused in one sentence and nothing is stored.
func TestSave(t *testing.T) {
	st := testkit.OpenStore(t, "")
	ctx := context.Background()
	body := corpus.TextNamed("fish").Body
	s1, err := Save(ctx, st, Edit{Client: "acme", Text: "- " + body + "\n- Open 9–17", Author: "root", Source: SourceDashboard, At: at})
	if err != nil || !s1.New || s1.Version.Version != 1 || len(s1.Version.Entries) != 2 {
		t.Fatalf("first save = %+v, %v", s1, err)
	}
	again, err := Save(ctx, st, Edit{Client: "acme", Text: "- " + body + "\r\n- Open 9–17\n\n", Author: "eve", Source: SourceAPI, At: at})
	if err != nil || again.New || again.Version.Version != 1 {
		t.Errorf("the same text again = %+v, %v; want version 1, no new version", again, err)
	}
	s2, err := Save(ctx, st, Edit{Client: "acme", Text: "- Open 9–18\n- " + body, Author: "eve", Source: SourceAPI, At: at.Add(time.Minute)})
	if err != nil || s2.Version.Version != 2 || s2.After != 1 {
		t.Fatalf("second save = %+v, %v", s2, err)
	}
	if e := s2.Version.Entries; e[0].ID != "F3" || e[1].ID != "F1" || e[1].Text != body {
		t.Errorf("entries of version 2 = %+v, want F3 (new) and F1 (kept)", e)
	}
	for _, tc := range []struct{ text, want string }{
		{strings.Repeat("é", config.MaxFacts/2+1), fmt.Sprintf("the facts are %d bytes; at most %d go into a prompt", config.MaxFacts+2, config.MaxFacts)},
		{"Open \xff", "not UTF-8 text"},
	} {
		_, err := Save(ctx, st, Edit{Client: "acme", Text: tc.text, Author: "root", Source: SourceDashboard, At: at})
		var te *TextError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("save of bad facts = %v, want a TextError saying %q", err, tc.want)
		}
	}
	if v, _, _ := Current(st, "acme"); v.Version != 2 {
		t.Errorf("current after the refusals = %d, want 2", v.Version)
	}
}

// TestSaveTogether: admins saving at once each get a version of their
// own, none lost, the numbers 1…n each once, every text kept (-race).
func TestSaveTogether(t *testing.T) {
	st := testkit.OpenStore(t, "")
	const n = 16
	got := make([]Saved, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		got[i], errs[i] = Save(context.Background(), st, Edit{Client: "acme", Text: fmt.Sprintf("- Open 9–17\n- admin %d says € %d & <b>bold</b> 😀", i, 30+i), Author: fmt.Sprintf("admin%d", i), Source: SourceDashboard, At: at})
	})
	var nums []int
	for i, s := range got {
		if errs[i] != nil || !s.New {
			t.Fatalf("admin %d: %+v, %v", i, s, errs[i])
		}
		nums = append(nums, s.Version.Version)
	}
	slices.Sort(nums)
	for i, v := range nums {
		if v != i+1 {
			t.Fatalf("version numbers %v, want 1…%d each once", nums, n)
		}
	}
	h, err := History(st, "acme")
	if err != nil || len(h) != n {
		t.Fatalf("history: %d versions, %v; want %d", len(h), err, n)
	}
	texts := map[string]bool{}
	ids := map[string]string{}
	for _, v := range h {
		texts[v.Text] = true
		for _, e := range v.Entries {
			if prev, ok := ids[e.ID]; ok && prev != e.Text {
				t.Errorf("id %s names %q and %q", e.ID, prev, e.Text)
			}
			ids[e.ID] = e.Text
		}
	}
	for i := range n {
		if !texts[fmt.Sprintf("- Open 9–17\n- admin %d says € %d & <b>bold</b> 😀", i, 30+i)] {
			t.Errorf("admin %d's text was lost", i)
		}
	}
}

// TestSeed: the facts_file is version 1 of a client without facts; read
// again unchanged it does nothing; changed while nobody edited, it is the
// next version (emptied too); changed after an edit on the dashboard, the
// edit stays and the file's text is offered, until an admin reads it
// (Reload); a facts_file taken out of the config leaves the facts.
func TestSeed(t *testing.T) {
	st := testkit.OpenStore(t, "")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "acme.md")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	seed := func(text string, want Outcome, version int) {
		t.Helper()
		out, v, err := Seed(ctx, st, "acme", path, text, at)
		if err != nil || out != want || v.Version != version {
			t.Fatalf("seed %q = %s v%d, %v; want %s v%d", text, out, v.Version, err, want, version)
		}
	}
	seed("- Open 9–17", Seeded, 1)
	seed("- Open 9–17", Unchanged, 1)
	seed("- Open 9–18", Updated, 2)
	if v, _, _ := Current(st, "acme"); v.Author != "config" || v.Source != SourceConfig || v.File != path {
		t.Errorf("a version from the file = %+v", v)
	}
	if _, err := Save(ctx, st, Edit{Client: "acme", Text: "- Open 9–18\n- Haircut €35", Author: "root", Source: SourceDashboard, At: at}); err != nil {
		t.Fatal(err)
	}
	seed("- Open 9–18", Unchanged, 3) // the file as last read: the edit stands
	seed("- Open 10–18", Offered, 3)
	if f, ok, err := Offer(st, "acme"); err != nil || !ok || f.Text != "- Open 10–18" {
		t.Errorf("offer = %+v %v %v, want the file's new text", f, ok, err)
	}
	seed("- Open 10–18", Unchanged, 3) // offered once, not again
	write("- Open 10–18\n- Haircut €35\n")
	s, err := Reload(ctx, st, "acme", path, "root", at, nil)
	if err != nil || s.Version.Version != 4 || s.Version.Source != SourceFile || s.Version.Author != "root" {
		t.Fatalf("reload = %+v, %v", s, err)
	}
	if _, ok, _ := Offer(st, "acme"); ok {
		t.Error("the offer stays after the file was read")
	}
	seed("", Updated, 5) // a file emptied says the client has no facts now
	if v, _, _ := Current(st, "acme"); v.Version != 5 || len(v.Entries) != 0 {
		t.Errorf("current = %+v, want version 5 without entries", v)
	}
	if out, _, _ := Seed(ctx, st, "acme", "", "", at); out != NoFile {
		t.Errorf("no facts_file = %s", out)
	}
	if v, _, _ := Current(st, "acme"); v.Version != 5 {
		t.Errorf("current after the facts_file left the config = %d, want 5", v.Version)
	}
	write(strings.Repeat("x", config.MaxFacts+1))
	if _, err := Reload(ctx, st, "acme", path, "root", at, nil); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("reload of a file too long = %v", err)
	}
}

// TestDiff: a line diff, an edited line one removed and one added.
func TestDiff(t *testing.T) {
	got := Diff("# Acme\nOpen 9–17\nHaircut €35", "# Acme\nOpen 9–18\nHaircut €35\nمرحبا 😀\n")
	want := []Line{{' ', "# Acme"}, {'-', "Open 9–17"}, {'+', "Open 9–18"}, {' ', "Haircut €35"}, {'+', "مرحبا 😀"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff = %q, want %q", got, want)
	}
	if a, r := Changed(got); a != 2 || r != 1 {
		t.Errorf("changed = +%d -%d", a, r)
	}
	if got := Diff("", "a"); !reflect.DeepEqual(got, []Line{{'+', "a"}}) {
		t.Errorf("from nothing = %q", got)
	}
}
