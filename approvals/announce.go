package approvals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// Announcing is a side effect, so it runs in jobs: AnnounceArgs posts a
// waiting draft's card on one surface, FollowArgs brings a posted card up
// to its draft. Both are keyed "<surface>:<draft id>", so a draft has at
// most one live job of each per surface.
//
// Why a sweep and not an enqueue where the draft is saved: drafts are
// saved in review's transactions (the draft job, a regeneration, a
// person's own reply, an undo that makes a draft wait again), and a card
// must also follow decisions made where approvals is not called (the
// dashboard, a newer message superseding the draft). One small sweep
// (approvals.sweep, 2 s) covers all of them without a hook in review: in
// one transaction it writes a placeholder card and the announce job for
// each waiting draft without a card, and a follow job for each open card
// whose Shown differs from its draft. Decide enqueues the follow jobs of
// its own decision at once, in its transaction.

// Kinds of the surfaces' jobs.
const (
	KindAnnounce = "approvals.announce"
	KindFollow   = "approvals.follow"
)

// AnnounceArgs post draft Draft's card on surface Surface.
type AnnounceArgs struct {
	Surface string `json:"surface"`
	Draft   string `json:"draft"`
}

func (AnnounceArgs) Kind() string  { return KindAnnounce }
func (a AnnounceArgs) Key() string { return a.Surface + ":" + a.Draft }
func (FollowArgs) Kind() string    { return KindFollow }
func (a FollowArgs) Key() string   { return a.Surface + ":" + a.Draft }

// FollowArgs bring the card of draft Draft on surface Surface up to the
// draft.
type FollowArgs struct {
	Surface string `json:"surface"`
	Draft   string `json:"draft"`
}

// jobAttempts is how often a surface's job is tried: a surface that is down
// for a while (backoff grows) still gets its card.
const jobAttempts = 8

// sweepBatch bounds the drafts one sweep announces (the next sweep goes on).
const sweepBatch = 50

// followTx enqueues a follow job for every card of draft id.
func (a *Approvals) followTx(tx *store.Tx, id string, now time.Time) (int, error) {
	n := 0
	for _, s := range a.surfaces {
		c, err := tx.Card(s.Name(), id)
		if errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
			continue // an unreadable card never stops the decision itself
		}
		if err != nil {
			return n, err
		}
		if c.Final {
			continue
		}
		if _, created, err := jobs.Enqueue(tx, FollowArgs{Surface: s.Name(), Draft: id}, jobs.Opts{MaxAttempts: jobAttempts, Now: now}); err != nil {
			return n, err
		} else if created {
			n++
		}
	}
	return n, nil
}

// sweepWork is what one sweep found to do.
type sweepWork struct {
	announce []store.Card // placeholders to write, with their jobs
	follow   []FollowArgs
	remind   []remindWork // reminders' stages due (remind.go)
}

func (w sweepWork) empty() bool {
	return len(w.announce) == 0 && len(w.follow) == 0 && len(w.remind) == 0
}

// Sweep compares the surfaces' cards with their drafts: a waiting draft of
// a client a surface announces, without a card there, gets one (a
// placeholder and its announce job); an open card that shows an older
// state than its draft's gets a follow job. It reads first and writes only
// when there is something to do, in one transaction that reads again.
func (a *Approvals) Sweep(ctx context.Context) error {
	if len(a.surfaces) == 0 {
		return nil
	}
	var w sweepWork
	if err := a.st.View(func(tx *store.Tx) error {
		var err error
		w, err = a.sweepTx(tx, a.Now())
		return err
	}); err != nil {
		return fmt.Errorf("approvals: sweep: %w", err)
	}
	if w.empty() {
		return nil
	}
	enqueued := 0
	err := a.st.Update(ctx, func(tx *store.Tx) error {
		enqueued = 0
		now := a.Now()
		w, err := a.sweepTx(tx, now)
		if err != nil {
			return err
		}
		for _, c := range w.announce {
			c.CreatedAt = now
			if err := tx.PutCard(c); err != nil {
				return err
			}
			if _, created, err := jobs.Enqueue(tx, AnnounceArgs{Surface: c.Surface, Draft: c.Draft}, jobs.Opts{MaxAttempts: jobAttempts, Now: now}); err != nil {
				return err
			} else if created {
				enqueued++
			}
		}
		for _, f := range w.follow {
			if _, created, err := jobs.Enqueue(tx, f, jobs.Opts{MaxAttempts: jobAttempts, Now: now}); err != nil {
				return err
			} else if created {
				enqueued++
			}
		}
		n, err := addRemindersTx(tx, w.remind, now)
		enqueued += n
		return err
	})
	if err != nil {
		return fmt.Errorf("approvals: sweep: %w", err)
	}
	if enqueued > 0 {
		a.wake()
	}
	return nil
}

// sweepTx finds a sweep's work in tx.
func (a *Approvals) sweepTx(tx *store.Tx, now time.Time) (sweepWork, error) {
	var w sweepWork
	for _, s := range a.surfaces {
		name := s.Name()
		if err := tx.OpenCards(name, func(c store.Card) error {
			if c.Erased {
				// The lead was erased: its follow job deletes the message.
				w.follow = append(w.follow, FollowArgs{Surface: name, Draft: c.Draft})
				return nil
			}
			if c.Ref == "" && c.Shown == "" {
				return nil // being posted: its announce job shows the state it finds
			}
			v, err := a.viewTx(tx, c.Draft, now)
			if errors.Is(err, store.ErrNotFound) {
				return nil // the draft is gone (erased): nothing to follow
			}
			if err != nil {
				return err
			}
			if v.Fingerprint() != c.Shown {
				w.follow = append(w.follow, FollowArgs{Surface: name, Draft: c.Draft})
			}
			return nil
		}); err != nil {
			return w, err
		}
		waiting, err := tx.WaitingDrafts(func(d store.Draft) bool {
			if _, ok := s.Chat(a.cfg.ClientOf(d.Channel)); !ok {
				return false
			}
			_, err := tx.Card(name, d.ID)
			return errors.Is(err, store.ErrNotFound)
		}, sweepBatch)
		if err != nil {
			return w, err
		}
		for _, d := range waiting.Oldest {
			chat, _ := s.Chat(a.cfg.ClientOf(d.Channel))
			w.announce = append(w.announce, store.Card{Surface: name, Draft: d.ID, Chat: chat})
		}
	}
	var err error
	w.remind, err = a.remindTx(tx, now)
	return w, err
}

// Announce posts draft's card on surface (the announce job): once, while
// the draft waits. A card already posted is not posted again; a draft
// decided before its card was posted gets none (its card is final, empty).
//
// The post is marked on the card before the surface is called (Posting)
// and the mark cleared with the ref, or when the surface proves it took
// nothing (notPosted): a card found marked was perhaps posted by an
// attempt whose answer was lost, or by a process that died before its
// record. A Finder (Slack) looks it up before posting again; a surface
// that cannot (Telegram) marks the card Uncertain, which is shown (the
// job's dead letter says why) and never posted blind.
func (a *Approvals) Announce(ctx context.Context, surface, draft string) error {
	s, ok := a.Surface(surface)
	if !ok {
		return &jobs.Discard{Err: fmt.Errorf("surface %s is not configured", surface)}
	}
	var (
		card store.Card
		v    View
	)
	err := a.st.View(func(tx *store.Tx) error {
		var err error
		if card, err = tx.Card(surface, draft); err != nil {
			return err
		}
		v, err = a.viewTx(tx, draft, a.Now())
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // the card or the draft is gone: nothing to post
	}
	if err != nil {
		return err
	}
	if card.Ref != "" || card.Shown != "" || card.Uncertain != "" {
		return nil
	}
	marked := card.Posting // as read: the mark below checks no other attempt moved it
	if !card.Posting.IsZero() {
		ref, found, err := a.lookUp(ctx, s, card, v)
		if err != nil {
			return err
		}
		if found {
			// It was posted while the draft waited: it shows that, and
			// follows the draft from there.
			return a.posted(ctx, s, card, View{State: Waiting}, ref)
		}
		card.Posting = time.Time{} // not there: a new post is safe
	}
	if v.State != Waiting {
		card.Final, card.Shown, card.UpdatedAt = true, v.Fingerprint(), a.Now()
		return a.putCard(ctx, card)
	}
	_, once := s.(PostsOnce)
	if once {
		// The mark, in the transaction that checks nothing else posted
		// the card meanwhile.
		stale := false
		now := a.Now()
		if err := a.updateCard(ctx, surface, draft, func(c *store.Card) {
			if stale = c.Ref != "" || c.Uncertain != "" || c.Shown != "" || !c.Posting.Equal(marked); !stale {
				c.Posting = now
			}
		}); err != nil || stale {
			return err
		}
		card.Posting = now
	}
	ref, err := s.Post(ctx, card.Chat, v)
	if err != nil {
		if once && notPosted(err) {
			if perr := a.updateCard(context.WithoutCancel(ctx), surface, draft, func(c *store.Card) {
				if c.Posting.Equal(card.Posting) {
					c.Posting = time.Time{}
				}
			}); perr != nil {
				a.log.Warn("approvals: clear the post mark of a card", slog.String("draft", draft), slog.Any("err", perr))
			}
		}
		return fmt.Errorf("approvals: post draft %s on %s: %w", draft, surface, err)
	}
	return a.posted(ctx, s, card, v, ref)
}

// updateCard changes the card of draft on surface by fn, read and written
// in one transaction (a card that is gone stays gone).
func (a *Approvals) updateCard(ctx context.Context, surface, draft string, fn func(*store.Card)) error {
	return a.st.Update(ctx, func(tx *store.Tx) error {
		c, err := tx.Card(surface, draft)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		before := c
		fn(&c)
		if c == before {
			return nil
		}
		return tx.PutCard(c)
	})
}

// PostsOnce is a Surface whose Post makes one message that a repeated
// call would make again (Slack, Telegram): its posts are marked (Posting)
// and never repeated blind. ntfy and email keep their own record of what
// went out (the push tokens, the mail's reference).
type PostsOnce interface{ postsOnce() }

func (*slackSurface) postsOnce()    {}
func (*telegramSurface) postsOnce() {}

// lookUp finds the card marked Posting: found (its ref), or not there
// (safe to post); a surface that cannot look gets the card marked
// Uncertain and the job discarded with the sentence, so it is seen.
func (a *Approvals) lookUp(ctx context.Context, s Surface, card store.Card, v View) (string, bool, error) {
	f, ok := s.(Finder)
	var why string
	if !ok {
		why = surfaceLabel(s.Name()) + " has no way to look a message up"
	} else {
		ref, found, err := f.Find(ctx, card.Chat, v, card.Posting)
		var le *LookupError
		if !errors.As(err, &le) {
			return ref, found, err // found, not there, or ask again later
		}
		why = le.Why
	}
	card.Uncertain = uncertainSentence(s.Name(), card.Chat, card.Posting, why)
	card.Final, card.UpdatedAt = true, a.Now()
	if err := a.putCard(ctx, card); err != nil {
		return "", false, err
	}
	return "", false, &jobs.Discard{Err: errors.New(card.Uncertain)}
}

// posted records card as posted under ref, showing v.
func (a *Approvals) posted(ctx context.Context, s Surface, card store.Card, v View, ref string) error {
	_, updates := s.(Updater)
	now := a.Now()
	if err := a.updateCard(context.WithoutCancel(ctx), card.Surface, card.Draft, func(c *store.Card) {
		c.Ref, c.Shown, c.UpdatedAt, c.Posting = ref, v.Fingerprint(), now, time.Time{}
		if !updates || ref == "" {
			c.Final = true // a card that cannot change is done once sent
		}
	}); err != nil {
		return err
	}
	// A decision made while it was posted: the sweep would see it; follow now.
	return a.followIfBehind(ctx, s.Name(), card.Draft)
}

// followIfBehind enqueues the card's follow job when its draft moved on.
func (a *Approvals) followIfBehind(ctx context.Context, surface, draft string) error {
	created := false
	err := a.st.Update(ctx, func(tx *store.Tx) error {
		created = false
		now := a.Now()
		c, err := tx.Card(surface, draft)
		if err != nil {
			return err
		}
		v, err := a.viewTx(tx, draft, now)
		if err != nil || c.Final || v.Fingerprint() == c.Shown {
			return err
		}
		_, created, err = jobs.Enqueue(tx, FollowArgs{Surface: surface, Draft: draft}, jobs.Opts{MaxAttempts: jobAttempts, Now: now})
		return err
	})
	if created {
		a.wake()
	}
	return err
}

// putCard writes c in a transaction of its own.
func (a *Approvals) putCard(ctx context.Context, c store.Card) error {
	return a.st.Update(ctx, func(tx *store.Tx) error { return tx.PutCard(c) })
}

// Follow brings draft's posted card on surface up to the draft (the follow
// job): Updater.Update with the card as the draft now stands, then the card
// remembers what it shows, and is final once the decision is settled.
func (a *Approvals) Follow(ctx context.Context, surface, draft string) error {
	s, ok := a.Surface(surface)
	if !ok {
		return &jobs.Discard{Err: fmt.Errorf("surface %s is not configured", surface)}
	}
	var (
		card store.Card
		v    View
	)
	err := a.st.View(func(tx *store.Tx) error {
		var err error
		if card, err = tx.Card(surface, draft); err != nil {
			return err
		}
		v, err = a.viewTx(tx, draft, a.Now())
		return err
	})
	if errors.Is(err, store.ErrNotFound) && card.Erased {
		err = nil // the draft went with retention after its erase
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if card.Erased {
		return a.forget(ctx, s, card)
	}
	if card.Final || card.Ref == "" || v.Fingerprint() == card.Shown {
		return nil
	}
	if u, ok := s.(Updater); ok {
		if err := u.Update(ctx, card, v); err != nil {
			return fmt.Errorf("approvals: update the card of draft %s on %s: %w", draft, surface, err)
		}
	}
	card.Shown, card.Final, card.UpdatedAt = v.Fingerprint(), v.Final(), a.Now()
	return a.putCard(ctx, card)
}

// Deleter is a Surface that can delete a posted card (Slack's
// chat.delete, Telegram's deleteMessage).
type Deleter interface {
	Delete(ctx context.Context, card store.Card) error
}

// forget deletes the message of a card whose lead was erased (the
// customer's words are in it), where the surface can, then the card. A
// mail or a push cannot be taken back: only the card goes.
func (a *Approvals) forget(ctx context.Context, s Surface, card store.Card) error {
	if d, ok := s.(Deleter); ok && card.Ref != "" {
		if err := d.Delete(ctx, card); err != nil {
			return fmt.Errorf("approvals: delete the erased card of draft %s on %s: %w", card.Draft, card.Surface, err)
		}
	}
	return a.st.Update(ctx, func(tx *store.Tx) error { return tx.DeleteCard(card.Surface, card.Draft) })
}

// Run runs a surface job (workers' announce kinds call it).
func (a *Approvals) Run(ctx context.Context, job store.Job) error {
	switch job.Kind {
	case KindAnnounce:
		args, err := jobs.Decode[AnnounceArgs](job)
		if err != nil {
			return err
		}
		return a.Announce(ctx, args.Surface, args.Draft)
	case KindFollow:
		args, err := jobs.Decode[FollowArgs](job)
		if err != nil {
			return err
		}
		return a.Follow(ctx, args.Surface, args.Draft)
	case KindRemind:
		args, err := jobs.Decode[RemindArgs](job)
		if err != nil {
			return err
		}
		return a.Remind(ctx, job, args)
	}
	return &jobs.Discard{Err: fmt.Errorf("job %s is a %s job, not a surface's", job.ID, job.Kind)}
}
