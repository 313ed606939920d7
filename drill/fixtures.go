package drill

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/handoff/handoff/proc"
)

// The channels of the drill's instance, one per fixture, each with its own
// provider so that one fixture's knobs never touch another's.
var drillChannels = []channel{
	{"storm", "sbx-storm", 0},
	{"burst", "sbx-burst", burstQuiet},
	{"crash", "sbx-crash", 0},
	{"idem", "sbx-idem", 0},
	{"nokey", "sbx-nokey", 0},
	{"slow", "sbx-slow", 0},
	{"dead", "sbx-dead", 0},
	{"drop", "remote-drop", 0},
	{"late", "remote-late", 0},
}

// burstQuiet is the burst channel's quiet period: far longer than three
// posts take, short enough to keep the drill quick.
const burstQuiet = 2 * time.Second

// providers are the sandbox providers, with a sabotage applied to the
// instance (never to what a fixture expects).
func providers(sabotage string) []sandbox {
	idem := sandbox{name: "sbx-idem", idempotencyKey: true, timeoutAfterAccept: true, noLookup: true}
	slow := sandbox{name: "sbx-slow", delay: 3 * time.Second}
	switch sabotage {
	case "idempotency":
		idem.idempotencyKey = false
	case "lookup":
		slow.noLookup = true
	}
	return []sandbox{
		{name: "sbx-storm"},
		{name: "sbx-burst"},
		{name: "sbx-crash"},
		idem,
		{name: "sbx-nokey", timeoutAfterAccept: true, noLookup: true},
		slow,
		{name: "sbx-dead"},
	}
}

// remotes are the providers of kind http, both served by rm in the drill
// process, with a sabotage applied to the instance.
func remotes(rm *remote, sabotage string) []httpProvider {
	// The drop fixture's lookups find what the provider accepted at once;
	// a short settle keeps a surprise "not found" from stalling it.
	drop := httpProvider{name: "remote-drop", url: rm.url("drop"), lookupURL: rm.lookupURL("drop"), timeout: 5 * time.Second, lookupSettle: 2 * time.Second}
	// Far below lateStore, so every send times out before the provider
	// has stored it; the settle is a few times lateStore.
	late := httpProvider{name: "remote-late", url: rm.url("late"), lookupURL: rm.lookupURL("late"), timeout: 300 * time.Millisecond, lookupSettle: 3 * lateStore}
	switch sabotage {
	case "settle":
		late.lookupSettle = time.Millisecond
	case "dedupe":
		drop.idempotencyKey = true
	}
	return []httpProvider{drop, late}
}

// fixtures in run order. They share one instance and run one at a time;
// each waits for its own events to settle before the next starts, which
// matters for draft-crash: its fault kills the process after any draft.
var fixtures = []fixture{
	{
		name: "duplicates", label: "1 duplicate storm",
		expected: "20 accepted, 180 duplicate; 1 model call and 1 message per id; all sent, every lead replied",
		run:      (*drill).duplicates,
	},
	{
		name: "burst", label: "1b burst of messages from one lead",
		expected: "3 messages in a second, one lead: 1 model call, 1 draft answering all 3, 1 message, lead replied",
		run:      (*drill).burst,
	},
	{
		name: "draft-crash", label: "2 crash right after the draft commits",
		expected: "after restart the stored draft is used (never a second model call): 1 model call, 1 message, row sent",
		run:      (*drill).draftCrash,
	},
	{
		name: "idempotency", label: "3 timeout after accept, idempotency key",
		expected: "row sent, 1 message for the reference (a deduplicated repeat is fine)",
		run:      (*drill).idempotency,
	},
	{
		name: "no-key", label: "4 timeout after accept, no key, no lookup",
		expected: "row needs_reconciliation, 1 message, nothing resent (repeats 0)",
		run:      (*drill).noKey,
	},
	{
		name: "kill-mid-delivery", label: "5 SIGKILL mid-delivery",
		expected: "every row sent, 1 message each, repeats 0 (looked up, not resent blindly)",
		run:      (*drill).killMidDelivery,
	},
	{
		name: "replay-job", label: "6a replay of a discarded draft job",
		expected: "discarded after 3 attempts, listed; replay: 3 failed + 1 ok model calls, 1 message, row sent",
		run:      (*drill).replayJob,
	},
	{
		name: "replay-reply", label: "6b replay of fixture 4's reply",
		expected: "409 without confirm; confirmed: still 1 message, row back in needs_reconciliation (the provider already has it)",
		needs:    []string{"no-key"},
		run:      (*drill).replayReply,
	},
	{
		name: "drop-reused", label: "7 provider drops a reused connection after accepting",
		expected: "every row sent, 1 message each, repeats 0: a lost answer is looked up, never resent by the HTTP client",
		run:      (*drill).dropReused,
	},
	{
		name: "late-lookup", label: "8 provider slower than the timeout, with lookup",
		expected: "every row sent, 1 message each, repeats 0: an early \"not found\" waits for lookup_settle",
		run:      (*drill).lateLookup,
	},
}

// inbound is the body of one webhook delivery to a drill channel.
type inbound struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	From           string `json:"from"`
	Name           string `json:"name"`
	Text           string `json:"text"`
}

// event is the delivery for one tag: the tag is the message id, the lead,
// and a marker in the text the fake model counts calls by.
func event(tag string) inbound {
	return inbound{
		ID: tag, ConversationID: "lead-" + tag, From: "drill+" + tag + "@example.invalid", Name: "Drill",
		Text: "[drill:" + tag + "] Hello, I would like a quote for a small website.",
	}
}

// send delivers one new event and insists that it is accepted.
func (d *drill) send(ch, tag string) (string, error) {
	code, a, err := d.inst.post(ch, event(tag))
	if err != nil {
		return "", err
	}
	if code != http.StatusAccepted || a.Status != "accepted" {
		return "", fmt.Errorf("POST /hooks/%s for %s: %d %q %s; want 202 accepted", ch, tag, code, a.Status, a.Error)
	}
	return a.EventKey, nil
}

// ---- 1 ----

// duplicates posts 20 events 10 times each, all at once: each must be
// recorded, drafted and sent once.
func (d *drill) duplicates(ctx context.Context, r *result) error {
	const ids, posts = 20, 200
	tags := make([]string, ids)
	for n := range tags {
		tags[n] = fmt.Sprintf("dup-%02d", n)
	}
	type answer struct {
		code   int
		status string
		err    error
	}
	answers := make([]answer, posts)
	var wg sync.WaitGroup
	start := make(chan struct{}) // a barrier, so the posts really race
	for n := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, a, err := d.inst.post("storm", event(tags[n%ids]))
			answers[n] = answer{code, a.Status, err}
		}()
	}
	close(start)
	wg.Wait()
	accepted, duplicate, other := 0, 0, 0
	var firstOther string
	for _, a := range answers {
		switch {
		case a.err == nil && a.code == http.StatusAccepted && a.status == "accepted":
			accepted++
		case a.err == nil && a.code == http.StatusOK && a.status == "duplicate":
			duplicate++
		default:
			if other++; firstOther == "" {
				firstOther = fmt.Sprintf("%d %q %v", a.code, a.status, a.err)
			}
		}
	}
	r.happened = fmt.Sprintf("%d accepted, %d duplicate", accepted, duplicate)
	if other > 0 {
		r.happened += fmt.Sprintf(", %d other", other)
	}
	r.check(accepted == ids && duplicate == posts-ids && other == 0,
		"answers: %d accepted, %d duplicate, %d other (first: %s); want %d accepted (202) and %d duplicate (200)",
		accepted, duplicate, other, firstOther, ids, posts-ids)

	keys := make([]string, ids)
	for n, tag := range tags {
		keys[n] = "storm:" + tag
	}
	tls, err := d.settle(ctx, keys, 30*time.Second)
	d.report(r, tags, keys, tls)
	if err != nil {
		return err
	}
	d.expectPerEvent(r, tags, keys, tls, want{modelCalls: 1, noRepeats: true, row: "sent", lead: "replied"})
	return nil
}

// ---- 1b ----

// burst posts three messages of one lead at once ("hi" / "can I book for
// Friday" / "4 people", as people type on a phone): they are one turn of
// the conversation, drafted once after the quiet period and answered once.
func (d *drill) burst(ctx context.Context, r *result) error {
	const tag = "burst" // in every message: the model counts the turn's calls
	texts := []string{"hi", "can I book for Friday", "4 people"}
	keys := make([]string, len(texts))
	for n, text := range texts {
		ev := inbound{
			ID: fmt.Sprintf("burst-%d", n), ConversationID: "lead-burst", From: "drill+burst@example.invalid", Name: "Drill",
			Text: "[drill:" + tag + "] " + text,
		}
		code, a, err := d.inst.post("burst", ev)
		if err != nil {
			return err
		}
		if code != http.StatusAccepted {
			return fmt.Errorf("POST /hooks/burst for %s: %d %q %s; want 202 accepted", ev.ID, code, a.Status, a.Error)
		}
		keys[n] = a.EventKey
	}
	tls, err := d.settle(ctx, keys, 30*time.Second)
	d.report(r, []string{tag}, keys[:1], tls)
	if err != nil {
		return err
	}
	calls, _ := d.model.count(tag)
	rows := map[string]bool{}
	for _, k := range keys {
		if o := tls[k].Outbox; o != nil {
			rows[o.ID] = true
		}
	}
	r.happened = fmt.Sprintf("%d model call(s), %d reply row(s) for %d messages", calls, len(rows), len(keys))
	r.check(calls == 1, "the burst cost %d model calls; want 1", calls)
	r.check(len(rows) == 1, "the burst's messages have %d reply rows %v; want 1, the turn's", len(rows), rows)
	if dr := tls[keys[0]].Draft; dr == nil || len(dr.Answers) != len(keys) {
		r.check(false, "the turn's draft answers %v; want all %d messages", dr, len(keys))
	}
	d.expectPerEvent(r, []string{tag}, keys[:1], tls, want{modelCalls: 1, noRepeats: true, row: "sent", lead: "replied"})
	return nil
}

// ---- 2 ----

// draftCrash kills the process right after a draft commits: the restarted
// job must use the stored draft instead of calling the model again.
func (d *drill) draftCrash(ctx context.Context, r *result) error {
	const tag = "crash-01"
	key := "crash:" + tag
	prev := d.inst.cur().Number()
	err := d.inst.stop()
	r.check(err == nil, "run %d, stopped with SIGTERM to restart with the fault: %v; want exit status 0", prev, err)
	if err := d.inst.start(ctx, "HANDOFF_FAULT=exit-after-draft-commit"); err != nil {
		return fmt.Errorf("start with HANDOFF_FAULT=exit-after-draft-commit: %w", err)
	}
	faulty := d.inst.cur()
	if _, err := d.send("crash", tag); err != nil && !faulty.Wait(time.Second) {
		// (A lost answer is no failure when the process died right
		// after recording the event: the restart shows whether it did.)
		return err
	}
	if !faulty.Wait(20 * time.Second) {
		r.happened = "the process with the fault did not die within 20s of the event"
		return fmt.Errorf("run %d did not kill itself after the draft committed (HANDOFF_FAULT=exit-after-draft-commit)", faulty.Number())
	}
	r.check(faulty.ExitSignal() == syscall.SIGKILL, "run %d with the fault ended with %s; want signal: killed", faulty.Number(), faulty.Exit())
	d.inst.client.CloseIdleConnections()
	if err := d.inst.start(ctx); err != nil {
		return fmt.Errorf("restart after the crash: %w", err)
	}
	tls, err := d.settle(ctx, []string{key}, 20*time.Second)
	d.report(r, []string{tag}, []string{key}, tls)
	r.happened = fmt.Sprintf("run %d died (%s) after the draft committed; run %d sent the reply from it", faulty.Number(), faulty.Exit(), d.inst.cur().Number())
	if err != nil {
		return err
	}
	d.expectPerEvent(r, []string{tag}, []string{key}, tls, want{modelCalls: 1, noRepeats: true, row: "sent", lead: "replied"})
	t := tls[key]
	for _, j := range t.Jobs {
		if j.Kind == "draft" {
			r.states += "; draft job attempts: " + attemptOutcomes(j.Attempts)
		}
	}
	return nil
}

// ---- 3 ----

// idempotency: the provider takes the message and then times out, but it
// deduplicates by our key, so a resend with the same key is safe.
func (d *drill) idempotency(ctx context.Context, r *result) error {
	const tag = "idem-01"
	key, err := d.send("idem", tag)
	if err != nil {
		return err
	}
	tls, err := d.settle(ctx, []string{key}, 20*time.Second)
	d.report(r, []string{tag}, []string{key}, tls)
	if err != nil {
		return err
	}
	o := tls[key].Outbox
	r.happened = "row " + o.Status + " after " + outboxAttempts(o)
	d.expectPerEvent(r, []string{tag}, []string{key}, tls, want{modelCalls: 1, row: "sent", lead: "replied"})
	return nil
}

// ---- 4 ----

// nokeyTag is fixture no-key's event, whose reply replay-reply replays.
const nokeyTag = "nokey-01"

// noKey: the provider takes the message and then times out, and can
// neither deduplicate nor look it up, so only a person can say; nothing is
// resent.
func (d *drill) noKey(ctx context.Context, r *result) error {
	const tag = nokeyTag
	key, err := d.send("nokey", tag)
	if err != nil {
		return err
	}
	tls, err := d.settle(ctx, []string{key}, 20*time.Second)
	d.report(r, []string{tag}, []string{key}, tls)
	if err != nil {
		return err
	}
	o := tls[key].Outbox
	d.nokeyRow = o.ID
	r.happened = "row " + o.Status + " after " + outboxAttempts(o)
	d.expectPerEvent(r, []string{tag}, []string{key}, tls, want{modelCalls: 1, noRepeats: true, row: "needs_reconciliation"})
	return nil
}

// ---- 5 ----

// killMidDelivery kills the process while provider calls are under way:
// after the restart every unknown outcome is looked up before any resend.
func (d *drill) killMidDelivery(ctx context.Context, r *result) error {
	tags := []string{"slow-01", "slow-02", "slow-03"}
	var keys []string
	for _, tag := range tags {
		key, err := d.send("slow", tag)
		if err != nil {
			return err
		}
		keys = append(keys, key)
	}
	// Watch the rows until every draft is stored (so a model call cut short
	// by the kill cannot blur the count) and one row is claimed with its
	// provider call under way.
	var atKill map[string]int
	err := proc.Eventually(ctx, 20*time.Second, func() (bool, error) {
		tls, err := d.timelines(keys)
		if err != nil {
			return false, err
		}
		atKill = map[string]int{}
		for _, t := range tls {
			if t.Outbox != nil {
				atKill[t.Outbox.Status]++
			}
		}
		rows := 0
		for _, n := range atKill {
			rows += n
		}
		return rows == len(keys) && atKill["effect_pending"] > 0, nil
	})
	if err != nil {
		r.happened = "no row was seen effect_pending: " + countStates(atKill)
		return fmt.Errorf("waiting for an effect_pending row: %w", err)
	}
	killed := d.inst.cur().Number()
	if err := d.inst.kill(); err != nil {
		return err
	}
	if err := d.inst.start(ctx); err != nil {
		return fmt.Errorf("restart after SIGKILL: %w", err)
	}
	tls, err := d.settle(ctx, keys, 30*time.Second)
	d.report(r, tags, keys, tls)
	r.happened = fmt.Sprintf("SIGKILL of run %d with rows %s; after restart %s", killed, countStates(atKill), outboxSummary(keys, tls))
	if err != nil {
		return err
	}
	d.expectPerEvent(r, tags, keys, tls, want{modelCalls: 1, noRepeats: true, row: "sent", lead: "replied"})
	return nil
}

// ---- 6a ----

// replayJob lets a draft job fail until it is discarded, then replays it
// from the dead-letter list once the model works again.
func (d *drill) replayJob(ctx context.Context, r *result) error {
	const tag = "dead-01"
	d.model.fail(tag, true)
	key, err := d.send("dead", tag)
	if err != nil {
		return err
	}
	var dl deadLetter
	err = proc.Eventually(ctx, 20*time.Second, func() (bool, error) {
		items, err := d.inst.deadLetters("job", "dead")
		if err != nil {
			return false, err
		}
		for _, it := range items {
			if it.EventKey == key {
				dl = it
				return true, nil
			}
		}
		return false, nil
	})
	calls, failed := d.model.count(tag)
	if err != nil {
		r.happened = fmt.Sprintf("not seen on the dead-letter list; %d failed model calls by then", failed)
		r.model = fmt.Sprintf("%d (%d failed)", calls, failed)
		return fmt.Errorf("waiting for the discarded draft job on GET /api/v1/dead-letters?kind=job&channel=dead: %w", err)
	}
	r.check(calls == maxAttempts && failed == maxAttempts, "model calls before the replay: %d (%d failed); want %d failed", calls, failed, maxAttempts)
	r.check(dl.State == "discarded", "the dead letter's state is %q; want discarded", dl.State)

	d.model.fail(tag, false)
	code, body, err := d.inst.replay(dl.ID, nil)
	if err != nil {
		return err
	}
	r.happened = fmt.Sprintf("listed (%s) after %d failed calls; replay answered %d", dl.State, failed, code)
	if code != http.StatusOK {
		return fmt.Errorf("POST /api/v1/dead-letters/%s/replay: %d %s; want 200", dl.ID, code, body)
	}
	tls, err := d.settle(ctx, []string{key}, 20*time.Second)
	d.report(r, []string{tag}, []string{key}, tls)
	calls, failed = d.model.count(tag)
	r.model = fmt.Sprintf("%d failed + %d ok", failed, calls-failed)
	if err != nil {
		return err
	}
	r.happened += "; then row " + tls[key].Outbox.Status
	d.expectPerEvent(r, []string{tag}, []string{key}, tls, want{noRepeats: true, row: "sent", lead: "replied"})
	r.check(calls == maxAttempts+1 && failed == maxAttempts, "model calls for the event: %d failed + %d ok; want %d failed + 1 ok", failed, calls-failed, maxAttempts)
	return nil
}

// ---- 6b ----

// replayReply replays fixture 4's reply, which may have been delivered:
// refused unconfirmed, and confirmed it must not produce a second copy.
func (d *drill) replayReply(ctx context.Context, r *result) error {
	id := d.nokeyRow
	if id == "" {
		r.happened = "fixture 4 left no row to replay"
		return fmt.Errorf("fixture 4 left no needs_reconciliation row")
	}
	var dl deadLetter
	err := proc.Eventually(ctx, 10*time.Second, func() (bool, error) {
		items, err := d.inst.deadLetters("outbox", "nokey")
		if err != nil {
			return false, err
		}
		for _, it := range items {
			if it.ID == id {
				dl = it
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		r.happened = "the row is not on the dead-letter list"
		return fmt.Errorf("waiting for outbox row %s on GET /api/v1/dead-letters?kind=outbox&channel=nokey: %w", id, err)
	}
	r.check(dl.State == "needs_reconciliation" && !dl.Safe, "listed as %s, safe=%v; want needs_reconciliation, safe=false", dl.State, dl.Safe)
	before, err := d.inst.outbox(id)
	if err != nil {
		return err
	}

	code, body, err := d.inst.replay(id, nil)
	if err != nil {
		return err
	}
	r.happened = fmt.Sprintf("without confirm %d", code)
	r.check(code == http.StatusConflict, "replay without confirm: %d %s; want 409", code, body)
	code, body, err = d.inst.replay(id, map[string]any{"confirm": id})
	if err != nil {
		return err
	}
	r.happened += fmt.Sprintf(", with confirm %d", code)
	if code != http.StatusOK {
		return fmt.Errorf("replay with {\"confirm\":%q}: %d %s; want 200", id, code, body)
	}
	var o outboxRow
	err = proc.Eventually(ctx, 20*time.Second, func() (bool, error) {
		var err error
		o, err = d.inst.outbox(id)
		if err != nil {
			return false, err
		}
		return len(o.Attempts) > len(before.Attempts) && final(o.Status), nil
	})
	if err != nil {
		r.happened += "; row still " + o.Status
		return fmt.Errorf("waiting for the replayed row to settle: %w", err)
	}
	tag, key := nokeyTag, "nokey:"+nokeyTag
	tls, err := d.settle(ctx, []string{key}, 10*time.Second)
	d.report(r, []string{tag}, []string{key}, tls)
	if err != nil {
		return err
	}
	r.states += " (" + outboxAttempts(&o) + ")"
	msgs, err := d.inst.sandbox()
	if err != nil {
		return err
	}
	_, ok := msgs[id]
	calls, _ := d.model.count(tag)
	r.happened += "; row ended " + o.Status
	if o.Status == "needs_reconciliation" {
		r.happened += " (the provider refused a second copy)"
	}
	r.check(ok, "no message for %s at the provider", id)
	r.check(o.Status == "needs_reconciliation", "the replayed row ended %s; want needs_reconciliation: the provider refused a second copy, so only a person can say it was sent", o.Status)
	r.check(calls == 1, "model calls for the event: %d; want 1 (a reply replay does not draft again)", calls)
	return nil
}

// ---- 7 ----

// dropReused sends through a provider that accepts every message and then
// closes, unanswered, each connection it had answered on before. An HTTP
// client that replays such a request by itself delivers a second copy
// that no attempt records; handoff must instead look the message up.
func (d *drill) dropReused(ctx context.Context, r *result) error {
	tags := []string{"drop-01", "drop-02", "drop-03", "drop-04", "drop-05", "drop-06"}
	// The first reply opens a connection and leaves it idle, so the next
	// send is sure to reuse it.
	first, err := d.send("drop", tags[0])
	if err != nil {
		return err
	}
	if _, err := d.settle(ctx, []string{first}, 20*time.Second); err != nil {
		return err
	}
	keys := []string{first}
	for _, tag := range tags[1:] {
		key, err := d.send("drop", tag)
		if err != nil {
			return err
		}
		keys = append(keys, key)
	}
	tls, err := d.settle(ctx, keys, 30*time.Second)
	d.report(r, tags, keys, tls)
	c := d.remote.counts("drop", outboxIDs(keys, tls))
	r.happened = fmt.Sprintf("%d POSTs, %d dropped on a reused connection; %d rows found by lookup", c.posts, c.dropped, lastAction(keys, tls, "lookup:sent"))
	if err != nil {
		return err
	}
	r.check(c.dropped > 0, "the provider dropped no reused connection (%d POSTs): the instance reused none, so nothing was rehearsed", c.posts)
	d.expectPerEvent(r, tags, keys, tls, want{modelCalls: 1, noRepeats: true, row: "sent", lead: "replied"})
	d.expectRemoteIDs(r, keys, tls)
	return nil
}

// ---- 8 ----

// lateLookup sends through a provider that stores a message lateStore
// after the request, with the instance's timeout far shorter: the lookup
// after each timeout comes before the provider has stored anything, and
// that "not found" must not count as "not sent" until lookup_settle has
// passed, or the message is sent a second time.
func (d *drill) lateLookup(ctx context.Context, r *result) error {
	tags := []string{"late-01", "late-02", "late-03", "late-04"}
	var keys []string
	for _, tag := range tags {
		key, err := d.send("late", tag)
		if err != nil {
			return err
		}
		keys = append(keys, key)
	}
	tls, err := d.settle(ctx, keys, 30*time.Second)
	d.report(r, tags, keys, tls)
	c := d.remote.counts("late", outboxIDs(keys, tls))
	r.happened = fmt.Sprintf("%d POSTs timed out; %d lookups came before the provider had stored (%d recorded not_found_yet)",
		c.posts, c.notFound, attemptsWith(keys, tls, "lookup:not_found_yet"))
	if err != nil {
		return err
	}
	r.check(c.notFound > 0, "no lookup came before the provider had stored a message: the race was not rehearsed")
	d.expectPerEvent(r, tags, keys, tls, want{modelCalls: 1, noRepeats: true, row: "sent", lead: "replied"})
	d.expectRemoteIDs(r, keys, tls)
	return nil
}

// expectRemoteIDs checks that every sent row carries the id the outside
// provider gave its message.
func (d *drill) expectRemoteIDs(r *result, keys []string, tls map[string]timeline) {
	msgs := d.remote.messages()
	for _, k := range keys {
		if o := tls[k].Outbox; o != nil && o.Status == "sent" {
			m, ok := msgs[o.ID]
			r.check(ok && o.ProviderID == m.ID, "%s: row sent as %q; want the provider's id %q", k, o.ProviderID, m.ID)
		}
	}
}

// ---- waiting and reporting ----

// messages is what the sandbox and the outside provider received, by our
// reference.
func (d *drill) messages() (map[string]sandboxMessage, error) {
	msgs, err := d.inst.sandbox()
	if err != nil {
		return nil, err
	}
	for ref, m := range d.remote.messages() {
		msgs[ref] = m
	}
	return msgs, nil
}

// outboxIDs is the outbox row of each key that has one.
func outboxIDs(keys []string, tls map[string]timeline) []string {
	var ids []string
	for _, k := range keys {
		if t, ok := tls[k]; ok && t.Outbox != nil {
			ids = append(ids, t.Outbox.ID)
		}
	}
	return ids
}

// lastAction counts the rows of keys whose last attempt was step ("lookup:sent").
func lastAction(keys []string, tls map[string]timeline, step string) int {
	n := 0
	for _, k := range keys {
		if t, ok := tls[k]; ok && t.Outbox != nil && len(t.Outbox.Attempts) > 0 {
			a := t.Outbox.Attempts[len(t.Outbox.Attempts)-1]
			if a.Action+":"+a.Outcome == step {
				n++
			}
		}
	}
	return n
}

// attemptsWith counts the attempts of the rows of keys that were step.
func attemptsWith(keys []string, tls map[string]timeline, step string) int {
	n := 0
	for _, k := range keys {
		if t, ok := tls[k]; ok && t.Outbox != nil {
			for _, a := range t.Outbox.Attempts {
				if a.Action+":"+a.Outcome == step {
					n++
				}
			}
		}
	}
	return n
}

// final reports whether an outbox status needs nothing more from the instance.
func final(status string) bool {
	return status == "sent" || status == "failed" || status == "needs_reconciliation"
}

// timelines fetches the timelines of keys, a few at a time.
func (d *drill) timelines(keys []string) (map[string]timeline, error) {
	const parallel = 8
	var (
		mu    sync.Mutex
		out   = make(map[string]timeline, len(keys))
		first error
		wg    sync.WaitGroup
		next  = make(chan string)
	)
	for range min(parallel, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range next {
				t, err := d.inst.event(key)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				} else if err == nil {
					out[key] = t
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	return out, first
}

// settle waits until every event's reply row is in a final state and its
// jobs have ended, and returns the last timelines seen (also on a timeout, for the report).
func (d *drill) settle(ctx context.Context, keys []string, within time.Duration) (map[string]timeline, error) {
	var last map[string]timeline
	err := proc.Eventually(ctx, within, func() (bool, error) {
		tls, err := d.timelines(keys)
		if err != nil {
			return false, err
		}
		last = tls
		for _, k := range keys {
			t, ok := tls[k]
			if !ok || t.Outbox == nil || !final(t.Outbox.Status) {
				return false, nil
			}
			for _, j := range t.Jobs {
				if j.State != "completed" && j.State != "discarded" && j.State != "cancelled" {
					return false, nil // its job records the outcome after the row
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return last, fmt.Errorf("waiting for the replies to settle: %w; last seen: %s", err, outboxSummary(keys, last))
	}
	return last, nil
}

// report fills the model, messages and states columns from what the model
// and the provider saw and the timelines.
func (d *drill) report(r *result, tags, keys []string, tls map[string]timeline) {
	total, failed := 0, 0
	for _, tag := range tags {
		c, f := d.model.count(tag)
		total, failed = total+c, failed+f
	}
	r.model = fmt.Sprintf("%d", total)
	if failed > 0 {
		r.model += fmt.Sprintf(" (%d failed)", failed)
	}
	if msgs, err := d.messages(); err == nil {
		n, repeats := 0, 0
		for _, k := range keys {
			if t, ok := tls[k]; ok && t.Outbox != nil {
				if m, ok := msgs[t.Outbox.ID]; ok {
					n++
					repeats += m.Repeats
				}
			}
		}
		r.messages = fmt.Sprintf("%d, repeats %d", n, repeats)
	} else {
		r.messages = "unknown: " + err.Error()
	}
	jobs := map[string]map[string]int{"draft": {}, "deliver": {}}
	leads := map[string]int{}
	for _, k := range keys {
		t, ok := tls[k]
		if !ok {
			continue
		}
		for _, j := range t.Jobs {
			if jobs[j.Kind] == nil {
				jobs[j.Kind] = map[string]int{}
			}
			jobs[j.Kind][j.State]++
		}
		if t.Handoff != nil {
			leads[t.Handoff.Status]++
		}
	}
	r.states = fmt.Sprintf("draft %s; deliver %s; outbox %s; leads %s",
		countStates(jobs["draft"]), countStates(jobs["deliver"]), outboxSummary(keys, tls), countStates(leads))
}

// want is what every event of a fixture must end with.
type want struct {
	modelCalls int    // calls to the model per event; 0: the fixture checks them itself
	noRepeats  bool   // the provider saw no second send of the reference
	row        string // the outbox row's status
	lead       string // the lead's status; "" is not checked
}

// expectPerEvent checks every event against w; each must also have exactly
// one message at the provider, its draft job completed, and, once its reply
// is sent, its delivery job completed.
func (d *drill) expectPerEvent(r *result, tags, keys []string, tls map[string]timeline, w want) {
	msgs, err := d.messages()
	if err != nil {
		r.check(false, "GET /api/v1/sandbox/messages: %v", err)
		return
	}
	for n, key := range keys {
		t := tls[key]
		if c, _ := d.model.count(tags[n]); w.modelCalls > 0 && c != w.modelCalls {
			r.check(false, "%s: %d model calls; want %d", key, c, w.modelCalls)
		}
		if t.Outbox == nil {
			r.check(false, "%s: no outbox row", key)
			continue
		}
		o := t.Outbox
		r.check(o.Status == w.row, "%s: outbox row %s is %s (%s); want %s", key, o.ID, o.Status, outboxAttempts(o), w.row)
		m, ok := msgs[o.ID]
		r.check(ok, "%s: the provider has no message for %s; want exactly 1", key, o.ID)
		if w.noRepeats {
			r.check(!ok || m.Repeats == 0, "%s: the provider saw %d repeated send(s) of %s; want none", key, m.Repeats, o.ID)
		}
		for _, j := range t.Jobs {
			if j.Kind == "draft" || o.Status == "sent" {
				r.check(j.State == "completed", "%s: %s job %s is %s; want completed", key, j.Kind, j.ID, j.State)
			}
		}
		if w.lead != "" {
			got := "none"
			if t.Handoff != nil {
				got = t.Handoff.Status
			}
			r.check(got == w.lead, "%s: the lead is %s; want %s", key, got, w.lead)
		}
	}
}

// countStates says "20 completed" or "19 sent, 1 effect_pending".
func countStates(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

// outboxSummary counts the rows of keys by status.
func outboxSummary(keys []string, tls map[string]timeline) string {
	m := map[string]int{}
	for _, k := range keys {
		switch t, ok := tls[k]; {
		case !ok:
			m["unknown"]++
		case t.Outbox == nil:
			m["no row"]++
		default:
			m[t.Outbox.Status]++
		}
	}
	return countStates(m)
}

// outboxAttempts says "send:ambiguous, resend:sent".
func outboxAttempts(o *outboxRow) string {
	if o == nil || len(o.Attempts) == 0 {
		return "no attempts"
	}
	var parts []string
	for _, a := range o.Attempts {
		parts = append(parts, a.Action+":"+a.Outcome)
	}
	return strings.Join(parts, ", ")
}

// attemptOutcomes says "lease_expired, completed".
func attemptOutcomes(as []attempt) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, a.Outcome)
	}
	return strings.Join(parts, ", ")
}
