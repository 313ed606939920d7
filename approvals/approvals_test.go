package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// TestSweepAnnouncesOnceAndFollows: a waiting draft gets one card per
// surface however often the sweep runs; a decision made on the dashboard
// (review directly) is followed by the next sweep, a decision through
// Decide at once; the card is final once the undo window is over.
func TestSweepAnnouncesOnceAndFollows(t *testing.T) {
	ctx := context.Background()
	fs := &fakeSurface{name: "fake"}
	f := newFixture(t, fs)
	d := f.pending(t, "web", "m1", "Hello Ada")
	for range 3 {
		if err := f.a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.runJobs(t)
	}
	posts, _ := fs.seen()
	if len(posts) != 1 || posts[0].Draft.ID != d.ID || posts[0].State != Waiting || posts[0].Customer != "Ada" || posts[0].ClientName != "Acme" {
		t.Fatalf("posts = %+v, want one waiting card of %s for Ada at Acme", posts, d.ID)
	}
	if got := posts[0].Messages; len(got) != 1 || got[0] != "hello from m1" {
		t.Errorf("card messages = %q", got)
	}
	// Decided on the dashboard: the sweep notices.
	if _, err := review.New(f.st, f.cfg).Approve(ctx, d.ID, store.Decision{By: "root", At: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.runJobs(t); n != 1 {
		t.Fatalf("jobs after the dashboard's approval = %d, want 1 follow", n)
	}
	_, updates := fs.seen()
	if len(updates) != 1 || updates[0].State != Held || !strings.Contains(updates[0].Status, "Approved by root") {
		t.Fatalf("updates = %+v, want the card held, approved by root", updates)
	}
	// The undo window ends: the Undo button goes, and the card is final.
	f.clock.Advance(11 * time.Second)
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	_, updates = fs.seen()
	if len(updates) != 2 || updates[1].State != Approved {
		t.Fatalf("updates = %+v, want a second one, approved", updates)
	}
	var c store.Card
	if err := f.st.View(func(tx *store.Tx) (err error) { c, err = tx.Card("fake", d.ID); return err }); err != nil || !c.Final {
		t.Fatalf("card = %+v, %v; want final", c, err)
	}
}

// TestDecideScopeAndSentences: Decide refuses a person of another client
// and a disabled one, answers an approval already made with whose it is,
// and names the surface in the decision and the audit.
func TestDecideScopeAndSentences(t *testing.T) {
	ctx := context.Background()
	fs := &fakeSurface{name: "fake"}
	f := newFixture(t, fs)
	d := f.pending(t, "web", "m1", "Hello Ada")
	user := func(name string) store.User {
		u, err := f.st.User(name)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	var refusal *Refusal
	_, err := f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Approve, Person: user("bea"), From: "fake B1"})
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Sentence, "not an approver of this client") {
		t.Fatalf("bea (beta) approving acme's draft = %v, want a refusal", err)
	}
	_, err = f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Approve, Person: user("gone"), From: "fake G1"})
	if !errors.As(err, &refusal) {
		t.Fatalf("a disabled user approving = %v, want a refusal", err)
	}
	var decided []string
	f.a.Decided = func(id string) { decided = append(decided, id) }
	out, err := f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Approve, Text: "Hello Ada, edited", Person: user("dana"), From: "fake D1"})
	if len(decided) != 1 || decided[0] != d.ID {
		t.Errorf("Decided heard %v after dana's approval; want %s once (the dashboard's claim ends)", decided, d.ID)
	}
	if err != nil || !out.Decided || out.Draft.Decision.Via != "fake" || !out.Draft.Decision.Edited {
		t.Fatalf("dana approving = %+v, %v", out, err)
	}
	if !strings.HasPrefix(out.Sentence, "Approved with an edit by dana at 06:00 UTC; it is sent at 06:00:10 UTC") {
		t.Errorf("sentence = %q", out.Sentence)
	}
	again, err := f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Approve, Person: user("root"), From: "fake R1"})
	if err != nil || again.Decided || !strings.Contains(again.Sentence, "already approved by dana") {
		t.Fatalf("root approving again = %+v, %v; want already approved by dana", again, err)
	}
	_, err = f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Reject, Person: user("root"), From: "fake R1"})
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Sentence, "already approved by dana") {
		t.Fatalf("rejecting an approved draft = %v", err)
	}
	_, err = f.a.Decide(ctx, Ask{Via: "fake", Draft: "nope", Action: Approve, Person: user("root")})
	if !errors.As(err, &refusal) || refusal.Sentence != "There is no such draft." {
		t.Fatalf("approving a draft that does not exist = %v", err)
	}
	audit, err := f.st.AuditLog(20)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range audit {
		found = found || e.Action == "approve draft" && e.Who == "dana" && e.From == "fake D1"
	}
	if !found {
		t.Errorf("audit = %+v, want dana's approval from fake D1", audit)
	}
	// Undo through the surface puts it back; the card's follow job was
	// enqueued by the decisions themselves.
	un, err := f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Undo, Person: user("dana"), From: "fake D1"})
	if err != nil || un.Draft.Status != store.DraftPending {
		t.Fatalf("undo = %+v, %v", un, err)
	}
}

// TestPerson: an explicit id wins, then the email, case-insensitive; a
// disabled user or an unknown member is refused with a sentence.
func TestPerson(t *testing.T) {
	f := newFixture(t)
	ids := map[string]string{"U1": "dana", "U2": "nobody"}
	for _, c := range []struct {
		id, email, want string
	}{
		{"U1", "", "dana"},
		{"U9", "BEA@beta.test", "bea"},
		{"U2", "", ""},
		{"U9", "gone@acme.test", ""},
		{"U9", "", ""},
	} {
		u, err := f.a.Person("slack", ids, c.id, c.email)
		var refusal *Refusal
		switch {
		case c.want == "" && !errors.As(err, &refusal):
			t.Errorf("Person(%s, %s) = %v, %v; want a refusal", c.id, c.email, u.Name, err)
		case c.want != "" && (err != nil || u.Name != c.want):
			t.Errorf("Person(%s, %s) = %v, %v; want %s", c.id, c.email, u.Name, err, c.want)
		}
	}
}

// TestConcurrentDecisions: the same draft approved on two surfaces (and
// the dashboard) at once gives one approval and "already approved by …"
// answers, and one outbox row.
func TestConcurrentDecisions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d := f.pending(t, "web", "m1", "Hello Ada")
	dana, _ := f.st.User("dana")
	root, _ := f.st.User("root")
	var outs [3]Outcome
	var errs [3]error
	testkit.Together(3, func(i int) {
		switch i {
		case 0:
			outs[i], errs[i] = f.a.Decide(ctx, Ask{Via: "slack", Draft: d.ID, Action: Approve, Person: dana, From: "slack U1"})
		case 1:
			outs[i], errs[i] = f.a.Decide(ctx, Ask{Via: "telegram", Draft: d.ID, Action: Approve, Person: root, From: "telegram 7"})
		default:
			res, err := review.New(f.st, f.cfg).Approve(ctx, d.ID, store.Decision{By: "root", At: t0})
			outs[i], errs[i] = Outcome{Draft: res.Draft, Decided: res.Created}, err
		}
	})
	decided := 0
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("approval %d: %v", i, errs[i])
		}
		if outs[i].Decided {
			decided++
		} else if i < 2 && !strings.Contains(outs[i].Sentence, "already approved by") {
			t.Errorf("approval %d sentence = %q", i, outs[i].Sentence)
		}
	}
	if decided != 1 {
		t.Fatalf("%d approvals decided, want 1", decided)
	}
}

// TestSealUnseal: a token opens under its key and scope only.
func TestSealUnseal(t *testing.T) {
	key := []byte("k1")
	tok := Seal(key, "telegram", "a:d01JABCDEFGHJKMNPQRSTVWXYZ0-v2")
	if len(tok) > 64 {
		t.Errorf("token is %d bytes, want at most 64 (callback_data)", len(tok))
	}
	if msg, ok := Unseal(key, "telegram", tok); !ok || msg != "a:d01JABCDEFGHJKMNPQRSTVWXYZ0-v2" {
		t.Errorf("Unseal = %q, %v", msg, ok)
	}
	for _, bad := range []struct{ key, scope, tok string }{
		{"k2", "telegram", tok}, {"k1", "email", tok}, {"k1", "telegram", "r" + tok[1:]}, {"k1", "telegram", "nodot"}, {"", "telegram", tok},
	} {
		if _, ok := Unseal([]byte(bad.key), bad.scope, bad.tok); ok {
			t.Errorf("Unseal(%q, %q, %q) opened", bad.key, bad.scope, bad.tok)
		}
	}
}

// TestRejectionUndoneReopensTheCard: a rejection made on a surface and
// undone on the dashboard inside undo_window brings the card back to
// waiting (the card stays open while the undo can come); a rejection left
// alone makes the card final once the window ends.
func TestRejectionUndoneReopensTheCard(t *testing.T) {
	ctx := context.Background()
	fs := &fakeSurface{name: "fake"}
	f := newFixture(t, fs)
	dana, err := f.st.User("dana")
	if err != nil {
		t.Fatal(err)
	}
	settle := func() {
		t.Helper()
		if err := f.a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.runJobs(t)
	}
	card := func(id string) store.Card {
		t.Helper()
		var c store.Card
		if err := f.st.View(func(tx *store.Tx) (err error) { c, err = tx.Card("fake", id); return err }); err != nil {
			t.Fatal(err)
		}
		return c
	}
	d := f.pending(t, "web", "m1", "Hello Ada")
	// The draft job that wrote it is done (as review.Record leaves it), so
	// no new draft is being written when the undo comes.
	jobs, err := f.st.Claim(ctx, f.clock.Now(), store.ClaimLimits{Kinds: map[string]int{store.KindDraft: 10}}, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("draft jobs = %d, %v; want 1", len(jobs), err)
	}
	if err := f.st.Update(ctx, func(tx *store.Tx) error { return tx.CompleteJob(jobs[0].ID, jobs[0].ExecutionID, f.clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	settle()
	if _, err := f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Reject, Person: dana, From: "fake D1"}); err != nil {
		t.Fatal(err)
	}
	settle()
	if _, updates := fs.seen(); len(updates) == 0 || updates[len(updates)-1].State != Rejected {
		t.Fatalf("updates = %+v, want the card rejected", updates)
	}
	if card(d.ID).Final {
		t.Fatal("the card of a rejection that can still be undone is final")
	}
	f.clock.Advance(3 * time.Second)
	if _, err := review.New(f.st, f.cfg).Undo(ctx, d.ID, store.Decision{By: "dana", At: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	settle()
	_, updates := fs.seen()
	if last := updates[len(updates)-1]; last.State != Waiting {
		t.Fatalf("after the undo the card shows %s, want waiting", last.State)
	}

	// Rejected again and left alone: final once the window ends.
	if _, err := f.a.Decide(ctx, Ask{Via: "fake", Draft: d.ID, Action: Reject, Person: dana, From: "fake D2"}); err != nil {
		t.Fatal(err)
	}
	settle()
	f.clock.Advance(11 * time.Second)
	settle()
	if c := card(d.ID); !c.Final {
		t.Fatalf("card = %+v, want final after the rejection's undo window", c)
	}
	if _, updates := fs.seen(); updates[len(updates)-1].State != Rejected {
		t.Fatalf("last update = %+v, want rejected", updates[len(updates)-1])
	}
}
