// Package leads owns the lead (handoff) state machine: its statuses and
// which of them are open (status.go), every move between them (moves.go:
// received, matched, owned, replied, closed), the conversation turn's
// rules (turns.go, with the ingest's transaction, RecordTx), the lists
// (list.go), and the rules that run on their own schedule: which leads are
// stuck, and flagging each stay once, with the alert created in the
// flagging's transaction.
//
// Each move runs inside the caller's *store.Tx, the transaction that
// stores what justifies it; the store keeps the lead records and their
// indexes and assigns no status.
package leads

import (
	"context"
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// chunk is how many leads one flagging transaction flags, and scanChunk
// how many it reads at most, so a backlog of stuck leads never makes one
// long write; each transaction resumes after the last lead the previous
// one read, so a sweep reads every lead of a status once (re-reading from
// the start made it quadratic: 40,000 stuck leads stalled drafting from
// ~870/s to 2/s in bench/'s fill).
const (
	chunk     = 200
	scanChunk = 2000
)

// AlertTx announces h, just flagged, inside the flagging's transaction
// (delivery.CreateAlertTx, wired by the caller so that leads never imports
// delivery, which may call leads).
type AlertTx func(tx *store.Tx, h store.Handoff, now time.Time) error

// FlagStuck flags every lead that has been in a status longer than its
// threshold in after and was not flagged for this stay yet, in small
// transactions; with alert set, the same transaction announces it, so an
// alert exists once per stay even across restarts. It returns the leads it
// flagged.
func FlagStuck(ctx context.Context, st *store.Store, now time.Time, after map[store.HandoffStatus]time.Duration, alert AlertTx) ([]store.Handoff, error) {
	var flagged []store.Handoff
	for _, status := range OpenStatuses {
		d, ok := after[status]
		if !ok || d <= 0 {
			continue
		}
		cutoff := now.Add(-d)
		var resume *store.Handoff // the last lead read, as it was indexed
		for {
			var (
				got     []store.Handoff
				last    *store.Handoff
				stopped bool
			)
			err := st.Update(ctx, func(tx *store.Tx) error {
				got, last, stopped = got[:0], nil, false // fn may run twice
				scanned := 0
				return tx.EachHandoffAfter(status, resume, cutoff, func(h store.Handoff) (bool, error) {
					indexed := h
					last = &indexed
					scanned++
					if !h.Stuck() {
						old := h
						h.StuckSince, h.StuckAt = &h.Since, &now
						if err := tx.PutHandoff(&old, &h); err != nil {
							return false, err
						}
						if alert != nil {
							if err := alert(tx, h, now); err != nil {
								return false, err
							}
						}
						got = append(got, h)
					}
					stopped = len(got) >= chunk || scanned >= scanChunk
					return !stopped, nil
				})
			})
			if err != nil {
				return flagged, fmt.Errorf("leads: flag stuck leads: %w", err)
			}
			flagged = append(flagged, got...)
			if !stopped {
				break
			}
			resume = last
		}
	}
	return flagged, nil
}

// Stuck lists up to limit leads stuck at now (in status, or in every
// status a lead can be stuck in when status is empty), longest waiting
// first per status: the same thresholds as FlagStuck, whether flagged yet
// or not. only limits it to the channels a person sees (nil: every one).
func Stuck(st *store.Store, only *store.Visible, now time.Time, after map[store.HandoffStatus]time.Duration, status store.HandoffStatus, limit int) ([]store.Handoff, error) {
	out := []store.Handoff{}
	for _, s := range OpenStatuses {
		if status != "" && s != status {
			continue
		}
		hs, err := List(st, Filter{Status: s, SinceBefore: now.Add(-after[s]), Limit: limit - len(out), Only: only})
		if err != nil {
			return nil, err
		}
		if out = append(out, hs...); len(out) >= limit {
			break
		}
	}
	return out, nil
}
