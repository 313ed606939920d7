package workers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/approvals"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// KindDigest writes one send of a digest of waiting drafts (DigestJob).
const KindDigest = "digest"

// digestLines is how many waiting drafts a digest lists, oldest first.
const digestLines = 10

// DigestArgs name one send of a digest: the digest (digests[].name) and
// the period it stands for, "at-<UTC minute>" for a scheduled send or
// "oldest-<draft id>" for the crossing of oldest_after by that draft. The
// pair is the job's key and the outbox row's id, so a period is sent once.
type DigestArgs struct {
	Digest string `json:"digest"`
	Period string `json:"period"`
}

// Kind is the digest job kind.
func (DigestArgs) Kind() string { return KindDigest }

// Key is the digest's outbox id, "digest:<name>:<period>": retention
// prunes the job with the row it wrote (as it does a stuck-lead alert's).
func (a DigestArgs) Key() string { return delivery.DigestID(a.Digest, a.Period) }

// schedPeriod is the period of a scheduled digest fired at now: its
// minute, the finest a cron schedule fires at.
func schedPeriod(now time.Time) string {
	return "at-" + now.UTC().Truncate(time.Minute).Format("20060102T1504Z")
}

// crossPeriod is the period of the crossing announced for draft id.
func crossPeriod(id string) string { return "oldest-" + id }

// DigestJob turns a digest's period into its message: it reads the
// waiting drafts the digest may show and writes the text, then creates the
// outbox row and its delivery job in one write transaction that checks the
// row does not exist yet (delivery.CreateDigestTx). The sending itself is the delivery job's, with
// every rule of a reply's: claimed before the call, each attempt recorded,
// an unknown outcome never resent blindly. Running it again (a retry, a
// crash before the job completed) finds the row and does nothing, so a
// period's digest exists once; a period with nothing waiting sends nothing.
type DigestJob struct {
	Store  *store.Store
	Config *config.Config
	Now    func() time.Time
	Wake   func() // tells the runner a delivery job exists; may be nil
}

func (k *DigestJob) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Run writes the digest of one period.
func (k *DigestJob) Run(ctx context.Context, job store.Job) error {
	args, err := jobs.Decode[DigestArgs](job)
	if err != nil {
		return err
	}
	dg, ok := digestNamed(k.Config, args.Digest)
	if !ok {
		return &jobs.Discard{Err: fmt.Errorf("digest %q is no longer configured", args.Digest)}
	}
	now, id := k.now(), delivery.DigestID(dg.Name, args.Period)
	// The text is written in a read transaction: a client's digest reads
	// every waiting draft, and the writer need not wait on that. Only the
	// row's creation, which checks that none exists, needs the write.
	text := ""
	err = k.Store.View(func(tx *store.Tx) error {
		switch _, err := tx.Outbox(id); {
		case err == nil:
			return nil // this period was written already
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		w, err := tx.WaitingDrafts(digestKeep(k.Config, dg), digestLines)
		if err != nil || w.Count == 0 {
			return err
		}
		text, err = digestText(tx, k.Config, dg, w, now, args.Period)
		return err
	})
	if err != nil {
		return fmt.Errorf("digest %s: %w", id, err)
	}
	if text == "" {
		return nil // sent before, or nothing waits
	}
	created, jobID := false, ulid.Make().String() // minted once: fn may run twice
	err = k.Store.Update(ctx, func(tx *store.Tx) error {
		var err error
		created, err = delivery.CreateDigestTx(tx, delivery.Digest{
			Name: dg.Name, Period: args.Period, Provider: dg.To, To: dg.Address, Text: text, At: now,
			JobID: jobID, MaxAttempts: k.Config.Retry.MaxAttempts,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("digest %s: %w", id, err)
	}
	if created && k.Wake != nil {
		k.Wake()
	}
	return nil
}

func digestNamed(cfg *config.Config, name string) (config.Digest, bool) {
	for _, dg := range cfg.Digests {
		if dg.Name == name {
			return dg, true
		}
	}
	return config.Digest{}, false
}

// digestKeep is the drafts a digest may show: its client's channels' and
// its owner's, or every draft (nil) when it names neither.
func digestKeep(cfg *config.Config, dg config.Digest) func(store.Draft) bool {
	if dg.Client == "" && dg.Owner == "" {
		return nil
	}
	vis := store.Everything()
	if dg.Client != "" {
		vis = store.OnlyChannels(cfg.ClientChannels(dg.Client)...)
	}
	return func(d store.Draft) bool { return vis.Draft(d) && (dg.Owner == "" || d.Owner == dg.Owner) }
}

// digestText is the digest's message: the count, the oldest's wait, a
// line per draft (customer, channel, first words, the link that opens
// it) and a link to the queue. The links are GETs of the dashboard,
// which open a draft and never decide one.
func digestText(tx *store.Tx, cfg *config.Config, dg config.Digest, w store.Waiting, now time.Time, period string) (string, error) {
	var b strings.Builder
	drafts := "drafts wait"
	if w.Count == 1 {
		drafts = "draft waits"
	}
	fmt.Fprintf(&b, "%d %s for approval", w.Count, drafts)
	var scope []string
	if dg.Client != "" {
		name := dg.Client
		if cl, ok := cfg.Client(dg.Client); ok {
			name = cl.Name
		}
		scope = append(scope, name)
	}
	if dg.Owner != "" {
		scope = append(scope, "owner "+dg.Owner)
	}
	if len(scope) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(scope, ", "))
	}
	fmt.Fprintf(&b, "; the oldest has waited %s.", age(now.Sub(w.Oldest[0].CreatedAt)))
	if strings.HasPrefix(period, "oldest-") {
		fmt.Fprintf(&b, " That is past the %s this digest allows.", age(dg.OldestAfter))
	}
	b.WriteString("\n")
	for _, d := range w.Oldest {
		who, words := "someone", ""
		switch ev, err := tx.EventByKey(d.EventKey); {
		case err == nil:
			who = firstOf(ev.Name, ev.Contact, who)
			words = firstWords(ev.Text, 60)
		case !errors.Is(err, store.ErrNotFound):
			return "", err
		}
		line := fmt.Sprintf("- %s (%s, %s ago)", clean(who), d.Channel, age(now.Sub(d.CreatedAt)))
		if words != "" {
			line += ": “" + words + "”"
		}
		fmt.Fprintf(&b, "%s %s/drafts?%s\n", line, cfg.BaseURL, url.Values{"id": {d.ID}}.Encode())
		// With approvals.email, each draft's reply address: a mail to it
		// decides the draft (approvals/mail.go); the link only opens it.
		if addr, ok := approvals.ReplyAddress(cfg, d.ID); ok {
			fmt.Fprintf(&b, "  decide by mail (ok, no, or your own reply) to %s\n", addr)
		}
	}
	if more := w.Count - len(w.Oldest); more > 0 {
		fmt.Fprintf(&b, "…and %d more.\n", more)
	}
	closing, err := closingLines(tx, cfg, dg, now)
	if err != nil {
		return "", err
	}
	if len(closing) > 0 {
		fmt.Fprintf(&b, "Reply windows closing within %s (after that only a template, or another channel, can answer):\n", age(review.WindowWarning(cfg)))
		for _, l := range closing {
			b.WriteString(l + "\n")
		}
	}
	queue := cfg.BaseURL + "/drafts"
	if dg.Owner != "" {
		queue += "?" + url.Values{"owner": {dg.Owner}}.Encode()
	}
	fmt.Fprintf(&b, "Open the queue: %s\n", queue)
	// Slack's control characters are escaped by its provider, for every
	// message it posts.
	return b.String(), nil
}

// closingCandidates is how many waiting drafts of channels with a reply
// window a digest looks at, oldest first, for windows about to close.
const closingCandidates = 50

// closingLines are the digest's warnings: the waiting drafts it may show
// whose lead's reply window (review/window.go) closes within
// review.WindowWarning (review.window_warning) of now, a line each. A waiting draft was written
// after its lead's latest message (a newer one supersedes it), so one
// older than the longest window has none left: the walk keeps only
// younger drafts of channels with a window, and looks at the oldest
// closingCandidates of them, whose windows close first. Nothing is read
// when no channel has a window.
func closingLines(tx *store.Tx, cfg *config.Config, dg config.Digest, now time.Time) ([]string, error) {
	longest := time.Duration(0)
	for _, ch := range cfg.Channels {
		longest = max(longest, review.WindowLength(cfg, ch.Name))
	}
	if longest == 0 {
		return nil, nil
	}
	keep := digestKeep(cfg, dg)
	w, err := tx.WaitingDrafts(func(d store.Draft) bool {
		return (keep == nil || keep(d)) && review.WindowLength(cfg, d.Channel) > 0 && d.CreatedAt.After(now.Add(-longest))
	}, closingCandidates)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range w.Oldest {
		h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
		if errors.Is(err, store.ErrNotFound) || tx.Skip(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		win, err := review.WindowIn(tx, cfg, h)
		if err != nil {
			return nil, err
		}
		left := win.Left(now)
		if left <= 0 || left > review.WindowWarning(cfg) {
			continue
		}
		out = append(out, fmt.Sprintf("- %s (%s): closes in %s %s/drafts?%s", clean(firstOf(h.Name, h.Contact, "someone")), d.Channel, age(left), cfg.BaseURL, url.Values{"id": {d.ID}}.Encode()))
	}
	return out, nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// clean puts s on one line with single spaces.
func clean(s string) string { return strings.Join(strings.Fields(s), " ") }

// firstWords is the start of s on one line, cut at a word before max
// runes, with an ellipsis when cut.
func firstWords(s string, max int) string {
	s = clean(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	cut := string([]rune(s)[:max])
	if i := strings.LastIndexByte(cut, ' '); i > max/2 {
		cut = cut[:i]
	}
	return cut + "…"
}

// age is a wait as people say it: 45m, 2h15m, 3d4h; under a minute, "<1m".
func age(d time.Duration) string {
	d = d.Truncate(time.Minute)
	switch {
	case d < time.Minute:
		return "<1m"
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

// ScheduleDigests adds each digest's schedule to s, and the check of the
// oldest waiting draft every minute when any digest has oldest_after.
// Cron expressions are read in the process's local time zone (TZ).
func (m *Maintenance) ScheduleDigests(s *jobs.Schedule) error {
	check := false
	for _, dg := range m.Config.Digests {
		check = check || dg.OldestAfter > 0
		if dg.Schedule == "" {
			continue
		}
		name := dg.Name
		if err := s.Add("digest "+name, dg.Schedule, time.Minute, func(ctx context.Context) error { return m.ScheduledDigest(ctx, name) }); err != nil {
			return fmt.Errorf("schedule digest %s: %w", name, err)
		}
	}
	if check {
		return s.Add("check digest thresholds", "@every 1m", time.Minute, m.CheckDigests)
	}
	return nil
}

// ScheduledDigest enqueues the digest job of digest name for the minute
// it is now, when a draft it may show is waiting; a second call in the
// same minute (or while that job is live) enqueues nothing.
func (m *Maintenance) ScheduledDigest(ctx context.Context, name string) error {
	now := m.now()
	dg, ok := digestNamed(m.Config, name)
	if !ok {
		return fmt.Errorf("scheduled digest %s is not configured", name)
	}
	created := false
	err := m.Store.Update(ctx, func(tx *store.Tx) error {
		created = false
		// Nothing waiting, nothing to say: no job either.
		_, waits, err := tx.OldestWaiting(digestKeep(m.Config, dg))
		if err != nil || !waits {
			return err
		}
		_, created, err = jobs.Enqueue(tx, DigestArgs{Digest: name, Period: schedPeriod(now)},
			jobs.Opts{MaxAttempts: m.Config.Retry.MaxAttempts, CorrelationID: "digest:" + name, Now: now})
		return err
	})
	if err != nil {
		return fmt.Errorf("scheduled digest %s: %w", name, err)
	}
	if created && m.Wake != nil {
		m.Wake()
	}
	return nil
}

// CheckDigests looks, for every digest with oldest_after, at the oldest
// waiting draft it may show. The check that first sees it past the
// threshold marks the crossing (store.DigestMark) and enqueues the digest
// job in one write transaction; later checks while it stays past send
// nothing, and the mark clears once no draft is past it, so the next
// crossing sends again. Most checks change nothing and are a read alone.
// (A crossing that begins and ends between two checks, a minute apart,
// is not seen.)
func (m *Maintenance) CheckDigests(ctx context.Context) error {
	now := m.now()
	woke := false
	for _, dg := range m.Config.Digests {
		if dg.OldestAfter <= 0 {
			continue
		}
		keep := digestKeep(m.Config, dg)
		changes := false
		err := m.Store.View(func(tx *store.Tx) error {
			_, _, changed, err := crossing(tx, dg, keep, now)
			changes = changed
			return err
		})
		if err != nil {
			return fmt.Errorf("digest %s: check the oldest waiting draft: %w", dg.Name, err)
		}
		if !changes {
			continue
		}
		enqueued := false
		err = m.Store.Update(ctx, func(tx *store.Tx) error {
			enqueued = false
			mark, send, changed, err := crossing(tx, dg, keep, now)
			if err != nil || !changed {
				return err
			}
			if err := tx.PutDigestMark(dg.Name, mark); err != nil {
				return err
			}
			if !send {
				return nil
			}
			_, enqueued, err = jobs.Enqueue(tx, DigestArgs{Digest: dg.Name, Period: crossPeriod(mark.Draft)},
				jobs.Opts{MaxAttempts: m.Config.Retry.MaxAttempts, CorrelationID: "digest:" + dg.Name, Now: now})
			return err
		})
		if err != nil {
			return fmt.Errorf("digest %s: mark the crossing: %w", dg.Name, err)
		}
		woke = woke || enqueued
	}
	if woke && m.Wake != nil {
		m.Wake()
	}
	return nil
}

// crossing decides, from the stored mark and the oldest waiting draft the
// digest may show, the mark to store and whether to send: changed is
// false when the mark stands as it is.
func crossing(tx *store.Tx, dg config.Digest, keep func(store.Draft) bool, now time.Time) (mark store.DigestMark, send, changed bool, err error) {
	mark, err = tx.DigestMark(dg.Name)
	if err != nil {
		return mark, false, false, err
	}
	oldest, ok, err := tx.OldestWaiting(keep)
	if err != nil {
		return mark, false, false, err
	}
	over := ok && now.Sub(oldest.CreatedAt) > dg.OldestAfter
	switch {
	case over && !mark.Over:
		return store.DigestMark{Over: true, Draft: oldest.ID, At: now}, true, true, nil
	case !over && mark.Over:
		return store.DigestMark{}, false, true, nil
	}
	return mark, false, false, nil
}
