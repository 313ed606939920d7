package intake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/workers"
)

// The turn tests run the real intake, draft job and approval over a real
// store, with the clock given explicitly: the quiet period is a due time in
// the queue, so "after the quiet period" is a Claim at a later now.

const coalesce = 10 * time.Second

// fakeModel answers differently on every call, as a model does, and keeps
// every input it was given.
type fakeModel struct {
	mu     sync.Mutex
	inputs []drafter.Input
	// during, when set, runs once inside the next call, as if while the
	// model thinks.
	during func()
}

func (m *fakeModel) Draft(_ context.Context, in drafter.Input) (drafter.Output, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.during; f != nil {
		m.during = nil
		f()
	}
	m.inputs = append(m.inputs, in)
	return drafter.Output{
		Text: fmt.Sprintf("reply %d to %q", len(m.inputs), in.Text), Drafter: "fake", PromptVersion: "v1",
		InputHash: in.Hash(), Fields: map[string]string{},
	}, nil
}

func (m *fakeModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.inputs)
}

func (m *fakeModel) input(i int) drafter.Input {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inputs[i]
}

// turnConfig has the web channel (approved by people) and the auto channel
// (approving its own drafts), both through the sandbox.
func turnConfig() *config.Config {
	return &config.Config{
		Channels: []config.Channel{
			{Name: "web", Provider: "sandbox", Coalesce: coalesce},
			{Name: "auto", Provider: "sandbox", AutoApprove: true, Coalesce: coalesce},
		},
		Retry:   config.Retry{MaxAttempts: 3},
		Routing: config.Routing{Version: "r1", DefaultOwner: "sales"},
	}
}

type turnKit struct {
	t     *testing.T
	st    *store.Store
	rv    *review.Review
	model *fakeModel
	job   *workers.DraftJob
}

func newTurnKit(t *testing.T) *turnKit {
	st := openStore(t)
	cfg := turnConfig()
	rv := review.New(st, cfg)
	m := &fakeModel{}
	return &turnKit{t: t, st: st, rv: rv, model: m, job: &workers.DraftJob{
		Store: st, Review: rv, Drafter: m, Router: workers.NewRouter(cfg.Routing),
	}}
}

// send records message id from conversation conv on channel at at.
func (k *turnKit) send(channel, conv, id, contact, text string, at time.Time) store.Event {
	k.t.Helper()
	rec, err := intake.Record(context.Background(), k.st, intake.Message{
		Channel: channel, MessageID: id, ConversationID: conv, Contact: contact, Text: text,
		ReceivedAt: at, Coalesce: coalesce,
	}, 3)
	if err != nil || !rec.Created {
		k.t.Fatalf("Record(%s) = created %v, %v", id, rec.Created, err)
	}
	return rec.Event
}

// draftDue claims every job due at now and runs the draft jobs among them
// (delivery jobs are handed back untouched); it returns the draft jobs run.
func (k *turnKit) draftDue(now time.Time) []store.Job {
	k.t.Helper()
	claimed, err := k.st.Claim(context.Background(), now, store.AnyJobs(100), time.Minute)
	if err != nil {
		k.t.Fatalf("Claim: %v", err)
	}
	var ran []store.Job
	for _, j := range claimed {
		if j.Kind != review.KindDraft {
			if _, err := k.st.FinishJob(context.Background(), j.ID, j.ExecutionID, now, store.Result{Outcome: store.OutcomeRetry, RetryAt: now.Add(time.Hour), Released: true}); err != nil {
				k.t.Fatalf("hand back %s: %v", j.ID, err)
			}
			continue
		}
		if err := k.job.Run(context.Background(), j); err != nil {
			k.t.Fatalf("draft job %s: %v", j.Key, err)
		}
		ran = append(ran, j)
	}
	return ran
}

func (k *turnKit) lead(channel, conv string) store.Handoff {
	k.t.Helper()
	h, err := k.st.Handoff(store.LeadKey(channel, conv))
	if err != nil {
		k.t.Fatalf("lead %s:%s: %v", channel, conv, err)
	}
	return h
}

func (k *turnKit) draftOf(ev store.Event) store.Draft {
	k.t.Helper()
	d, err := k.st.DraftByEvent(ev.Key)
	if err != nil {
		k.t.Fatalf("draft of %s: %v", ev.Key, err)
	}
	return d
}

func (k *turnKit) approve(id string) (review.Approved, error) {
	return k.rv.Approve(context.Background(), id, store.Decision{By: "ada", At: t0.Add(time.Hour)})
}

func (k *turnKit) replies() []store.Outbox {
	k.t.Helper()
	rows, err := k.st.OutboxByStatus(store.OutboxPending, 1000)
	if err != nil {
		k.t.Fatalf("OutboxByStatus: %v", err)
	}
	return rows
}

func keysOf(evs ...store.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Key
	}
	return out
}

// TestBurstIsOneTurn: three quick messages ("hi" / "can I book for Friday"
// / "4 people") are one turn: nothing is drafted until the lead has been
// quiet for the quiet period after the last one, then one model call sees
// all three, one draft lists every event, and approving it makes one reply.
func TestBurstIsOneTurn(t *testing.T) {
	k := newTurnKit(t)
	texts := []string{"hi", "can I book for Friday", "4 people"}
	var evs []store.Event
	for i, text := range texts {
		evs = append(evs, k.send("web", "c1", fmt.Sprint("m", i), "ada@example.com", text, t0.Add(time.Duration(i)*time.Second)))
	}
	h := k.lead("web", "c1")
	if h.Turn != 1 || !slices.Equal(h.TurnEvents, keysOf(evs...)) || h.TurnDraft != evs[0].Key {
		t.Errorf("lead turn %d events %v drafted by %s; want turn 1 of %v drafted by %s", h.Turn, h.TurnEvents, h.TurnDraft, keysOf(evs...), evs[0].Key)
	}
	if ran := k.draftDue(t0.Add(2*time.Second + coalesce - time.Millisecond)); len(ran) != 0 {
		t.Fatalf("%d draft jobs ran inside the quiet period; want none", len(ran))
	}
	if ran := k.draftDue(t0.Add(2*time.Second + coalesce)); len(ran) != 1 {
		t.Fatalf("%d draft jobs ran after the quiet period; want 1", len(ran))
	}
	if n := k.model.calls(); n != 1 {
		t.Fatalf("model called %d times; want 1", n)
	}
	in := k.model.input(0)
	if !slices.Equal(in.Messages, texts) || in.Text != strings.Join(texts, "\n") {
		t.Errorf("model saw messages %q text %q; want all three, %q", in.Messages, in.Text, texts)
	}
	d := k.draftOf(evs[0])
	if d.Status != store.DraftPending || !slices.Equal(d.Answers, keysOf(evs...)) {
		t.Errorf("draft %s is %s answering %v; want pending, answering %v", d.ID, d.Status, d.Answers, keysOf(evs...))
	}
	for _, ev := range evs[1:] {
		if _, err := k.st.DraftByEvent(ev.Key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("message %s has a draft of its own (%v); want it answered by %s", ev.Key, err, d.ID)
		}
	}
	tl, err := k.st.Timeline(evs[2].Key)
	if err != nil || tl.AnsweredBy != evs[0].Key || tl.Draft == nil || tl.Draft.ID != d.ID {
		t.Errorf("timeline of the last message: answered by %q, draft %v, %v; want %s's draft %s", tl.AnsweredBy, tl.Draft, err, evs[0].Key, d.ID)
	}
	res, err := k.approve(d.ID)
	if err != nil || !res.Created {
		t.Fatalf("Approve(%s) = %+v, %v", d.ID, res, err)
	}
	if tl, err := k.st.Timeline(evs[1].Key); err != nil || tl.AnsweredBy != evs[0].Key || tl.Outbox == nil || tl.Outbox.ID != "c1:"+d.ID {
		t.Errorf("timeline of a message of the ended turn: answered by %q, outbox %v, %v; want %s's reply", tl.AnsweredBy, tl.Outbox, err, evs[0].Key)
	}
	if rows := k.replies(); len(rows) != 1 || rows[0].ID != "c1:"+d.ID {
		t.Errorf("replies %v; want the one reply c1:%s", rows, d.ID)
	}
	if h := k.lead("web", "c1"); h.TurnDraft != "" || len(h.TurnEvents) != 0 {
		t.Errorf("after the approval the lead's turn is %v drafted by %q; want ended", h.TurnEvents, h.TurnDraft)
	}
	// The reply, drafted under the first message, answers the latest too:
	// once sent, the lead is replied (the move delivery makes as it records the send).
	if err := k.st.Update(context.Background(), func(tx *store.Tx) error { return leads.ReplyTx(tx, res.Outbox, t0.Add(2*time.Hour)) }); err != nil {
		t.Fatalf("ReplyLead: %v", err)
	}
	if h := k.lead("web", "c1"); h.Status != leads.Replied {
		t.Errorf("after the reply to the turn the lead is %s; want replied", h.Status)
	}
	if ran := k.draftDue(t0.Add(time.Hour)); len(ran) != 0 || k.model.calls() != 1 {
		t.Errorf("%d more draft jobs ran, model calls %d; want none more, 1", len(ran), k.model.calls())
	}
}

// TestConcurrentBursts: 20 messages from each of two leads, all at once,
// make one draft job per lead, one model call each, one draft listing the
// lead's 20 events, and one reply each.
func TestConcurrentBursts(t *testing.T) {
	k := newTurnKit(t)
	const n = 20
	convs := []string{"c1", "c2"}
	evs := make([]store.Event, 2*n)
	testkit.Together(2*n, func(i int) {
		conv := convs[i%2]
		rec, err := intake.Record(context.Background(), k.st, intake.Message{
			Channel: "web", MessageID: fmt.Sprintf("%s-m%02d", conv, i/2), ConversationID: conv,
			Contact: conv + "@example.com", Text: fmt.Sprint("part ", i/2), ReceivedAt: t0.Add(time.Duration(i) * time.Millisecond), Coalesce: coalesce,
		}, 3)
		if err != nil || !rec.Created {
			t.Errorf("Record %d = created %v, %v", i, rec.Created, err)
		}
		evs[i] = rec.Event
	})
	if t.Failed() {
		t.FailNow()
	}
	if ran := k.draftDue(t0.Add(time.Hour)); len(ran) != 2 {
		t.Fatalf("%d draft jobs ran; want one per lead", len(ran))
	}
	if c := k.model.calls(); c != 2 {
		t.Fatalf("model called %d times; want once per lead", c)
	}
	for _, conv := range convs {
		h := k.lead("web", conv)
		var want []string
		for i := conv[1] - '1'; int(i) < 2*n; i += 2 {
			want = append(want, evs[i].Key)
		}
		d, err := k.st.DraftByEvent(h.TurnDraft)
		if err != nil {
			t.Fatalf("draft of lead %s (%s): %v", conv, h.TurnDraft, err)
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(d.Answers))
		if !slices.Equal(got, want) || !slices.Equal(d.Answers, h.TurnEvents) || d.Status != store.DraftPending {
			t.Errorf("lead %s: draft %s (%s) answers %v; want pending, every one of its %d events in the order recorded", conv, d.ID, d.Status, d.Answers, n)
		}
		if _, err := k.approve(d.ID); err != nil {
			t.Fatalf("Approve(%s): %v", d.ID, err)
		}
	}
	if rows := k.replies(); len(rows) != 2 {
		t.Errorf("%d replies; want one per lead", len(rows))
	}
}

// TestMessageWhileDraftWaits: a message that arrives while the turn's draft
// waits for approval supersedes it, and a new draft answers the whole turn;
// approving the superseded draft is refused naming the current one, before
// and after it is written.
func TestMessageWhileDraftWaits(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "ada@example.com", "can I book for Friday", t0)
	k.draftDue(t0.Add(coalesce))
	d1 := k.draftOf(e1)
	if d1.Status != store.DraftPending {
		t.Fatalf("first draft is %s; want pending", d1.Status)
	}
	e2 := k.send("web", "c1", "m2", "ada@example.com", "4 people", t0.Add(time.Minute))
	if d := k.draftOf(e1); d.Status != store.DraftSuperseded || d.SupersededBy != store.DraftID(e2.ID) {
		t.Errorf("first draft is %s superseded by %q; want superseded by %s", d.Status, d.SupersededBy, store.DraftID(e2.ID))
	}
	var sup *store.SupersededError
	if _, err := k.approve(d1.ID); !errors.As(err, &sup) || sup.Current != store.DraftID(e2.ID) {
		t.Errorf("Approve(superseded %s) = %v; want a SupersededError naming %s", d1.ID, err, store.DraftID(e2.ID))
	}
	if ran := k.draftDue(t0.Add(time.Minute + coalesce - time.Millisecond)); len(ran) != 0 {
		t.Errorf("the new draft job ran inside the quiet period")
	}
	k.draftDue(t0.Add(time.Minute + coalesce))
	d2 := k.draftOf(e2)
	if d2.Status != store.DraftPending || !slices.Equal(d2.Answers, keysOf(e1, e2)) {
		t.Errorf("new draft %s is %s answering %v; want pending, answering %v", d2.ID, d2.Status, d2.Answers, keysOf(e1, e2))
	}
	if in := k.model.input(1); !slices.Equal(in.Messages, []string{"can I book for Friday", "4 people"}) {
		t.Errorf("the redraft saw %q; want both messages", in.Messages)
	}
	if _, err := k.approve(d1.ID); !errors.As(err, &sup) || sup.Current != d2.ID {
		t.Errorf("Approve(superseded %s) after the redraft = %v; want a SupersededError naming %s", d1.ID, err, d2.ID)
	}
	if _, err := k.approve(d2.ID); err != nil {
		t.Fatalf("Approve(%s): %v", d2.ID, err)
	}
	if rows := k.replies(); len(rows) != 1 || rows[0].DraftID != d2.ID {
		t.Errorf("replies %v; want one, of %s", rows, d2.ID)
	}
	if c, err := k.st.Counts(nil); err != nil || c.DraftsWaiting != 0 {
		t.Errorf("drafts waiting %d, %v; want 0", c.DraftsWaiting, err)
	}
}

// TestMessageWhileDrafting: a message that arrives while the turn's draft
// is being written makes a draft job of its own; the draft in flight is
// stored superseded (the record of the model call) and the new one answers
// both messages. A draft job that finds its turn moved on before it calls
// the model completes without calling it.
func TestMessageWhileDrafting(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "ada@example.com", "hi", t0)
	var e2 store.Event
	k.model.during = func() { e2 = k.send("web", "c1", "m2", "ada@example.com", "4 people", t0.Add(coalesce+time.Second)) }
	k.draftDue(t0.Add(coalesce))
	if d := k.draftOf(e1); d.Status != store.DraftSuperseded || d.SupersededBy != store.DraftID(e2.ID) || !slices.Equal(d.Answers, keysOf(e1)) {
		t.Errorf("the draft in flight is %s superseded by %q answering %v; want superseded by %s, answering %s", d.Status, d.SupersededBy, d.Answers, store.DraftID(e2.ID), e1.Key)
	}
	var sup *store.SupersededError
	if _, err := k.approve(store.DraftID(e1.ID)); !errors.As(err, &sup) || sup.Current != store.DraftID(e2.ID) {
		t.Errorf("Approve(the draft in flight) = %v; want a SupersededError naming %s", err, store.DraftID(e2.ID))
	}

	// The next message arrives after e2's job is claimed, before it reads the turn.
	claimed, err := k.st.Claim(context.Background(), t0.Add(2*coalesce+time.Second), store.AnyJobs(10), time.Minute)
	if err != nil || len(claimed) != 1 || claimed[0].Key != e2.Key {
		t.Fatalf("Claim = %v, %v; want e2's draft job", claimed, err)
	}
	e3 := k.send("web", "c1", "m3", "ada@example.com", "at 8pm", t0.Add(2*coalesce+2*time.Second))
	if err := k.job.Run(context.Background(), claimed[0]); err != nil {
		t.Fatalf("e2's draft job: %v", err)
	}
	if _, err := k.st.DraftByEvent(e2.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("e2's draft job wrote a draft (%v); want none, its turn moved on", err)
	}
	if j, err := k.st.Job(claimed[0].ID); err != nil || j.State != store.JobCompleted {
		t.Errorf("e2's draft job is %s, %v; want completed", j.State, err)
	}
	if c := k.model.calls(); c != 1 {
		t.Errorf("model called %d times; want once so far", c)
	}
	k.draftDue(t0.Add(3*coalesce + 2*time.Second))
	if d := k.draftOf(e3); d.Status != store.DraftPending || !slices.Equal(d.Answers, keysOf(e1, e2, e3)) {
		t.Errorf("new draft is %s answering %v; want pending, answering %v", d.Status, d.Answers, keysOf(e1, e2, e3))
	}
	if c, err := k.st.Counts(nil); err != nil || c.DraftsWaiting != 1 {
		t.Errorf("drafts waiting %d, %v; want 1", c.DraftsWaiting, err)
	}
}

// TestMessageAfterApprovalStartsNextTurn: once the turn's draft is
// approved, a new message starts the next turn (the approved reply still
// goes out), and the history says so.
func TestMessageAfterApprovalStartsNextTurn(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "ada@example.com", "hi", t0)
	k.draftDue(t0.Add(coalesce))
	d1 := k.draftOf(e1)
	if _, err := k.approve(d1.ID); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	e2 := k.send("web", "c1", "m2", "ada@example.com", "one more thing", t0.Add(time.Minute))
	if d := k.draftOf(e1); d.Status != store.DraftApproved {
		t.Errorf("the approved draft is %s; want approved still", d.Status)
	}
	h := k.lead("web", "c1")
	if h.Turn != 2 || !slices.Equal(h.TurnEvents, keysOf(e2)) || h.TurnDraft != e2.Key {
		t.Errorf("lead turn %d events %v; want turn 2 of %s alone", h.Turn, h.TurnEvents, e2.Key)
	}
	last := h.History[len(h.History)-1]
	if last.EventKey != e2.Key || !strings.Contains(last.Note, "starts turn 2") || !strings.Contains(last.Note, "still goes out") {
		t.Errorf("lead history ends with %+v; want the note that turn 2 starts and the reply still goes out", last)
	}
	k.draftDue(t0.Add(time.Minute + coalesce))
	if d := k.draftOf(e2); d.Status != store.DraftPending || !slices.Equal(d.Answers, keysOf(e2)) {
		t.Errorf("turn 2's draft is %s answering %v; want pending, answering %s alone", d.Status, d.Answers, e2.Key)
	}
	if rows := k.replies(); len(rows) != 1 || rows[0].DraftID != d1.ID {
		t.Errorf("replies %v; want turn 1's, still pending", rows)
	}
}

// TestNoCoalesceDraftsAtOnce: coalesce 0 makes the draft job due when the
// message arrives, as before turns.
func TestNoCoalesceDraftsAtOnce(t *testing.T) {
	st := openStore(t)
	rec, err := intake.Record(context.Background(), st, intake.Message{Channel: "web", MessageID: "m1", ConversationID: "c1", Text: "hi", ReceivedAt: t0}, 3)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if !rec.Job.RunAt.Equal(t0) {
		t.Errorf("draft job due %v; want at once, %v", rec.Job.RunAt, t0)
	}
}

// TestReplyNeedsRecipient: a lead without a contact cannot be approved for
// sending, and a channel that approves its own drafts leaves such a draft
// waiting for a person instead of sending it nowhere.
func TestReplyNeedsRecipient(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "", "hello", t0)
	e2 := k.send("auto", "c2", "m1", "", "hello", t0)
	k.draftDue(t0.Add(coalesce))
	d1 := k.draftOf(e1)
	var state *store.StateError
	if _, err := k.approve(d1.ID); !errors.As(err, &state) || !strings.Contains(err.Error(), "without a contact") {
		t.Errorf("Approve(%s) without a contact = %v; want a StateError saying the lead has no contact", d1.ID, err)
	}
	if d := k.draftOf(e2); d.Status != store.DraftPending {
		t.Errorf("auto channel's draft without a contact is %s; want pending for a person", d.Status)
	}
	if rows := k.replies(); len(rows) != 0 {
		t.Errorf("replies %v; want none", rows)
	}
}

// TestRejectThenWriteItMyself: after a rejection the lead is not stuck: a
// person writes the reply, approved in the same step through the same
// outbox, and of ten people doing so at once exactly one reply is made.
func TestRejectThenWriteItMyself(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "ada@example.com", "hi", t0)
	e2 := k.send("web", "c1", "m2", "ada@example.com", "4 people on Friday?", t0.Add(time.Second))
	k.draftDue(t0.Add(time.Second + coalesce))
	d := k.draftOf(e1)
	if _, err := k.rv.Reject(context.Background(), d.ID, store.Decision{By: "ada", At: t0.Add(time.Minute), Reason: "too vague"}); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	const n = 10
	res := make([]review.Approved, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		res[i], errs[i] = k.rv.Write(context.Background(), e2.Key, fmt.Sprint("Yes, Friday works for 4, from person ", i), store.Decision{By: fmt.Sprint("person-", i), At: t0.Add(2 * time.Minute)})
	})
	won := -1
	for i := range n {
		var state *store.StateError
		switch {
		case errs[i] == nil && res[i].Created:
			if won >= 0 {
				t.Fatalf("persons %d and %d both wrote the reply", won, i)
			}
			won = i
		case !errors.As(errs[i], &state):
			t.Errorf("person %d: Write = %v; want the reply, or a StateError once it is answered", i, errs[i])
		}
	}
	if won < 0 {
		t.Fatal("nobody's reply was written")
	}
	w := res[won].Draft
	if w.Drafter != "person" || w.Author != fmt.Sprint("person-", won) || w.Version != 2 || w.Status != store.DraftApproved || !slices.Equal(w.Answers, keysOf(e1, e2)) {
		t.Errorf("written draft = %+v; want version 2 by person-%d, approved, answering %v", w, won, keysOf(e1, e2))
	}
	if rows := k.replies(); len(rows) != 1 || rows[0].ID != "c1:"+w.ID || rows[0].Text != fmt.Sprint("Yes, Friday works for 4, from person ", won) || rows[0].To != "ada@example.com" {
		t.Errorf("replies %+v; want the one written reply to ada@example.com", rows)
	}
	if k.model.calls() != 1 {
		t.Errorf("model called %d times; want once", k.model.calls())
	}
}

// TestDiscardedDraftJobThenDraftAgain: a draft job that ran out of
// attempts leaves the lead waiting, not stuck: "draft again" (with an
// instruction) makes one new draft job, one draft and, once approved, one
// reply; asking again while it is under way is refused.
func TestDiscardedDraftJobThenDraftAgain(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "ada@example.com", "can I book?", t0)
	claimed, err := k.st.Claim(context.Background(), t0.Add(coalesce), store.AnyJobs(10), time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	if _, err := k.st.FinishJob(context.Background(), claimed[0].ID, claimed[0].ExecutionID, t0.Add(coalesce), store.Result{Outcome: store.OutcomeDiscarded, Err: "the model is unreachable"}); err != nil {
		t.Fatalf("discard the draft job: %v", err)
	}
	at := t0.Add(time.Hour)
	const n = 5
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		_, errs[i] = k.rv.Redraft(context.Background(), e1.Key, store.Decision{By: "ada", At: at, Reason: "mention the Friday slot"})
	})
	ok := 0
	for i, err := range errs {
		var state *store.StateError
		switch {
		case err == nil:
			ok++
		case !errors.As(err, &state):
			t.Errorf("caller %d: Redraft = %v; want a job, or a StateError while one is under way", i, err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d redrafts enqueued; want 1", ok)
	}
	if ran := k.draftDue(at); len(ran) != 1 {
		t.Fatalf("%d draft jobs ran; want the redraft", len(ran))
	}
	if in := k.model.input(0); in.Instruction != "mention the Friday slot" {
		t.Errorf("the drafter saw instruction %q; want the person's", in.Instruction)
	}
	d := k.draftOf(e1)
	if d.Status != store.DraftPending || d.Instruction != "mention the Friday slot" {
		t.Errorf("draft %s is %s with instruction %q; want pending, recording the instruction", d.ID, d.Status, d.Instruction)
	}
	if _, err := k.approve(d.ID); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	if rows := k.replies(); len(rows) != 1 {
		t.Errorf("%d replies; want 1", len(rows))
	}
}

// TestCloseNeverStuck: closing a lead without a reply ends its turn (the
// waiting draft rejected with the reason), no stuck alert ever fires for
// it, a draft job still queued writes nothing, and a new message reopens
// the lead at received in a new turn.
func TestCloseNeverStuck(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "", "hello?", t0) // no contact: it can only be closed
	k.draftDue(t0.Add(coalesce))
	d := k.draftOf(e1)
	e2 := k.send("web", "c1", "m2", "", "anyone?", t0.Add(time.Minute)) // supersedes d; its job waits
	got, err := k.rv.Close(context.Background(), e2.Key, store.Decision{By: "ada", At: t0.Add(2 * time.Minute), Reason: "spam"})
	if err != nil || !got.Closed || got.Lead.Status != leads.Closed || got.Lead.Closed.Reason != "spam" {
		t.Fatalf("Close = %+v, %v; want closed for spam", got, err)
	}
	if again, err := k.rv.Close(context.Background(), e1.Key, store.Decision{By: "bob", At: t0.Add(3 * time.Minute), Reason: "dup"}); err != nil || again.Closed || again.Lead.Closed.By != "ada" {
		t.Errorf("Close again = %+v, %v; want the first closing, by ada", again, err)
	}
	if d := k.draftOf(e1); d.Status != store.DraftSuperseded {
		t.Errorf("the superseded draft is %s after the close; want superseded still", d.Status)
	}
	k.draftDue(t0.Add(time.Hour))
	if c := k.model.calls(); c != 1 {
		t.Errorf("model called %d times; want once (the queued job's turn was closed)", c)
	}
	if _, err := k.st.DraftByEvent(e2.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a draft was written for the closed turn (%v); want none", err)
	}
	flagged, err := leads.FlagStuck(context.Background(), k.st, t0.Add(365*24*time.Hour),
		map[store.HandoffStatus]time.Duration{leads.Received: time.Minute, leads.Matched: time.Minute, leads.Owned: time.Minute}, nil)
	if err != nil || len(flagged) != 0 {
		t.Errorf("FlagStuck a year later = %d leads, %v; want none", len(flagged), err)
	}
	var state *store.StateError
	if _, err := k.approve(d.ID); err == nil {
		t.Errorf("approving a draft of the closed lead succeeded")
	}
	if _, err := k.rv.Write(context.Background(), e1.Key, "hi", store.Decision{By: "ada", At: t0.Add(time.Hour)}); !errors.As(err, &state) {
		t.Errorf("Write on a closed lead = %v; want a StateError", err)
	}

	e3 := k.send("web", "c1", "m3", "ada@example.com", "sorry, I do want to book", t0.Add(2*time.Hour))
	h := k.lead("web", "c1")
	if h.Status != leads.Received || h.Cycle != 2 || h.Closed != nil || h.Turn != 2 || !slices.Equal(h.TurnEvents, keysOf(e3)) {
		t.Errorf("lead after a new message: %s cycle %d turn %d events %v closed %+v; want received, cycle 2, a new turn of %s", h.Status, h.Cycle, h.Turn, h.TurnEvents, h.Closed, e3.Key)
	}
	k.draftDue(t0.Add(2*time.Hour + coalesce))
	if d := k.draftOf(e3); d.Status != store.DraftPending || !slices.Equal(d.Answers, keysOf(e3)) {
		t.Errorf("the reopened lead's draft is %s answering %v; want pending, answering %s", d.Status, d.Answers, e3.Key)
	}
}

// TestLostLeaseStaleTurn: an attempt whose lease expired while the model
// thought (the job went back to the queue, and a new message joined it)
// stores nothing for its stale input; the next attempt drafts the whole
// turn.
func TestLostLeaseStaleTurn(t *testing.T) {
	k := newTurnKit(t)
	e1 := k.send("web", "c1", "m1", "ada@example.com", "hi", t0)
	claimed, err := k.st.Claim(context.Background(), t0.Add(coalesce), store.AnyJobs(10), time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	var e2 store.Event
	k.model.during = func() {
		if reaped, err := k.st.Reap(context.Background(), t0.Add(coalesce+2*time.Minute), false); err != nil || len(reaped) != 1 {
			t.Errorf("Reap = %d, %v; want the one job", len(reaped), err)
		}
		e2 = k.send("web", "c1", "m2", "ada@example.com", "4 people", t0.Add(coalesce+2*time.Minute))
	}
	if err := k.job.Run(context.Background(), claimed[0]); err == nil || !strings.Contains(err.Error(), "drafted again") {
		t.Errorf("the stale attempt = %v; want it refused, the turn is drafted again", err)
	}
	if _, err := k.st.DraftByEvent(e1.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the stale attempt stored a draft (%v); want none", err)
	}
	k.draftDue(t0.Add(2*coalesce + 2*time.Minute))
	if d := k.draftOf(e1); d.Status != store.DraftPending || !slices.Equal(d.Answers, keysOf(e1, e2)) {
		t.Errorf("the next attempt's draft is %s answering %v; want pending, answering %v", d.Status, d.Answers, keysOf(e1, e2))
	}
}
