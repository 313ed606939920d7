package store

import (
	"context"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store/engine"
)

// TestOutboxCountsByChannel: the replies the navigation counts — being
// sent now, failed, to reconcile, not dismissed — are kept per channel
// and moved by every write of a row, so a person limited to one channel
// gets exactly theirs without a row read: a dangling index entry changes
// no count (Check names it), and Check (the cleanup) proves the counts.
func TestOutboxCountsByChannel(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rows := map[string]string{}
	for _, ch := range []string{"web", "mail"} {
		d := figureDraft(t, st, ch, "o-"+ch, t0, "v1", 0)
		a, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "x", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		rows[ch] = a.Outbox.ID
	}
	move := func(ch string, edit func(*Outbox)) {
		t.Helper()
		err := st.Update(ctx, func(tx *Tx) error {
			o, err := tx.Outbox(rows[ch])
			if err != nil {
				return err
			}
			old := o
			edit(&o)
			return tx.PutOutbox(&old, &o)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	counts := func(v Visible) [3]int {
		t.Helper()
		c, err := st.CountsFor(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return [3]int{c.EffectPending, c.FailedReplies, c.NeedsReconciliation}
	}
	web, mail := OnlyChannels("web"), OnlyChannels("mail")
	move("web", func(o *Outbox) { o.Status = OutboxEffectPending })
	move("mail", func(o *Outbox) { o.Status = OutboxNeedsReconciliation })
	if got, want := counts(web), [3]int{1, 0, 0}; got != want {
		t.Errorf("web: sending, failed, to reconcile = %v, want %v", got, want)
	}
	if got, want := counts(mail), [3]int{0, 0, 1}; got != want {
		t.Errorf("mail: %v, want %v", got, want)
	}
	move("web", func(o *Outbox) { o.Status = OutboxFailed })
	if got, want := counts(Everything()), [3]int{0, 1, 1}; got != want {
		t.Errorf("everything: %v, want %v", got, want)
	}
	move("web", func(o *Outbox) { o.Dismissed = &Dismissal{By: "x", At: t0, Reason: "done"} })
	if got, want := counts(web), [3]int{0, 0, 0}; got != want {
		t.Errorf("web after the dismissal: %v, want %v", got, want)
	}

	k := append(append([]byte(OutboxFailed), 0), "01NOSUCHROW"...)
	if err := st.raw(func(tx engine.Tx) error { return tx.Bucket(bucketOutboxByStatus).Put(k, nil) }); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(mail), [3]int{0, 0, 1}; got != want {
		t.Errorf("mail with a dangling entry: %v, want %v", got, want)
	}
	if err := st.Check(); err == nil || !strings.Contains(err.Error(), "01NOSUCHROW") {
		t.Errorf("Check over a dangling entry: %v, want one naming it", err)
	}
	if err := st.raw(func(tx engine.Tx) error { return tx.Bucket(bucketOutboxByStatus).Delete(k) }); err != nil {
		t.Fatal(err)
	}
	// Retention's delete takes the row out of its count.
	err := st.Update(ctx, func(tx *Tx) error {
		o, err := tx.Outbox(rows["mail"])
		if err != nil {
			return err
		}
		return tx.DeleteOutbox(&o)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := counts(mail), [3]int{0, 0, 0}; got != want {
		t.Errorf("mail after the delete: %v, want %v", got, want)
	}
}
