package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// typesOf counts the events acted on by type.
func typesOf(evs map[string]outbound.Event) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		out[e.Type]++
	}
	return out
}

// byKey finds the acted event of typ whose business key is key.
func byKey(t *testing.T, evs map[string]outbound.Event, typ, key string) (string, outbound.Event) {
	t.Helper()
	for id, e := range evs {
		if e.Type == typ && e.Data.Key == key {
			return id, e
		}
	}
	t.Fatalf("no %s event with key %q among %d", typ, key, len(evs))
	return "", outbound.Event{}
}

// TestEveryEventOnce: one lead from its first message to its reply is four
// status changes, one approval and one sent reply — six events, each acted
// on once by a receiver that dedupes by webhook-id, whatever it did to the
// requests: a 500 then a 200 (one webhook-id both times, the same body),
// a connection cut after it acted (resent: the receiver had it already).
// Each body carries its corpus text exactly, and each signature verifies.
func TestEveryEventOnce(t *testing.T) {
	for _, text := range corpus.Texts() {
		t.Run(text.Name, func(t *testing.T) {
			rc := newReceiver(t)
			b := newBed(t, config.Subscriber{Name: "n8n", URL: rc.srv.URL + "/hook"})
			rc.add(config.EventDraftApproved, "500")
			rc.add(config.EventLeadStatusChanged, "drop")
			b.run(2)
			ev := b.receive("web", "m1", "c1", text.Body, text.From)
			d := b.draft(ev, "ana", "Re: "+text.Body)
			ap := b.approve(d)
			rows := b.settled(7)
			for id, o := range rows {
				if o.Status != store.OutboxSent {
					t.Errorf("row %s ended %s (%s): %s", id, o.Status, o.Note, actions(o))
				}
			}
			reply, err := b.st.OutboxRow(ap.Outbox.ID)
			if err != nil || reply.Status != store.OutboxSent {
				t.Fatalf("the reply = %s, %v; want sent by the sandbox", reply.Status, err)
			}
			evs := rc.events()
			if got, want := typesOf(evs), map[string]int{config.EventLeadStatusChanged: 4, config.EventDraftApproved: 1, config.EventReplySent: 1, config.EventDeadLetterAdded: 1}; !reflect.DeepEqual(got, want) {
				t.Fatalf("acted on %v, want %v", got, want)
			}
			// The draft job the bed runs no kind for, discarded: a job's dead letter.
			for _, e := range evs {
				if e.Type == config.EventDeadLetterAdded && (e.Data.DeadLetterKind != store.DeadJob || e.Data.What != store.KindDraft || e.Data.Lead != store.LeadKey("web", "c1") || e.Data.State != "discarded" || !strings.Contains(e.Data.Error, "no job kind")) {
					t.Errorf("dead_letter.added = %+v, want the discarded draft job of the lead", e.Data)
				}
			}
			lead := store.LeadKey("web", "c1")
			var moves []string
			for _, e := range evs {
				if e.Type == config.EventLeadStatusChanged {
					moves = append(moves, e.Data.From+">"+e.Data.Status+"@"+e.Data.Key)
				}
			}
			sort.Strings(moves)
			if want := []string{">received@1:received", "matched>owned@1:owned", "owned>replied@1:replied", "received>matched@1:matched"}; !reflect.DeepEqual(moves, want) {
				t.Errorf("status changes = %v, want %v", moves, want)
			}
			id, approved := byKey(t, evs, config.EventDraftApproved, d.ID)
			if approved.Data.Text != "Re: "+text.Body || approved.Data.Lead != lead || approved.Data.OutboxID != ap.Outbox.ID || approved.Data.ApprovedBy != "tester" || approved.Data.Owner != "ana" || approved.Data.Client != "default" {
				t.Errorf("draft.approved = %+v", approved.Data)
			}
			if rc.requests(id) != 2 || len(rc.bodies[id]) < 1 {
				t.Errorf("draft.approved %s: %d requests, want 2 (a 500, then the same webhook-id accepted)", id, rc.requests(id))
			}
			for _, body := range rc.bodies[id] {
				if body != rows[outbound.RowID(lead, "n8n", config.EventDraftApproved, d.ID)].Text {
					t.Errorf("a resend's body differs from the stored one:\n%s", body)
				}
			}
			if id != outbound.MessageID(outbound.RowID(lead, "n8n", config.EventDraftApproved, d.ID)) {
				t.Errorf("webhook-id %s is not the one the row id fixes", id)
			}
			_, sent := byKey(t, evs, config.EventReplySent, ap.Outbox.ID)
			if sent.Data.ProviderID == "" || sent.Data.ProviderID != reply.ProviderID {
				t.Errorf("reply.sent provider id %q, want the row's %q", sent.Data.ProviderID, reply.ProviderID)
			}
			// The cut one: whichever status change arrived first.
			cut := 0
			for id, e := range evs {
				if e.Type != config.EventLeadStatusChanged || rc.requests(id) == 1 {
					continue
				}
				cut++
				row := rows[outbound.RowID(lead, "n8n", e.Type, e.Data.Key)]
				if a := actions(row); rc.requests(id) != 2 || !strings.Contains(a, "send:ambiguous") || !strings.Contains(a, "resend:sent") {
					t.Errorf("status change %s: %d requests, attempts %q; want 2, an ambiguous send then a resend", e.Data.Key, rc.requests(id), a)
				}
			}
			if cut != 1 {
				t.Errorf("%d status changes were resent, want the one cut", cut)
			}
		})
	}
}

// TestFailedReplyAndItsDeadLetters: a reply whose provider is not
// configured fails: reply.failed once per reply, dead_letter.added once per
// arrival on the list — a replay that fails again adds it again (a new
// key), never a second reply.failed. A subscriber taking only some types
// and only one client gets only those.
func TestFailedReplyAndItsDeadLetters(t *testing.T) {
	rc, narrow := newReceiver(t), newReceiver(t)
	b := newBed(t,
		config.Subscriber{Name: "all", URL: rc.srv.URL},
		config.Subscriber{Name: "narrow", Client: "other", URL: narrow.srv.URL, Types: []string{config.EventReplyFailed}})
	b.run(2)
	text := corpus.Texts()[0].Body
	ev := b.receive("gone", "m1", "c1", text, "")
	ap := b.approve(b.draft(ev, "", text))
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(ap.Outbox.ID)
		return o.Status == store.OutboxFailed
	}, "the reply to fail")
	ob := delivery.New(b.st, b.cfg)
	if _, err := ob.Replay(context.Background(), ap.Outbox.ID, store.Replay{By: "admin", At: time.Now()}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	b.wake()
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(ap.Outbox.ID)
		return o.Status == store.OutboxFailed && len(o.Attempts) == 2
	}, "the replayed reply to fail again")
	rows := b.settled(1)
	for id, o := range rows {
		if o.Status != store.OutboxSent {
			t.Errorf("row %s ended %s (%s)", id, o.Status, o.Note)
		}
		if o.Provider == "events:narrow" && !strings.Contains(id, ":"+config.EventReplyFailed+":") {
			t.Errorf("the narrow subscriber got row %s, which it does not take", id)
		}
	}
	evs := rc.events()
	got := typesOf(evs)
	for _, e := range evs {
		if e.Type == config.EventDeadLetterAdded && e.Data.DeadLetterKind == store.DeadJob {
			got[e.Type]-- // the draft job's (see run)
		}
	}
	if got[config.EventReplyFailed] != 1 || got[config.EventDeadLetterAdded] != 2 || got[config.EventDraftApproved] != 1 || got[config.EventReplySent] != 0 {
		t.Errorf("acted on %v, want one reply.failed, two dead_letter.added (the failure and the failed replay), one draft.approved, no reply.sent", got)
	}
	_, failed := byKey(t, evs, config.EventReplyFailed, ap.Outbox.ID)
	if !strings.Contains(failed.Data.Error, "not configured") || failed.Data.DraftID != ap.Draft.ID {
		t.Errorf("reply.failed = %+v, want the reason and the draft", failed.Data)
	}
	for n := range 2 {
		_, dl := byKey(t, evs, config.EventDeadLetterAdded, fmt.Sprintf("%s#%d", ap.Outbox.ID, n))
		if dl.Data.DeadLetterID != ap.Outbox.ID || dl.Data.DeadLetterKind != store.DeadOutbox || dl.Data.What != "reply" || dl.Data.State != "failed" {
			t.Errorf("dead_letter.added #%d = %+v", n, dl.Data)
		}
	}
	// The narrow subscriber's client is another: nothing of this one's.
	if n := len(narrow.events()); n != 0 {
		t.Errorf("the subscriber of client other acted on %d events of client default", n)
	}
}

// TestDeadEventReplayedOnce: a subscriber that refuses an event (a 400:
// it will not change on a resend) puts the event's row on the dead-letter
// list, replayable as safe — and posts no dead_letter.added about itself.
// A person's replay posts it under the same webhook-id, once; a second
// replay is refused (it was sent).
func TestDeadEventReplayedOnce(t *testing.T) {
	rc := newReceiver(t)
	b := newBed(t, config.Subscriber{URL: rc.srv.URL, Name: "default"})
	rc.add(config.EventDraftApproved, "400")
	b.run(1)
	text := corpus.Texts()[1].Body
	ev := b.receive("web", "m1", "c1", text, corpus.Texts()[1].From)
	d := b.draft(ev, "ana", text)
	b.approve(d)
	rowID := outbound.RowID(store.LeadKey("web", "c1"), "default", config.EventDraftApproved, d.ID)
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(rowID)
		return o.Status == store.OutboxFailed
	}, "the refused event to fail")
	b.settled(7)
	ob := delivery.New(b.st, b.cfg)
	list, err := ob.DeadLetters(store.DeadLetterFilter{Kind: store.DeadOutbox})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(dl store.DeadLetter) bool { return dl.ID == rowID })
	if i < 0 || len(list) != 1 {
		t.Fatalf("dead letters = %d items, want the refused event alone (%s)", len(list), rowID)
	}
	if dl := list[i]; !dl.Safe || !strings.Contains(dl.Error, "400") {
		t.Errorf("the dead event: safe %v (%s), error %q; want a safe replay and the subscriber's answer", dl.Safe, dl.Why, dl.Error)
	}
	for _, e := range rc.events() {
		if e.Type == config.EventDeadLetterAdded && e.Data.DeadLetterKind == store.DeadOutbox {
			t.Errorf("an event's own dead letter was posted: %+v", e.Data)
		}
	}
	if _, err := ob.Replay(context.Background(), rowID, store.Replay{By: "admin", At: time.Now()}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	b.wake()
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(rowID)
		return o.Status == store.OutboxSent
	}, "the replayed event to be sent")
	id := outbound.MessageID(rowID)
	if _, ok := rc.events()[id]; !ok || rc.requests(id) != 2 {
		t.Errorf("webhook-id %s: acted %v, %d requests; want acted once after 2 requests (the 400, the replay)", id, ok, rc.requests(id))
	}
	_, err = ob.Replay(context.Background(), rowID, store.Replay{By: "admin", At: time.Now()})
	var se *store.StateError
	if !errors.As(err, &se) {
		t.Errorf("a second replay = %v, want refused: the event was sent", err)
	}
	if rc.requests(id) != 2 {
		t.Errorf("after the refused replay: %d requests, want still 2", rc.requests(id))
	}
}

// TestChangeRunTwiceOneRow: a business change that runs again (a retried
// round of the group commit, a move repeated) finds its event's row and
// writes nothing: one row and one job per event and subscriber.
func TestChangeRunTwiceOneRow(t *testing.T) {
	b := newBed(t, config.Subscriber{Name: "a", URL: "http://127.0.0.1:9"}, config.Subscriber{Name: "b", URL: "http://127.0.0.1:9"})
	ev := b.receive("web", "m1", "c1", corpus.Texts()[6].Body, "")
	lead := store.LeadKey("web", "c1")
	h, err := b.st.Handoff(lead)
	if err != nil {
		t.Fatal(err)
	}
	hk := outbound.New(b.cfg)
	// What the receive's own transaction wrote: the rows, their live jobs
	// and the queue's counts; the runs again must leave each as it is (a
	// row put again under its id would still be one row, so its content,
	// its job's id and the counts are what tell).
	rowsBefore := b.rows()
	liveBefore := b.liveEventJobs(rowsBefore)
	countsBefore, err := b.jobCounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(rowsBefore) != 2 || len(liveBefore) != 2 {
		t.Fatalf("after the receive: %d rows, %d live jobs; want one each per subscriber", len(rowsBefore), len(liveBefore))
	}
	err = b.st.Update(context.Background(), func(tx *store.Tx) error {
		for range 3 {
			if err := hk.LeadMoved(tx, h, time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := b.rows()
	if !reflect.DeepEqual(rows, rowsBefore) {
		t.Errorf("event rows changed by the runs again:\n got %+v\nwant %+v", rows, rowsBefore)
	}
	if live := b.liveEventJobs(rows); !reflect.DeepEqual(live, liveBefore) {
		t.Errorf("live jobs of the rows = %v, want the receive's own %v", live, liveBefore)
	}
	if counts, err := b.jobCounts(); err != nil || !reflect.DeepEqual(counts, countsBefore) {
		t.Errorf("job counts after the runs again = %+v, %v; want %+v", counts, err, countsBefore)
	}
	var got []string
	for id := range rows {
		got = append(got, id)
	}
	sort.Strings(got)
	want := []string{outbound.RowID(lead, "a", config.EventLeadStatusChanged, "1:received"), outbound.RowID(lead, "b", config.EventLeadStatusChanged, "1:received")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event rows = %v, want %v (one per subscriber)", got, want)
	}
	err = b.st.View(func(tx *store.Tx) error {
		for _, id := range want {
			if !tx.HasLiveJob(delivery.KindEvent, id) || tx.HasLiveJob(delivery.Kind, id) {
				t.Errorf("row %s: want its one live job of kind %s", id, delivery.KindEvent)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The minutely resolve sees each row's live job under its own kind.
	if n, err := delivery.New(b.st, b.cfg).Resolve(context.Background(), time.Now()); err != nil || n != 0 {
		t.Errorf("Resolve = %d, %v; want nothing to enqueue (every row has its job)", n, err)
	}
	_ = ev
}

// TestDiedBetweenAcceptAndRecord: an execution claimed an event, the
// subscriber acted on it, and the process died before recording anything
// (the row stays effect_pending with the dead execution's claim). The next
// process resends it under the same webhook-id, and the subscriber, which
// dedupes by it, has it once.
func TestDiedBetweenAcceptAndRecord(t *testing.T) {
	rc := newReceiver(t)
	b := newBed(t, config.Subscriber{Name: "n8n", URL: rc.srv.URL, Types: []string{config.EventLeadStatusChanged}})
	b.receive("web", "m1", "c1", corpus.Texts()[4].Body, "")
	id := outbound.RowID(store.LeadKey("web", "c1"), "n8n", config.EventLeadStatusChanged, "1:received")
	ob := delivery.New(b.st, b.cfg)
	row, _, err := ob.Claim(context.Background(), id, "01DEADEXECUTION0000000000", time.Now())
	if err != nil || row.Status != store.OutboxEffectPending {
		t.Fatalf("Claim = %s, %v", row.Status, err)
	}
	if _, err := b.senders["events:n8n"].Send(context.Background(), provider.Message{Ref: id, Text: row.Text}); err != nil {
		t.Fatalf("the accepted post: %v", err)
	}
	b.run(1) // the next process
	rows := b.settled(1)
	o := rows[id]
	if o.Status != store.OutboxSent || !strings.HasPrefix(actions(o), "resend:sent") {
		t.Errorf("row %s, attempts %q; want sent by a resend", o.Status, actions(o))
	}
	msg := outbound.MessageID(id)
	if rc.requests(msg) != 2 || len(rc.events()) != 1 {
		t.Errorf("%d requests of %s, %d events acted on; want 2 and 1", rc.requests(msg), msg, len(rc.events()))
	}
}
