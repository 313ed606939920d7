package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/testkit/standin"
)

func (f *fixture) card(t *testing.T, surface, draft string) store.Card {
	t.Helper()
	var c store.Card
	if err := f.st.View(func(tx *store.Tx) (err error) { c, err = tx.Card(surface, draft); return err }); err != nil {
		t.Fatal(err)
	}
	return c
}

// cardPosts are the chat.postMessage calls that carry draft's card metadata.
func cardPosts(calls []map[string]any, draft string) int {
	n := 0
	for _, b := range calls {
		m, _ := b["metadata"].(map[string]any)
		p, _ := m["event_payload"].(map[string]any)
		if m["event_type"] == slackCardEvent && p["draft"] == draft {
			n++
		}
	}
	return n
}

// TestSlackCardPostOnce: a card's post is classified as a provider's send
// is. Slack answered no (ok false, a rate limit): the retry posts, with no
// lookup. The answer was lost (Slack took it): the retry finds the card by
// its metadata in conversations.history and posts nothing. A post marked
// but never made: the lookup finds nothing and the card is posted. The
// lookup cannot be made (no channels:history scope): the card is marked
// uncertain, the job discarded with the sentence, and nothing reposted.
func TestSlackCardPostOnce(t *testing.T) {
	texts := corpus.Texts()
	for _, tc := range []struct {
		name      string
		arrange   func(f *fixture, api *standin.SurfaceAPI, d store.Draft)
		lookups   int // conversations.history calls
		posts     int // chat.postMessage calls of the card
		uncertain bool
	}{
		{name: "refused then resent", arrange: func(f *fixture, api *standin.SurfaceAPI, d store.Draft) {
			api.Fail["chat.postMessage"] = "channel_not_found"
		}, lookups: 0, posts: 1},
		{name: "rate limited then resent", arrange: func(f *fixture, api *standin.SurfaceAPI, d store.Draft) { api.Limit["chat.postMessage"] = 3 }, lookups: 0, posts: 1},
		{name: "answer lost then found", arrange: func(f *fixture, api *standin.SurfaceAPI, d store.Draft) { api.Lose["chat.postMessage"] = 1 }, lookups: 1, posts: 1},
		{name: "marked but never posted", arrange: func(f *fixture, api *standin.SurfaceAPI, d store.Draft) {
			var c store.Card
			if err := f.st.View(func(tx *store.Tx) (err error) { c, err = tx.Card(ViaSlack, d.ID); return err }); err != nil {
				panic(err)
			}
			c.Posting = f.clock.Now()
			if err := f.st.Update(context.Background(), func(tx *store.Tx) error { return tx.PutCard(c) }); err != nil {
				panic(err)
			}
		}, lookups: 1, posts: 1},
		{name: "answer lost, no lookup scope", arrange: func(f *fixture, api *standin.SurfaceAPI, d store.Draft) {
			api.Lose["chat.postMessage"] = 1
			api.Fail["conversations.history"] = "missing_scope"
		}, lookups: 0, posts: 1, uncertain: true}, // the refused lookup is not recorded; the card's sentence names its answer
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sv := readSlackVectors(t)
			f, api := slackFixture(t, sv)
			api.Now = f.clock.Now
			// The vectors' draft (its decision below is @slack/bolt's signed click).
			d := f.pendingID(t, strings.TrimPrefix(sv.Draft, "d"), "web", "m1", texts[len(tc.name)%len(texts)].Body)
			f.sweep(t) // the placeholder card and its announce job
			api.Set(func(api *standin.SurfaceAPI) { tc.arrange(f, api, d) })
			if tc.name != "marked but never posted" {
				runs := f.runAll(t)
				if len(runs) != 1 || runs[0].err == nil {
					t.Fatalf("first attempt = %+v, want it to fail", runs)
				}
				api.Set(func(api *standin.SurfaceAPI) {
					delete(api.Fail, "chat.postMessage")
					delete(api.Limit, "chat.postMessage")
				})
			}
			f.clock.Advance(2 * time.Hour) // past the retry's backoff
			runs := f.runAll(t)
			if len(runs) == 0 {
				t.Fatal("no retry ran")
			}
			last := runs[0].err
			var discard *jobs.Discard
			if tc.uncertain != errors.As(last, &discard) {
				t.Fatalf("retry = %v, want discarded %v", last, tc.uncertain)
			}
			if got := len(api.Calls("conversations.history")); got != tc.lookups {
				t.Errorf("conversations.history calls = %d, want %d", got, tc.lookups)
			}
			for _, c := range api.Calls("conversations.history") {
				if c.Body["include_all_metadata"] != true || c.Body["channel"] != "C0ACME" || c.Body["oldest"] == nil || c.Body["limit"] == nil {
					t.Errorf("conversations.history body = %v", c.Body)
				}
			}
			posts := api.Calls("chat.postMessage")
			var pb []map[string]any
			for _, p := range posts {
				pb = append(pb, p.Body)
				checkSlackMessage(t, p.Body)
			}
			if got := cardPosts(pb, d.ID); got != tc.posts || len(api.Messages("C0ACME")) != tc.posts {
				t.Errorf("card posts = %d (messages %v), want %d", got, api.Messages("C0ACME"), tc.posts)
			}
			c := f.card(t, ViaSlack, d.ID)
			if tc.uncertain {
				if c.Ref != "" || !c.Final || !strings.Contains(c.Uncertain, "may already be in C0ACME") || !strings.Contains(c.Uncertain, "missing_scope") || !strings.Contains(last.Error(), c.Uncertain) {
					t.Fatalf("uncertain card = %+v (job: %v)", c, last)
				}
				// Never posted blind: more sweeps and runs post nothing.
				f.sweep(t)
				f.runAll(t)
				if n := len(api.Calls("chat.postMessage")); n != 1 {
					t.Fatalf("posts after the uncertain card = %d, want 1", n)
				}
				return
			}
			msgs := api.Messages("C0ACME")
			if len(msgs) != 1 || !strings.HasPrefix(msgs[0], c.Ref+" ") || !c.Posting.IsZero() || c.Shown != string(Waiting) {
				t.Fatalf("card = %+v, messages %v; want the one message's ts, the mark cleared", c, msgs)
			}
			// The card follows the draft's decision like any other: Reject
			// clicked on it, as @slack/bolt signs the interaction.
			in, _ := f.a.Inbound(ViaSlack)
			if ans := in.Receive(ctx, sv.request(t, "reject by dana")); ans.Status != 200 {
				t.Fatalf("reject by dana = %d %s", ans.Status, ans.Body)
			}
			if got := f.draft(t, d.ID); got.Status != store.DraftRejected || got.Decision.Via != ViaSlack {
				t.Fatalf("after the click: %s %+v", got.Status, got.Decision)
			}
			f.runAll(t)
			ups := api.Calls("chat.update")
			if len(ups) != 1 || ups[0].Body["ts"] != c.Ref {
				t.Fatalf("chat.update calls = %+v, want one of ts %s", ups, c.Ref)
			}
		})
	}
}

func mustUser(t *testing.T, f *fixture, name string) store.User {
	t.Helper()
	u, err := f.st.ActiveUser(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
