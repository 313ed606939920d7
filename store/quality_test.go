package store

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store/engine"
)

func qualityOf(t *testing.T, st *Store, v Visible, since time.Time) []string {
	t.Helper()
	fs, err := st.QualityFigures(v, since)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s %s: guarded %d language %d figures %d measured %d distance %.3f reasons %v",
			f.Day, f.Channel, f.PromptVersion, f.Guarded, f.LanguageFlags, f.FigureFlags, f.Measured, f.DistanceSum, f.Reasons))
	}
	return out
}

// TestQualityFiguresMoveWithTheDrafts: guards stored on a draft, a
// person's approval with its distance and reason, a rejection's reason, an
// undo and a delete each move the quality figures in their own
// transaction; a person limited to one channel sees that channel's alone;
// and Check (the cleanup) proves them against a scan of the drafts.
func TestQualityFiguresMoveWithTheDrafts(t *testing.T) {
	st := openTest(t)
	dist := func(f float64) *float64 { return &f }
	a := figureDraft(t, st, "web", "a", t0, "v1", 0)
	b := figureDraft(t, st, "web", "b", t0, "v1", 0)
	c := figureDraft(t, st, "mail", "c", t0, "v2", 0)
	changeDraft(t, st, a.ID, func(d *Draft) {
		d.Guards = &Guards{CustomerLanguage: "deu", ReplyLanguage: "eng", LanguageDiffers: true, Figures: []GuardFigure{{Kind: "price", Text: "€45 & <b>"}}}
	})
	changeDraft(t, st, b.ID, func(d *Draft) { d.Guards = &Guards{} })
	changeDraft(t, st, a.ID, func(d *Draft) {
		d.Status, d.Decision = DraftApproved, &Decision{By: "ann", At: t0, Edited: true, Distance: dist(0.25), ReasonCode: "wrong_facts", Reason: "the price is €35 😀"}
	})
	changeDraft(t, st, b.ID, func(d *Draft) { d.Status, d.Decision = DraftApproved, &Decision{By: "ann", At: t0, Distance: dist(0)} })
	changeDraft(t, st, c.ID, func(d *Draft) { d.Status, d.Decision = DraftRejected, &Decision{By: "bo", At: t0, ReasonCode: "tone"} })
	want := []string{
		"2026-11-29 mail v2: guarded 0 language 0 figures 0 measured 0 distance 0.000 reasons map[tone:1]",
		"2026-11-29 web v1: guarded 2 language 1 figures 1 measured 2 distance 0.250 reasons map[wrong_facts:1]",
	}
	if got := qualityOf(t, st, Everything(), t0); !slices.Equal(got, want) {
		t.Errorf("quality figures:\n%q\nwant\n%q", got, want)
	}
	if got := qualityOf(t, st, OnlyChannels("mail"), t0); !slices.Equal(got, want[:1]) {
		t.Errorf("mail's alone:\n%q\nwant\n%q", got, want[:1])
	}
	changeDraft(t, st, b.ID, func(d *Draft) { d.Status, d.Decision = DraftPending, nil }) // undone
	want[1] = "2026-11-29 web v1: guarded 2 language 1 figures 1 measured 1 distance 0.250 reasons map[wrong_facts:1]"
	if got := qualityOf(t, st, Everything(), t0); !slices.Equal(got, want) {
		t.Errorf("after an undo:\n%q\nwant\n%q", got, want)
	}
	err := st.Update(t.Context(), func(tx *Tx) error {
		d, err := tx.Draft(c.ID)
		if err != nil {
			return err
		}
		return tx.deleteDraft(&d)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := qualityOf(t, st, Everything(), t0); !slices.Equal(got, want[1:]) {
		t.Errorf("after a delete:\n%q\nwant\n%q", got, want[1:])
	}
	if got := qualityOf(t, st, Everything(), t0.Add(24*time.Hour)); len(got) != 0 {
		t.Errorf("figures of the next day: %q", got)
	}
}

// TestCheckCatchesWrongQualityFigure: a quality figure that disagrees with
// the drafts is named, and so is a key under its prefix that is not one.
func TestCheckCatchesWrongQualityFigure(t *testing.T) {
	st := openTest(t)
	d := figureDraft(t, st, "web", "w1", t0, "v1", 0)
	changeDraft(t, st, d.ID, func(d *Draft) { d.Guards = &Guards{LanguageDiffers: true} })
	d.Guards = &Guards{LanguageDiffers: true}
	key, _ := qualityFieldsOf(&d).tally()
	for _, bad := range []struct {
		key, value []byte
		want       string
	}{
		{key, qualityTally{1, 0}.bytes(), "the quality figure of " + t0.Format(time.DateOnly) + ", channel web, prompt v1 says"},
		{key, []byte("short"), "is not a quality figure"},
		{append(bytes.Clone(qualityStatsPrefix), "garbage"...), qualityTally{1}.bytes(), "is not a quality figure"},
	} {
		var saved []byte
		err := st.raw(func(tx engine.Tx) error {
			saved = append([]byte(nil), tx.Bucket(bucketMeta).Get(bad.key)...)
			return tx.Bucket(bucketMeta).Put(bad.key, bad.value)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Check(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Check with meta %q = %x: %v, want an error saying %q", bad.key, bad.value, err, bad.want)
		}
		err = st.raw(func(tx engine.Tx) error {
			if saved == nil {
				return tx.Bucket(bucketMeta).Delete(bad.key)
			}
			return tx.Bucket(bucketMeta).Put(bad.key, saved)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
