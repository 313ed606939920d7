package store

import (
	"fmt"
	"strings"
	"time"
)

// Visible is the part of the data a caller may see: every channel, or the
// channels of the clients a person is limited to. The zero value sees
// nothing, so a reader that was handed no Visible shows nothing rather
// than everything.
type Visible struct {
	all      bool
	channels map[string]bool
}

// Everything sees every channel: admins, and people not limited to clients.
func Everything() Visible { return Visible{all: true} }

// OnlyChannels sees the named channels alone.
func OnlyChannels(names ...string) Visible {
	v := Visible{channels: make(map[string]bool, len(names))}
	for _, n := range names {
		v.channels[n] = true
	}
	return v
}

// All reports whether v sees every channel.
func (v Visible) All() bool { return v.all }

// Channel reports whether v sees channel.
func (v Visible) Channel(name string) bool { return v.all || v.channels[name] }

// Key reports whether v sees the record behind an event key or lead key
// (`<channel>:…`; channel names never hold a colon).
func (v Visible) Key(key string) bool {
	if v.all {
		return true
	}
	ch, _, ok := strings.Cut(key, ":")
	return ok && v.channels[ch]
}

// Draft reports whether v sees d, by its event key (which every draft has).
func (v Visible) Draft(d Draft) bool { return v.Key(d.EventKey) }

// Outbox reports whether v sees row o: its channel, or for a row without
// one its event's.
func (v Visible) Outbox(o Outbox) bool {
	if o.Channel == "" {
		return v.Key(o.EventKey)
	}
	return v.Channel(o.Channel)
}

// CountsFor is Counts as v sees them, for the dashboard: the stuck leads
// are read StuckScan to a status at most (StuckMore says more were
// stuck). Everything reads the kept counts; a narrower view sums the waiting drafts of its channels from the
// per-channel counts, and counts the rest by walking the short lists
// (stuck leads, the dead letters) and reading each record's channel, in
// one read transaction.
func (s *Store) CountsFor(v Visible, stuckBefore map[HandoffStatus]time.Time) (Counts, error) {
	if v.all {
		var c Counts
		err := s.view(func(tx *Tx) error {
			c = countAll(tx, nil)
			c.StuckLeads, c.StuckMore = countStuck(tx, v, stuckBefore, StuckScan)
			return nil
		})
		return c, err
	}
	var c Counts
	err := s.view(func(tx *Tx) error {
		c = Counts{}
		c.DraftsWaiting = visibleDraftCount(tx, v, DraftPending) // kept per channel: stats.go
		c.StuckLeads, c.StuckMore = countStuck(tx, v, stuckBefore, StuckScan)
		// The dead letters are an admin's list, so a limited person is
		// never shown their number; it is still theirs alone, read from at
		// most StuckScan of the list.
		dc := tx.bucket(bucketJobsDead).Cursor()
		read := 0
		for k, _ := dc.First(); k != nil && read < StuckScan; k, _ = dc.Next() {
			read++
			j, err := tx.Job(string(k))
			if tx.skip(err, nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("dead-letter index points at job %s: %w", k, err)
			}
			if v.Key(j.Key) {
				c.DeadJobs++
			}
		}
		c.FailedReplies = visibleOutboxCount(tx, v, OutboxFailed) // kept per channel: outboxcounts.go
		c.NeedsReconciliation = visibleOutboxCount(tx, v, OutboxNeedsReconciliation)
		c.EffectPending = visibleOutboxCount(tx, v, OutboxEffectPending)
		return nil
	})
	if err != nil {
		return Counts{}, fmt.Errorf("store: counts: %w", err)
	}
	return c, nil
}

// DraftCountsFor reads the number of drafts in each status (DraftStatuses)
// as v sees them, from the counts in meta: a few keys, however many drafts
// there are; all channels' for Everything, else the sum of the channels v
// sees.
func (s *Store) DraftCountsFor(v Visible) (map[DraftStatus]int, error) {
	out := map[DraftStatus]int{}
	err := s.view(func(tx *Tx) error {
		for _, st := range DraftStatuses {
			if v.all {
				out[st] = count(tx, draftCountKey(st))
			} else {
				out[st] = visibleDraftCount(tx, v, st)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: draft counts: %w", err)
	}
	return out, nil
}
