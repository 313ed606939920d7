package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/store/engine"
)

// A card is a draft as announced on an approval surface (a Slack message,
// a Telegram message, a mail, a push): where it was posted, so that the
// surface can change it when the draft is decided anywhere, and what it
// shows now, so that a sweep can tell which cards are behind.
//
//	cards             surface 0x00 draftID -> Card JSON
//	idx_cards_by_ref  surface 0x00 chat 0x00 ref -> draftID      (a reply to a card names its draft)
//	idx_cards_open    surface 0x00 draftID -> ""                 (cards that may still change: the sweep's walk)
//
// The three buckets are created by the first card written (a file without
// cards has none, and reads of a missing bucket find nothing), so no
// migration and no schema version: an older binary opening the file keeps
// them as buckets it does not read.
var (
	bucketCards       = []byte("cards")
	bucketCardsByRef  = []byte("idx_cards_by_ref")
	bucketCardsOpen   = []byte("idx_cards_open")
	cardBucketsInRank = [][]byte{bucketCards, bucketCardsByRef, bucketCardsOpen}
)

// Card is one announcement of a draft on a surface.
type Card struct {
	V       int    `json:"v"`
	Surface string `json:"surface"` // "slack", "telegram", "email", "ntfy", "webpush"
	Draft   string `json:"draft"`
	// Chat is where the card is (a Slack channel id, a Telegram chat id, an
	// address); Ref names the message in it (a Slack ts, a Telegram
	// message_id, a push's id). Ref empty: the card is being posted.
	Chat string `json:"chat,omitempty"`
	Ref  string `json:"ref,omitempty"`
	// Shown is the surface's fingerprint of what the card shows (the
	// draft's state as of its last post or update).
	Shown string `json:"shown,omitempty"`
	// Final: the card will not change again (the draft's decision is
	// settled), so the sweep no longer reads it.
	Final bool `json:"final,omitempty"`
	// Posting is when a post of the card began that has no answer yet: set
	// before the surface is called, cleared with the ref (or when the
	// surface said it took nothing). A card found Posting was perhaps
	// posted by a process that died before recording it: the surface looks
	// it up (Slack's message metadata) before posting again.
	Posting time.Time `json:"posting,omitzero"`
	// Uncertain says why the card may be in its chat without handoff
	// knowing its ref (a post with no answer, on a surface that cannot look
	// one up): it is not posted again, and the sentence is shown.
	Uncertain string `json:"uncertain,omitempty"`
	// Erased: the draft's lead was erased (Erase). The card is open again
	// until its surface deletes the message (the customer's words are in
	// it); then the card itself is deleted (DeleteCard).
	Erased    bool      `json:"erased,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

func cardKey(surface, draft string) []byte { return []byte(surface + "\x00" + draft) }

func cardRefKey(surface, chat, ref string) []byte {
	return []byte(surface + "\x00" + chat + "\x00" + ref)
}

// cardBucket is one of the card buckets, created on a write; nil on a read
// of a file that has no card yet.
func (tx *Tx) cardBucket(name []byte, write bool) (engine.Bucket, error) {
	if b := tx.bucket(name); b != nil || !write {
		return b, nil
	}
	b, err := tx.tx.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return b, nil
}

// Card is the card of draft on surface; ErrNotFound when it has none.
func (tx *Tx) Card(surface, draft string) (Card, error) {
	b, _ := tx.cardBucket(bucketCards, false)
	if b == nil {
		return Card{}, ErrNotFound
	}
	var c Card
	if err := getJSON(b, cardKey(surface, draft), &c); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Card{}, err
		}
		return Card{}, unreadableOf("card", cardKey(surface, draft), err)
	}
	return c, nil
}

// CardByRef is the card of surface posted in chat as ref (a reply to it
// names its message); ErrNotFound when none is.
func (tx *Tx) CardByRef(surface, chat, ref string) (Card, error) {
	b, _ := tx.cardBucket(bucketCardsByRef, false)
	if b == nil || ref == "" {
		return Card{}, ErrNotFound
	}
	id := b.Get(cardRefKey(surface, chat, ref))
	if id == nil {
		return Card{}, ErrNotFound
	}
	return tx.Card(surface, string(id))
}

// PutCard writes c, keeping its indexes: its chat and ref, once set, name
// it; it is open until it is Final.
func (tx *Tx) PutCard(c Card) error {
	if c.Surface == "" || c.Draft == "" {
		return fmt.Errorf("card: a card needs a surface and a draft (got %q, %q)", c.Surface, c.Draft)
	}
	if bytes.IndexByte([]byte(c.Surface+c.Draft+c.Chat), 0) >= 0 {
		return fmt.Errorf("card: the surface, draft and chat of a card hold no NUL byte")
	}
	if !utf8.ValidString(c.Surface + c.Draft + c.Chat + c.Ref + c.Shown + c.Uncertain) {
		return fmt.Errorf("card: a card's fields are UTF-8 text")
	}
	c.V = recordVersion
	bs := make([]engine.Bucket, len(cardBucketsInRank))
	for i, name := range cardBucketsInRank {
		var err error
		if bs[i], err = tx.cardBucket(name, true); err != nil {
			return err
		}
	}
	cards, byRef, open := bs[0], bs[1], bs[2]
	key := cardKey(c.Surface, c.Draft)
	var old Card
	if err := getJSON(cards, key, &old); err == nil && old.Ref != "" && (old.Ref != c.Ref || old.Chat != c.Chat) {
		if err := byRef.Delete(cardRefKey(old.Surface, old.Chat, old.Ref)); err != nil {
			return err
		}
	}
	if err := putJSON(cards, key, c); err != nil {
		return err
	}
	if c.Ref != "" {
		if err := byRef.Put(cardRefKey(c.Surface, c.Chat, c.Ref), []byte(c.Draft)); err != nil {
			return err
		}
	}
	if c.Final {
		return open.Delete(key)
	}
	return open.Put(key, []byte{})
}

// DeleteCard deletes the card of draft on surface with its index entries;
// a card that is not there is no error.
func (tx *Tx) DeleteCard(surface, draft string) error {
	cards, _ := tx.cardBucket(bucketCards, false)
	if cards == nil {
		return nil
	}
	key := cardKey(surface, draft)
	var c Card
	err := getJSON(cards, key, &c)
	if b := tx.bucket(bucketCardsByRef); b != nil {
		switch {
		case err == nil && c.Ref != "":
			if err := b.Delete(cardRefKey(c.Surface, c.Chat, c.Ref)); err != nil {
				return err
			}
		case err != nil && !errors.Is(err, ErrNotFound):
			// The card cannot be read, so its chat and ref are unknown: its
			// entry is found by the draft it names, among the surface's.
			if err := deleteRefsOf(b, surface, draft); err != nil {
				return err
			}
		}
	}
	if b := tx.bucket(bucketCardsOpen); b != nil {
		if err := b.Delete(key); err != nil {
			return err
		}
	}
	return cards.Delete(key)
}

// deleteRefsOf deletes the entries of surface in idx_cards_by_ref that
// name draft.
func deleteRefsOf(b engine.Bucket, surface, draft string) error {
	prefix := []byte(surface + "\x00")
	var keys [][]byte
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if string(v) == draft {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// eraseCards marks every card of draft Erased and open, for its surface
// to delete the message, and deletes the draft's reminders (erase.go).
func eraseCards(tx *Tx, draft string) error {
	cards := tx.bucket(bucketCards)
	if cards != nil {
		// The surfaces are few: step from one surface's keys to the next's.
		c := cards.Cursor()
		for k, _ := c.First(); k != nil; {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				break
			}
			surface := string(k[:i])
			card, err := tx.Card(surface, draft)
			switch {
			case errors.Is(err, ErrNotFound):
			case tx.skip(err, nil):
				// Unreadable: it holds no customer's words, and is listed.
			case err != nil:
				return err
			case !card.Erased:
				card.Erased, card.Final, card.Shown = true, false, ""
				if err := tx.PutCard(card); err != nil {
					return err
				}
			}
			c = cards.Cursor() // PutCard may have moved the cursor's page
			k, _ = c.Seek([]byte(surface + "\x01"))
		}
	}
	if b := tx.bucket(bucketReminders); b != nil {
		prefix := []byte(draft + "\x00")
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// OpenCards calls fn with each card of surface that may still change, in
// draft order, until fn returns an error (which is returned).
func (tx *Tx) OpenCards(surface string, fn func(Card) error) error {
	b, _ := tx.cardBucket(bucketCardsOpen, false)
	if b == nil {
		return nil
	}
	prefix := []byte(surface + "\x00")
	var drafts []string
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		drafts = append(drafts, string(k[len(prefix):]))
	}
	for _, d := range drafts {
		card, err := tx.Card(surface, d)
		// A card that cannot be read, or an index entry without its card,
		// is stepped over (listed as unreadable; Check names the entry):
		// the other cards still follow their drafts.
		if errors.Is(err, ErrNotFound) || tx.skip(err, nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open card index points at %s of %s: %w", surface, d, err)
		}
		if err := fn(card); err != nil {
			return err
		}
	}
	return nil
}

// checkCards proves the card indexes agree with the cards, both ways: a
// posted card is found by its chat and ref, an open one (not final) is in
// idx_cards_open, and every entry of either index names a card that says
// so. A file without cards has none of the buckets and nothing to check.
func checkCards(tx *Tx, r *checking) []error {
	cards, byRef, open := tx.bucket(bucketCards), tx.bucket(bucketCardsByRef), tx.bucket(bucketCardsOpen)
	if cards == nil && byRef == nil && open == nil {
		return nil
	}
	var problems []error
	if cards == nil || byRef == nil || open == nil {
		return []error{fmt.Errorf("check: the card buckets are incomplete (%s %v, %s %v, %s %v)",
			bucketCards, cards != nil, bucketCardsByRef, byRef != nil, bucketCardsOpen, open != nil)}
	}
	read := map[string]Card{} // by key, the cards that could be read
	_ = cards.ForEach(func(k, v []byte) error {
		var c Card
		if err := unmarshal(v, &c, true); err != nil {
			r.unreadable = append(r.unreadable, Unreadable{Kind: "card", ID: string(bytes.ReplaceAll(k, []byte{0}, []byte{'/'})), Reason: clip(err.Error())})
			if json.Unmarshal(v, &c) != nil {
				return nil
			}
		}
		if !bytes.Equal(k, cardKey(c.Surface, c.Draft)) {
			problems = append(problems, fmt.Errorf("check: the card at %q is of %s/%s", k, c.Surface, c.Draft))
			return nil
		}
		read[string(k)] = c
		if c.Ref != "" && string(byRef.Get(cardRefKey(c.Surface, c.Chat, c.Ref))) != c.Draft {
			problems = append(problems, fmt.Errorf("check: the %s card of draft %s (%s in %s) is not in %s", c.Surface, c.Draft, c.Ref, c.Chat, bucketCardsByRef))
		}
		switch inOpen := open.Get(k) != nil; {
		case !c.Final && !inOpen:
			problems = append(problems, fmt.Errorf("check: the %s card of draft %s may still change but is not in %s", c.Surface, c.Draft, bucketCardsOpen))
		case c.Final && inOpen:
			problems = append(problems, fmt.Errorf("check: %s lists the final %s card of draft %s", bucketCardsOpen, c.Surface, c.Draft))
		}
		return nil
	})
	_ = byRef.ForEach(func(k, v []byte) error {
		parts := bytes.SplitN(k, []byte{0}, 3)
		if len(parts) != 3 {
			problems = append(problems, fmt.Errorf("check: %s holds the key %q, not surface, chat and ref", bucketCardsByRef, k))
			return nil
		}
		c, ok := read[string(cardKey(string(parts[0]), string(v)))]
		if !ok && cards.Get(cardKey(string(parts[0]), string(v))) == nil {
			problems = append(problems, fmt.Errorf("check: %s names the %s card of draft %s, which does not exist", bucketCardsByRef, parts[0], v))
		} else if ok && (c.Chat != string(parts[1]) || c.Ref != string(parts[2])) {
			problems = append(problems, fmt.Errorf("check: %s names the %s card of draft %s as %s in %s; the card is %s in %s", bucketCardsByRef, parts[0], v, parts[2], parts[1], c.Ref, c.Chat))
		}
		return nil
	})
	_ = open.ForEach(func(k, _ []byte) error {
		if _, ok := read[string(k)]; !ok && cards.Get(k) == nil {
			problems = append(problems, fmt.Errorf("check: %s lists %q, which is no card", bucketCardsOpen, bytes.ReplaceAll(k, []byte{0}, []byte{'/'})))
		}
		return nil
	})
	return problems
}
