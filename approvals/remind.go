package approvals

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// Reminders: a draft still waiting is nudged on its surfaces in three
// stages, each once per draft (store.Reminder, written in the transaction
// that enqueues the stage's jobs):
//
//	remind    waited approvals.remind_after: announced again where its card is
//	escalate  waited approvals.escalate_after: announced to each surface's escalate_to group
//	window    its channel's reply window closes within review.window_warning
//
// The sweep (approvals.sweep, the cron that brings cards up to their
// drafts) finds the stages due; a remind job per surface posts the
// notice, unless the draft was decided meanwhile. However many sweeps run
// at once — two processes of a fleet, a sweep overlapping the next — a
// stage is enqueued once: the reminder is read and written in the one
// write transaction that enqueues its jobs.

// KindRemind is the kind of a reminder's job.
const KindRemind = "approvals.remind"

// The stages of a draft's reminders.
const (
	StageRemind   = "remind"
	StageEscalate = "escalate"
	StageWindow   = "window"
)

// RemindArgs post stage Stage's notice of draft Draft on surface Surface.
type RemindArgs struct {
	Surface string `json:"surface"`
	Draft   string `json:"draft"`
	Stage   string `json:"stage"`
}

func (RemindArgs) Kind() string  { return KindRemind }
func (a RemindArgs) Key() string { return a.Surface + ":" + a.Draft + ":" + a.Stage }

// Reminder is a Surface that posts reminders.
type Reminder interface {
	// EscalateTo is where the drafts of client are escalated on this
	// surface (its escalate_to); false: nowhere.
	EscalateTo(client string) (string, bool)
	// Remind posts n. A surface that can find a notice it posted (Slack's
	// message metadata) looks for it first when n.Retry says an earlier
	// attempt may have posted it.
	Remind(ctx context.Context, n Notice) error
}

// Notice is one reminder as a surface posts it.
type Notice struct {
	Stage string
	Chat  string     // where: the card's chat, or the escalation's
	Card  store.Card // the draft's card on the surface (zero: it has none)
	View  View
	// Line is what the notice says first ("Still waiting for approval
	// after 2h: Ada on web").
	Line string
	// Link opens the draft in the dashboard ("" without base_url).
	Link string
	// Since is when the stage was enqueued; Retry says this is not the
	// job's first attempt.
	Since time.Time
	Retry bool
}

// remindWork is a stage due: its record and the jobs that post it.
type remindWork struct {
	rec  store.Reminder
	jobs []RemindArgs
}

// remindTx finds the stages due at now of the waiting drafts.
func (a *Approvals) remindTx(tx *store.Tx, now time.Time) ([]remindWork, error) {
	r := a.cfg.Approvals.Reminders
	warn := review.WindowWarning(a.cfg)
	longest := time.Duration(0)
	for _, ch := range a.cfg.Channels {
		longest = max(longest, review.WindowLength(a.cfg, ch.Name))
	}
	if r.RemindAfter == 0 && r.EscalateAfter == 0 && longest == 0 {
		return nil, nil
	}
	var out []remindWork
	var failed error
	_, err := tx.WaitingDrafts(func(d store.Draft) bool {
		if failed != nil || len(out) >= sweepBatch {
			return false
		}
		client := a.cfg.ClientOf(d.Channel)
		waited := now.Sub(d.CreatedAt)
		due := func(stage string, closes time.Time) {
			if _, err := tx.Reminder(d.ID, stage); !errors.Is(err, store.ErrNotFound) {
				if err != nil && !tx.Skip(err) {
					failed = err
				}
				return // done already (or unreadable: never repeated)
			}
			w := remindWork{rec: store.Reminder{Draft: d.ID, Stage: stage, At: now, Closes: closes}}
			for _, s := range a.surfaces {
				rm, ok := s.(Reminder)
				if !ok {
					continue
				}
				if stage == StageEscalate {
					_, ok = rm.EscalateTo(client)
				} else {
					_, ok = s.Chat(client)
				}
				if ok {
					w.rec.Surfaces = append(w.rec.Surfaces, s.Name())
					w.jobs = append(w.jobs, RemindArgs{Surface: s.Name(), Draft: d.ID, Stage: stage})
				}
			}
			if len(w.jobs) > 0 {
				out = append(out, w)
			}
		}
		if r.RemindAfter > 0 && waited >= r.RemindAfter {
			due(StageRemind, time.Time{})
		}
		if r.EscalateAfter > 0 && waited >= r.EscalateAfter {
			due(StageEscalate, time.Time{})
		}
		// A waiting draft was written after its lead's latest message, so
		// one older than the longest window has none left.
		if length := review.WindowLength(a.cfg, d.Channel); length > 0 && waited < longest {
			h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
			if errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
				return false
			}
			if err != nil {
				failed = err
				return false
			}
			win, err := review.WindowIn(tx, a.cfg, h)
			if err != nil {
				failed = err
				return false
			}
			if left := win.Left(now); left > 0 && left <= warn {
				due(StageWindow, win.Closes)
			}
		}
		return false // the walk keeps nothing: out holds the work
	}, 0)
	if failed != nil {
		return nil, failed
	}
	return out, err
}

// addRemindersTx records the stages of w still due and enqueues their
// jobs; it returns how many jobs it enqueued.
func addRemindersTx(tx *store.Tx, w []remindWork, now time.Time) (int, error) {
	n := 0
	for _, r := range w {
		r.rec.At = now
		added, err := tx.AddReminder(r.rec)
		if err != nil {
			return n, err
		}
		if !added {
			continue // another sweep enqueued it first
		}
		for _, j := range r.jobs {
			if _, created, err := jobs.Enqueue(tx, j, jobs.Opts{MaxAttempts: jobAttempts, Now: now}); err != nil {
				return n, err
			} else if created {
				n++
			}
		}
	}
	return n, nil
}

// Remind posts stage's notice of draft on surface (the remind job), unless
// the draft no longer waits: a reminder of a decided draft says nothing.
func (a *Approvals) Remind(ctx context.Context, job store.Job, args RemindArgs) error {
	s, ok := a.Surface(args.Surface)
	if !ok {
		return &jobs.Discard{Err: fmt.Errorf("surface %s is not configured", args.Surface)}
	}
	rm, ok := s.(Reminder)
	if !ok {
		return &jobs.Discard{Err: fmt.Errorf("surface %s posts no reminders", args.Surface)}
	}
	now := a.Now()
	var (
		v    View
		card store.Card
		rec  store.Reminder
		win  review.Window
	)
	err := a.st.View(func(tx *store.Tx) error {
		var err error
		if v, err = a.viewTx(tx, args.Draft, now); err != nil {
			return err
		}
		if rec, err = tx.Reminder(args.Draft, args.Stage); err != nil {
			return err
		}
		if card, err = tx.Card(args.Surface, args.Draft); errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
			card, err = store.Card{}, nil
		}
		if err != nil || args.Stage != StageWindow {
			return err
		}
		h, err := tx.Handoff(store.LeadKey(v.Draft.Channel, v.Draft.ConversationID))
		if err != nil {
			return err
		}
		win, err = review.WindowIn(tx, a.cfg, h)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // the draft (erased) or its reminder is gone
	}
	if err != nil {
		return err
	}
	if v.State != Waiting {
		return nil
	}
	n := Notice{Stage: args.Stage, Card: card, View: v, Since: rec.At, Retry: job.Attempt > 1}
	if base := a.cfg.BaseURL; base != "" {
		n.Link = base + "/drafts?" + url.Values{"id": {v.Draft.ID}}.Encode()
	}
	var chatOK bool
	if args.Stage == StageEscalate {
		n.Chat, chatOK = rm.EscalateTo(v.Client)
	} else {
		n.Chat, chatOK = s.Chat(v.Client)
	}
	if !chatOK {
		return nil // the configuration changed: this surface no longer has a place for it
	}
	who := oneLine(v.Customer) + " on " + v.Channel
	switch args.Stage {
	case StageRemind:
		n.Line = fmt.Sprintf("Still waiting for approval after %s: %s (%s).", waitText(now.Sub(v.Draft.CreatedAt)), who, v.ClientName)
	case StageEscalate:
		n.Line = fmt.Sprintf("Escalated: a reply to %s (%s) has waited %s for approval.", who, v.ClientName, waitText(now.Sub(v.Draft.CreatedAt)))
	case StageWindow:
		left := win.Left(now)
		if left <= 0 {
			return nil // closed already: a free-form reply can no longer go
		}
		after := "after that only a template can answer"
		if !win.Templates {
			after = "after that only another channel can answer"
		}
		n.Line = fmt.Sprintf("The reply window of %s (%s) closes at %s, in %s; %s.", who, v.ClientName, win.Closes.UTC().Format("15:04 UTC"), waitText(left), after)
	default:
		return &jobs.Discard{Err: fmt.Errorf("%q is not a reminder stage", args.Stage)}
	}
	if err := rm.Remind(ctx, n); err != nil {
		return fmt.Errorf("approvals: %s reminder of draft %s on %s: %w", args.Stage, args.Draft, args.Surface, err)
	}
	return nil
}

// waitText is a wait as people say it: 45m, 2h15m, 3d4h.
func waitText(d time.Duration) string {
	d = d.Truncate(time.Minute)
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}
