package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/store/engine"
)

// FuzzCardRoundTrip: a card written is read back as it was, by its draft
// and by its message, and it is listed open until it is final.
func FuzzCardRoundTrip(f *testing.F) {
	f.Add("slack", "d01JDRAFT", "C0123", "1712345678.000100", "pending", false, int64(0), "", false)
	f.Add("telegram", "d01JDRAFT-v2", "-1001234567890", "42", "approved:dana:undo", true, int64(0), "Telegram has no lookup: the card may be in the chat already, zoë 🌸 & <bea>", false)
	f.Add("email", "d01J", "dana@example.com", "", "", false, int64(1764655200), "", true)
	f.Add("ntfy", "d\u00e9", "topic/with/slash", "ref\x00nul", "\"quoted\"", true, int64(-1), "ان \xff", true)
	st := openTest(f)
	at := time.Date(2026, 12, 2, 6, 0, 0, 123, time.UTC)
	f.Fuzz(func(t *testing.T, surface, draft, chat, ref, shown string, final bool, posting int64, uncertain string, erased bool) {
		c := Card{Surface: surface, Draft: draft, Chat: chat, Ref: ref, Shown: shown, Final: final, Uncertain: uncertain, Erased: erased, CreatedAt: at, UpdatedAt: at.Add(time.Second)}
		if posting != 0 {
			c.Posting = time.Unix(posting%(1<<34), 17).UTC()
		}
		err := st.Update(context.Background(), func(tx *Tx) error { return tx.PutCard(c) })
		if surface == "" || draft == "" || strings.ContainsRune(surface+draft+chat, 0) || !utf8.ValidString(surface+draft+chat+ref+shown+uncertain) {
			if err == nil {
				t.Fatalf("PutCard(%q, %q, %q) = nil, want a refusal", surface, draft, chat)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		err = st.View(func(tx *Tx) error {
			got, err := tx.Card(surface, draft)
			if err != nil {
				return err
			}
			c.V = recordVersion
			if !reflect.DeepEqual(got, c) {
				t.Errorf("Card = %+v, want %+v", got, c)
			}
			byRef, err := tx.CardByRef(surface, chat, ref)
			switch {
			case ref == "" && !errors.Is(err, ErrNotFound):
				t.Errorf("CardByRef with no ref = %+v, %v; want ErrNotFound", byRef, err)
			case ref != "" && (err != nil || byRef.Draft != draft):
				t.Errorf("CardByRef = %+v, %v; want draft %q", byRef, err, draft)
			}
			open := false
			if err := tx.OpenCards(surface, func(o Card) error {
				open = open || o.Draft == draft
				return nil
			}); err != nil {
				return err
			}
			if open == final {
				t.Errorf("card open = %v with final %v", open, final)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestCardRefMoves: a card posted again under another message is found by
// the new one only.
func TestCardRefMoves(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	put := func(c Card) {
		t.Helper()
		if err := st.Update(ctx, func(tx *Tx) error { return tx.PutCard(c) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.View(func(tx *Tx) error {
		if _, err := tx.Card("slack", "d1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Card before any card = %v, want ErrNotFound", err)
		}
		return tx.OpenCards("slack", func(Card) error { t.Error("a card is open in a file without cards"); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	put(Card{Surface: "slack", Draft: "d1", Chat: "C1", Ref: "1.1"})
	put(Card{Surface: "slack", Draft: "d1", Chat: "C1", Ref: "2.2", Final: true})
	if err := st.View(func(tx *Tx) error {
		if _, err := tx.CardByRef("slack", "C1", "1.1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("CardByRef(old ref) = %v, want ErrNotFound", err)
		}
		if c, err := tx.CardByRef("slack", "C1", "2.2"); err != nil || c.Draft != "d1" {
			t.Errorf("CardByRef(new ref) = %+v, %v", c, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// cardsOneDamaged is a store with two slack cards posted in C1, d01A and
// d01B, d01A's value damaged (a cut record), and the time they were made.
func cardsOneDamaged(t *testing.T) (*Store, time.Time) {
	t.Helper()
	st := openTest(t)
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for _, d := range []string{"d01A", "d01B"} {
		c := Card{Surface: "slack", Draft: d, Chat: "C1", Ref: "1." + d, Shown: "waiting", CreatedAt: at, UpdatedAt: at}
		if err := st.Update(context.Background(), func(tx *Tx) error { return tx.PutCard(c) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.raw(func(tx engine.Tx) error {
		return tx.Bucket(bucketCards).Put(cardKey("slack", "d01A"), []byte(`{"v":1,"surface":"slack","draft":`))
	}); err != nil {
		t.Fatal(err)
	}
	return st, at
}

// One card that cannot be read (a damaged value) is stepped over by the
// open cards' walk and listed as unreadable: the other cards still follow
// their drafts.
func TestOpenCardsStepOverAnUnreadableCard(t *testing.T) {
	st, at := cardsOneDamaged(t)
	var open []string
	if err := st.View(func(tx *Tx) error {
		return tx.OpenCards("slack", func(c Card) error { open = append(open, c.Draft); return nil })
	}); err != nil {
		t.Fatalf("OpenCards with one damaged card: %v", err)
	}
	if len(open) != 1 || open[0] != "d01B" {
		t.Errorf("open cards = %q, want the readable one, d01B", open)
	}
	if u := st.UnreadableOf("card"); len(u) != 1 || !strings.Contains(u[0].ID, "d01A") {
		t.Errorf("unreadable = %+v, want the damaged card named", u)
	}
	// Check names it too (and nothing else: its index entries are its own).
	rep, err := st.Inspect()
	if err != nil || len(rep.Damaged) != 0 || len(rep.Unreadable) != 1 || rep.Unreadable[0].Kind != "card" || !strings.Contains(rep.Unreadable[0].ID, "d01A") {
		t.Errorf("Inspect = %+v, %v; want the damaged card alone, unreadable", rep, err)
	}
	c := Card{Surface: "slack", Draft: "d01A", Chat: "C1", Ref: "1.d01A", Shown: "waiting", CreatedAt: at, UpdatedAt: at}
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.PutCard(c) }); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteUnreadableCard: deleting a card that cannot be read deletes
// its reply index entry too (found by the draft it names, since the card's
// chat and ref are unknown), so no entry is left naming a card that is
// gone; another draft's entry on the surface is kept, and Check is clean.
func TestDeleteUnreadableCard(t *testing.T) {
	st, _ := cardsOneDamaged(t)
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.DeleteCard("slack", "d01A") }); err != nil {
		t.Fatalf("DeleteCard of an unreadable card: %v", err)
	}
	if err := st.View(func(tx *Tx) error {
		if _, err := tx.CardByRef("slack", "C1", "1.d01A"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the deleted card's ref: %v, want ErrNotFound", err)
		}
		if c, err := tx.CardByRef("slack", "C1", "1.d01B"); err != nil || c.Draft != "d01B" {
			t.Errorf("the other card's ref: %+v, %v; want it kept", c, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rep, err := st.Inspect(); err != nil || len(rep.Damaged) != 0 || len(rep.Unreadable) != 0 {
		t.Errorf("Inspect after the delete = %+v, %v; want nothing damaged or unreadable", rep, err)
	}
}

// TestCheckCards: Check finds a card missing from its indexes, an index
// entry without its card, and an open entry of a final card.
func TestCheckCards(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		damage func(tx engine.Tx) error
		want   string
	}{
		{"ref index entry gone", func(tx engine.Tx) error {
			return tx.Bucket(bucketCardsByRef).Delete(cardRefKey("slack", "C0ACME", "1767225600.000001"))
		}, "is not in idx_cards_by_ref"},
		{"ref index names no card", func(tx engine.Tx) error {
			return tx.Bucket(bucketCardsByRef).Put(cardRefKey("slack", "C0ACME", "9.9"), []byte("d-gone"))
		}, "names the slack card of draft d-gone, which does not exist"},
		{"ref index names another message", func(tx engine.Tx) error {
			return tx.Bucket(bucketCardsByRef).Put(cardRefKey("slack", "C0OTHER", "1.5"), []byte("d-open"))
		}, "the card is 1767225600.000001 in C0ACME"},
		{"open card not listed", func(tx engine.Tx) error { return tx.Bucket(bucketCardsOpen).Delete(cardKey("slack", "d-open")) }, "may still change but is not in idx_cards_open"},
		{"final card listed open", func(tx engine.Tx) error { return tx.Bucket(bucketCardsOpen).Put(cardKey("telegram", "d-final"), nil) }, "lists the final telegram card of draft d-final"},
		{"open entry of no card", func(tx engine.Tx) error { return tx.Bucket(bucketCardsOpen).Put(cardKey("ntfy", "d-none"), nil) }, "which is no card"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Open(t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Update(context.Background(), func(tx *Tx) error {
				if err := tx.PutCard(Card{Surface: "slack", Draft: "d-open", Chat: "C0ACME", Ref: "1767225600.000001", Shown: "waiting", CreatedAt: at}); err != nil {
					return err
				}
				return tx.PutCard(Card{Surface: "telegram", Draft: "d-final", Chat: "-100", Ref: "42", Shown: "approved", Final: true, CreatedAt: at})
			}); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(); err != nil {
				t.Fatalf("Check before the damage: %v", err)
			}
			if err := st.raw(tc.damage); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want %q", err, tc.want)
			}
		})
	}
}
