package store

import (
	"bytes"
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
	Surface string `json:"surface"` // "slack", "telegram", "email", "ntfy"
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
	Uncertain string    `json:"uncertain,omitempty"`
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
