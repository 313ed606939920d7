package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"

	"golang.org/x/sync/semaphore"
)

// historyLimit bounds the earlier messages a drafter sees.
const historyLimit = 10

// DefaultContextTokens is the token budget of the earlier conversation
// (drafter.context_tokens' default).
const DefaultContextTokens = 1000

// estimateTokens is the usual rough count of about four characters a token:
// enough to keep a prompt within a budget without the model's tokenizer.
func estimateTokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

// Drafter writes a reply for one message.
type Drafter interface {
	Draft(ctx context.Context, in drafter.Input) (drafter.Output, error)
}

// DraftJob drafts a reply to an event and routes it; review.Record then
// stores the result against the event key, auto-approves it and completes
// the job, in one transaction with the lead's new status. The stored draft
// is the record of the drafting call: an attempt that finds it reuses it and
// never calls the drafter again.
type DraftJob struct {
	Store   *store.Store
	Review  *review.Review
	Drafter Drafter
	Router  Router
	// Now is the clock the job's completion is recorded in; nil: time.Now.
	Now func() time.Time
	// AfterSave, when set, runs right after the draft commits (crash tests
	// kill the process there); by then the job is complete too.
	AfterSave func()
	// Observe, when set, is told of every drafter call (metrics).
	Observe func(drafter, outcome string, promptTokens, outputTokens int64)
	// DrafterName labels the drafter in metrics (template, openai).
	DrafterName string
	// ObserveCost, when set, is told of every stored draft's cost (metrics).
	ObserveCost func(channel, promptVersion, currency string, cost float64)
	// Bodies, when set, bounds the bytes of the events being drafted at
	// once (limits.bodies_in_flight; apart from the webhooks' own budget):
	// each run reserves its event's stored size before it reads it, so
	// draft_workers jobs over large messages do not hold them all at once.
	// A run that finds no room within BodyWait is snoozed, costing no
	// attempt.
	Bodies *semaphore.Weighted
	// BodiesSize is Bodies' size, the most one run reserves.
	BodiesSize int64
	// BodyWait bounds a run's wait for room; 0: DefaultBodyWait.
	BodyWait time.Duration
	// Budget, when set, says which client a channel's drafts are paid by,
	// that client's daily budget (0: none) and the channels that share it.
	Budget func(channel string) (client string, limit float64, channels []string)
	// ContextTokens is the budget of the earlier conversation given to the
	// drafter, newest first; 0: DefaultContextTokens.
	ContextTokens int
	// Client, when set, names the client a channel belongs to, whose
	// newest facts version (facts.Current) each draft is written from,
	// read as the job runs: an edit on the dashboard is used by the next
	// draft, without a restart.
	Client func(channel string) string
	// BudgetRecheck is how long a draft held back by its client's calls in
	// flight waits before it asks the budget again; 0: DefaultBudgetRecheck.
	BudgetRecheck time.Duration
	// Canary, when set, drafts a share of some clients' new turns with a
	// candidate drafter (canary.go).
	Canary *Canary
}

// DefaultBodyWait is how long a draft waits for room among the events
// being drafted before it is snoozed.
const DefaultBodyWait = 10 * time.Second

// reserveBody takes the event's stored size n from Bodies (at most all of
// it) before the event is read, and returns what gives it back. No room
// within BodyWait is a Snooze, which costs no attempt.
func (k *DraftJob) reserveBody(ctx context.Context, n int) (release func(), err error) {
	if k.Bodies == nil {
		return func() {}, nil
	}
	want := min(max(int64(n), 1), k.BodiesSize)
	wait := k.BodyWait
	if wait <= 0 {
		wait = DefaultBodyWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := k.Bodies.Acquire(wctx, want); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &jobs.Snooze{Err: fmt.Errorf("the events being drafted already hold limits.bodies_in_flight (%d bytes); this one (%d bytes) waits", k.BodiesSize, n), After: time.Second}
	}
	return func() { k.Bodies.Release(want) }, nil
}

// InterruptedByStop is true: a stop cancels a draft in flight at once (the
// model call aborted) rather than wait for it. Its answer is stored in
// one commit or not at all, so the job is simply drafted again after the
// restart; a draft stored before the cut is reused.
func (k *DraftJob) InterruptedByStop() bool { return true }

// Run drafts the event job.Key unless its draft is already stored.
func (k *DraftJob) Run(ctx context.Context, job store.Job) error {
	p, err := jobs.Decode[review.DraftArgs](job)
	if err != nil {
		return err
	}
	// What the draft is made from is read in two snapshots, where it was
	// six read transactions (each its own round trips on PostgreSQL):
	// whether it is stored already, with the event's size, which
	// reserveBody holds before the event is read into memory; then the
	// event, its turn, the conversation before it and the client's facts.
	var stored bool
	size := 0
	err = k.Store.View(func(tx *store.Tx) error {
		d, err := tx.DraftByEvent(job.Key)
		if err == nil && d.Version >= p.RegenerateVersion {
			stored = true
			return nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("draft for %s: %w", job.Key, err)
		}
		if k.Bodies != nil {
			size, err = tx.EventSize(job.Key)
			return err
		}
		return nil
	})
	switch {
	case stored:
		return k.record(ctx, job, nil, 0) // an attempt that stored it did not complete the job
	case errors.Is(err, store.ErrNotFound):
		return &jobs.Discard{Err: fmt.Errorf("event %s: %w", job.Key, err)}
	case err != nil:
		return err
	}
	release, err := k.reserveBody(ctx, size)
	if err != nil {
		return err
	}
	defer release()
	var (
		ev       store.Event
		missing  error
		turn     store.Turn
		history  []drafter.Message
		fv       store.FactsVersion
		hasFacts bool
	)
	err = k.Store.View(func(tx *store.Tx) error {
		var err error
		if ev, err = tx.EventByKey(job.Key); errors.Is(err, store.ErrNotFound) {
			missing = fmt.Errorf("event %s: %w", job.Key, err)
			return nil
		} else if err != nil {
			return fmt.Errorf("event %s: %w", job.Key, err)
		}
		// The draft answers the lead's whole turn (leads/turns.go): every
		// message since its last reply, read as it stands now that the job
		// runs.
		if turn, err = tx.TurnOf(job.Key); err != nil {
			return fmt.Errorf("turn of %s: %w", job.Key, err)
		}
		if !turn.Current {
			return nil
		}
		if history, err = k.history(tx, turn); err != nil {
			return err
		}
		if k.Client != nil {
			client := k.Client(ev.Channel)
			if fv, hasFacts, err = facts.CurrentIn(tx, client); err != nil {
				return fmt.Errorf("facts of client %s: %w", client, err)
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case missing != nil:
		return &jobs.Discard{Err: missing}
	case !turn.Current:
		return k.record(ctx, job, nil, 0) // a newer message moved the turn to another draft
	}
	history, used := k.withinBudget(history)
	in := turnInput(ev, turn.Events, history)
	// The owner is a hint for the drafter (the template names it); the
	// recorded decision is made again below on the drafter's validated fields.
	hint := k.Router.Route(ev.Channel, in.Text, routingFields(drafter.Extract(in.Text), ev))
	in.Owner, in.Instruction = hint.Owner, p.Instruction
	factsText := ""
	if hasFacts && len(fv.Entries) > 0 {
		in.Facts, factsText = DrafterFacts(fv.Version, fv.Entries), fv.Text
	}
	client, err := k.holdBudget(ctx, job, ev.Channel)
	if err != nil {
		return err
	}
	if client != "" {
		// Every way out but the commit that stores the draft (which
		// releases the hold itself) gives the hold back.
		defer func() {
			if client != "" {
				k.releaseBudget(ctx, client, job.ExecutionID)
			}
		}()
	}
	dr, arm, err := k.drafterFor(ev.Channel, turn)
	if err != nil {
		return err
	}
	out, err := dr.Draft(ctx, in)
	var invalid *drafter.InvalidOutput
	var permanent *drafter.PermanentError
	var refused *drafter.Refused
	var limited *drafter.RateLimited
	if k.Observe != nil {
		outcome := "ok"
		switch {
		case errors.As(err, &invalid):
			outcome = "invalid"
		case errors.As(err, &refused):
			outcome = "refused"
		case errors.As(err, &limited):
			outcome = "rate_limited"
		case err != nil:
			outcome = "error"
		}
		k.Observe(k.DrafterName, outcome, out.PromptTokens, out.OutputTokens)
	}
	switch {
	case errors.As(err, &invalid):
		return &jobs.WithRaw{Err: err, Raw: invalid.Raw}
	case errors.As(err, &refused):
		// Asking again gets the same refusal: the lead waits in the dead
		// letters with the model's words, for a person to write the reply.
		return &jobs.Discard{Err: &jobs.WithRaw{Err: err, Raw: refused.Raw}}
	case errors.As(err, &limited) && limited.After > 0:
		// The queue's due time carries the server's Retry-After; the
		// worker is free meanwhile.
		return &jobs.RetryLater{Err: err, After: limited.After}
	case errors.As(err, &permanent):
		return &jobs.Discard{Err: err}
	case err != nil:
		return fmt.Errorf("draft %s: %w", ev.Key, err)
	}
	dec := k.Router.Route(ev.Channel, in.Text, routingFields(out.Fields, ev))
	err = k.recordReleasing(ctx, job, client, &store.Draft{
		// The ID SaveTx gives it, set now so the save reads it ahead.
		ID:       store.DraftVersionID(ev.ID, max(p.RegenerateVersion, 1)),
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
		ConversationID: ev.ConversationID, Text: out.Text, Drafter: out.Drafter,
		Model: out.Model, Template: out.Template, PromptVersion: out.PromptVersion,
		InputHash: out.InputHash, Raw: out.Raw, Fields: out.Fields,
		Owner: dec.Owner, RuleVersion: dec.Version, Rule: dec.Rule,
		PromptTokens: out.PromptTokens, OutputTokens: out.OutputTokens,
		ExecutionID: job.ExecutionID, CreatedAt: job.Attempts[len(job.Attempts)-1].StartedAt,
		Answers: turn.Keys(), Instruction: p.Instruction,
		PromptHash: out.PromptHash, FactsHash: out.FactsHash, Structured: out.Structured,
		FactsVersion: out.FactsVersion, FactsCited: citedEntries(out.Cited),
		Cost: out.Cost, Currency: out.Currency, Notes: out.Notes,
		ContextTokens: used, ContextBudget: k.contextBudget(), ContextMessages: len(history),
		Guards: k.guard(out, in, factsText), // before a person sees it (review/quality.go)
		Canary: arm,
	}, max(p.RegenerateVersion, 1))
	if err != nil {
		return err
	}
	client = "" // released in the commit that stored the draft
	if k.ObserveCost != nil {
		k.ObserveCost(ev.Channel, out.PromptVersion, out.Currency, out.Cost)
	}
	if k.AfterSave != nil {
		k.AfterSave()
	}
	return nil
}

// record stores d as version n (nil: the draft is already stored),
// auto-approves it and completes job, in one commit (review.Record). The
// model's answer is stored even when the attempt's context has just ended:
// it is the record of the call, and a retry reuses it.
func (k *DraftJob) record(ctx context.Context, job store.Job, d *store.Draft, n int) error {
	return k.recordReleasing(ctx, job, "", d, n)
}

// recordReleasing is record that also releases client's budget hold of
// this execution (none when client is empty) in the same commit, so the
// budget never counts the call twice, as a hold and as a stored cost, nor
// misses it in between.
func (k *DraftJob) recordReleasing(ctx context.Context, job store.Job, client string, d *store.Draft, n int) error {
	var then func(tx *store.Tx) error
	if client != "" {
		then = func(tx *store.Tx) error { return tx.ReleaseBudget(client, job.ExecutionID) }
	}
	_, err := k.Review.Record(context.WithoutCancel(ctx), job, d, n, k.now().UTC(), then)
	return err
}

// now is k.Now, or the wall clock when unset.
func (k *DraftJob) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// BudgetSpent is a client whose drafting budget for the day is spent: its
// messages wait (the job is due again at the next UTC midnight) until then
// or until a person raises the budget and restarts.
type BudgetSpent struct {
	Client       string
	Spent, Limit float64
}

func (e *BudgetSpent) Error() string {
	return fmt.Sprintf("the daily drafting budget of client %s is spent (%.4f of %.4f): drafting waits until the next day (UTC) or a raised budget", e.Client, e.Spent, e.Limit)
}

// BudgetHeld is a client whose calls in flight may spend what is left of
// its budget: the job waits for them to store their cost, then asks again.
type BudgetHeld struct {
	Client             string
	Spent, Held, Limit float64
	Calls              int
}

func (e *BudgetHeld) Error() string {
	return fmt.Sprintf("client %s has %d drafting calls in flight that may spend what is left of its daily budget (%.4f spent, %.4f held, of %.4f): this draft waits for their cost", e.Client, e.Calls, e.Spent, e.Held, e.Limit)
}

// DefaultBudgetRecheck is DraftJob.BudgetRecheck's default: about as long
// as a model call takes.
const DefaultBudgetRecheck = 10 * time.Second

// holdBudget decides, in one write transaction, whether the channel's
// client may pay for one more drafting call, and when it may, holds the
// call's expected cost (the day's costliest draft) until the commit that
// stores the draft releases it. A call is let through while the day's
// stored costs, the holds of the calls in flight and this call's expected
// cost stay within the budget, or while no other call is in flight and
// the stored costs are below it. So the budget is overshot by at most one
// call a day per client (the last one let through), when no call costs
// more than the day's costliest so far; the first call of a day, whose
// cost nothing predicts yet, runs alone. It returns the client held ("":
// no budget, nothing held). Both refusals are a Snooze: the job waits
// without spending an attempt, so a message is never dead-lettered for a
// budget.
func (k *DraftJob) holdBudget(ctx context.Context, job store.Job, channel string) (string, error) {
	if k.Budget == nil {
		return "", nil
	}
	client, limit, channels := k.Budget(channel)
	if limit <= 0 {
		return "", nil
	}
	t := k.now().UTC()
	day := t.Truncate(24 * time.Hour)
	until := t.Add(time.Hour)
	if job.LeaseUntil != nil {
		until = *job.LeaseUntil
	}
	var refused error
	err := k.Store.Update(ctx, func(tx *store.Tx) error {
		refused = nil
		sp, err := tx.Spend(day, channels)
		if err != nil {
			return err
		}
		holds, err := tx.BudgetHolds(client, t)
		if err != nil {
			return err
		}
		held, calls := 0.0, 0
		for _, h := range holds {
			if h.ExecutionID != job.ExecutionID {
				held, calls = held+h.Reserve, calls+1
			}
		}
		switch {
		case sp.Total >= limit:
			refused = &jobs.Snooze{Err: &BudgetSpent{Client: client, Spent: sp.Total, Limit: limit}, After: day.Add(24 * time.Hour).Sub(t)}
			return nil
		case calls > 0 && (sp.Drafts == 0 || sp.Total+held+sp.Largest > limit):
			refused = &jobs.Snooze{Err: &BudgetHeld{Client: client, Spent: sp.Total, Held: held, Limit: limit, Calls: calls}, After: cmp.Or(k.BudgetRecheck, DefaultBudgetRecheck)}
			return nil
		}
		return tx.HoldBudget(store.BudgetHold{Client: client, ExecutionID: job.ExecutionID, Reserve: sp.Largest, Until: until}, t)
	})
	if err != nil {
		return "", fmt.Errorf("check the drafting budget of client %s: %w", client, err)
	}
	if refused != nil {
		return "", refused
	}
	return client, nil
}

// releaseBudget gives back the hold of an attempt that stored no draft
// (the model failed, the attempt was cancelled). A hold it fails to
// release, or one left behind by a stopped process, ends with the job's
// lease: until then it only holds drafts back, never lets one through.
func (k *DraftJob) releaseBudget(ctx context.Context, client, execID string) {
	_ = k.Store.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		return tx.ReleaseBudget(client, execID)
	})
}

// budgetOf is the Budget of a config: a channel's client, its budget
// (config.BudgetOf) and its channels.
func budgetOf(cfg *config.Config) func(string) (string, float64, []string) {
	return func(channel string) (string, float64, []string) {
		client := cfg.ClientOf(channel)
		return client, cfg.BudgetOf(client), cfg.ClientChannels(client)
	}
}

func (k *DraftJob) contextBudget() int {
	if k.ContextTokens > 0 {
		return k.ContextTokens
	}
	return DefaultContextTokens
}

// withinBudget keeps the newest messages of history whose estimated
// tokens fit the context budget, and returns how many tokens they use.
func (k *DraftJob) withinBudget(history []drafter.Message) ([]drafter.Message, int) {
	budget, used := k.contextBudget(), 0
	i := len(history)
	for i > 0 {
		n := estimateTokens(history[i-1].Text)
		if used+n > budget {
			break
		}
		used += n
		i--
	}
	return history[i:], used
}

// routingFields adds the event's contact to the extracted fields, so a rule
// can ask for `has: contact`.
func routingFields(fields map[string]string, ev store.Event) map[string]string {
	f := maps.Clone(fields)
	if f == nil {
		f = map[string]string{}
	}
	if ev.Contact != "" {
		f["contact"] = ev.Contact
	}
	if ev.Name != "" && f["name"] == "" {
		f["name"] = ev.Name
	}
	return f
}

// history is the lead's messages before the turn and the replies approved
// for them that were sent (or are being sent), newest last, bounded; the
// job then keeps the newest of it within the context budget.
func (k *DraftJob) history(tx *store.Tx, turn store.Turn) ([]drafter.Message, error) {
	first := turn.Events[0]
	lead := store.LeadKey(first.Channel, first.ConversationID)
	earlier, err := tx.Conversation(lead, first.ID, historyLimit)
	if err != nil {
		return nil, fmt.Errorf("conversation of %s: %w", lead, err)
	}
	var msgs []drafter.Message
	for _, e := range earlier {
		if slices.Contains(turn.Keys(), e.Key) {
			continue // minted before the turn's first message, recorded after it
		}
		msgs = append(msgs, drafter.Message{From: "customer", Text: e.Text})
		d, err := tx.DraftByEvent(e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if d.Status == store.DraftApproved {
			if d.OutboxID != "" {
				// Only a reply that went out, or may have, is part of
				// the conversation: one whose send failed never reached
				// the customer.
				o, err := tx.Outbox(d.OutboxID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return nil, err
				}
				if err == nil && o.Status == store.OutboxFailed {
					continue
				}
			}
			text := d.Text
			if d.Decision != nil && d.Decision.Text != "" {
				text = d.Decision.Text // what was approved, edits included
			}
			msgs = append(msgs, drafter.Message{From: "agent", Text: text})
		}
	}
	if len(msgs) > historyLimit {
		msgs = msgs[len(msgs)-historyLimit:]
	}
	return msgs, nil
}

// guardInput is what the guards compare a draft of in with: the turn's
// messages, the earlier conversation the drafter was given, the contact.
// guard runs the guards on a model's draft. The template drafter's reply
// is the operator's own text, not written by a model, so it can neither
// invent a figure nor pick a language: it is not guarded (nil, as a draft
// from before the guards), and auto_approve treats it as before.
// The figures are checked against the facts version the draft was written
// from (factsText), not whatever is current when the check runs.
func (k *DraftJob) guard(out drafter.Output, in drafter.Input, factsText string) *store.Guards {
	if out.Drafter == "template" {
		return nil
	}
	g := guardInput(in)
	g.Facts = factsText
	return k.Review.Guard(out.Text, g)
}

// DrafterFacts is a facts version as the drafter is given it.
func DrafterFacts(version int, entries []store.FactEntry) *drafter.Facts {
	f := &drafter.Facts{Version: version, Entries: make([]drafter.Fact, len(entries))}
	for i, e := range entries {
		f.Entries[i] = drafter.Fact{ID: e.ID, Text: e.Text}
	}
	return f
}

// citedEntries is the entries a reply cites, as the draft keeps them.
func citedEntries(cited []drafter.Fact) []store.FactEntry {
	var out []store.FactEntry
	for _, c := range cited {
		out = append(out, store.FactEntry{ID: c.ID, Text: c.Text})
	}
	return out
}

func guardInput(in drafter.Input) review.GuardInput {
	g := review.GuardInput{Channel: in.Channel, Customer: in.Text, Contact: in.Contact}
	for _, m := range in.History {
		g.Conversation = append(g.Conversation, m.Text)
	}
	return g
}

// turnInput is the drafter's input for a draft of ev, the newest event of
// a turn whose messages are turn (in the order they were recorded), after
// the conversation's earlier messages history. The sender is ev's, else
// the latest message's that names one.
func turnInput(ev store.Event, turn []store.Event, history []drafter.Message) drafter.Input {
	in := drafter.Input{
		EventKey: ev.Key, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Contact: ev.Contact, Name: ev.Name, Text: ev.Text,
		History: history, CorrelationID: ev.CorrelationID,
	}
	if len(turn) <= 1 {
		return in
	}
	texts := make([]string, 0, len(turn))
	for _, e := range turn {
		if t := strings.TrimSpace(e.Text); t != "" {
			texts = append(texts, t)
		}
		if in.Contact == "" {
			in.Contact = e.Contact
		}
		if in.Name == "" {
			in.Name = e.Name
		}
	}
	in.Messages, in.Text = texts, strings.Join(texts, "\n")
	return in
}
