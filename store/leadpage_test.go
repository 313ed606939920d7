package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestLeadConversation reads a lead's messages and the replies sent to
// them in order, without another channel's conversation of the same id,
// and only the newest lines when asked for fewer; LastMessages reads each
// lead's latest message.
func TestLeadConversation(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	first := say(t, st, "web", "c1", "m1", "Ada", "ada@example.com", "first question", t0)
	d1, _, err := st.SaveDraft(ctx, Draft{EventKey: first.Event.Key, Text: "first answer", CreatedAt: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApproveDraft(ctx, d1.ID, Approval{Decision: Decision{By: "x", At: t0.Add(2 * time.Second)}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	other := say(t, st, "shop", "c1", "x1", "Zed", "zed@example.com", "another shop", t0.Add(3*time.Second))
	d2, _, err := st.SaveDraft(ctx, Draft{EventKey: other.Event.Key, Text: "not this one", CreatedAt: t0.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApproveDraft(ctx, d2.ID, Approval{Decision: Decision{By: "x", At: t0.Add(4 * time.Second)}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	say(t, st, "web", "c1", "m2", "Ada", "", "second question", t0.Add(5*time.Second))
	lines := func(v LeadView) []string {
		var got []string
		for _, s := range v.Conversation {
			if s.Reply != nil {
				got = append(got, "reply:"+s.Reply.Text)
			} else {
				got = append(got, "msg:"+s.Event.Text)
			}
		}
		return got
	}
	v, err := st.LeadConversation("web:c1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"msg:first question", "reply:first answer", "msg:second question"}; !slices.Equal(lines(v), want) || v.Earlier {
		t.Errorf("conversation %v (earlier %v), want %v", lines(v), v.Earlier, want)
	}
	v, err = st.LeadConversation("web:c1", 2)
	if want := []string{"reply:first answer", "msg:second question"}; err != nil || !slices.Equal(lines(v), want) || !v.Earlier {
		t.Errorf("the newest 2 lines: %v (earlier %v), %v; want %v and earlier", lines(v), v.Earlier, err, want)
	}
	if _, err := st.LeadConversation("web:nobody", 10); err == nil {
		t.Error("a lead that is not there: no error")
	}
	hs := []Handoff{{LastEventKey: "web:m2"}, {LastEventKey: "web:gone"}, {}}
	evs, _, err := st.LastMessages(hs)
	if err != nil || len(evs) != 3 || evs[0].Text != "second question" || evs[1].Key != "" || evs[2].Key != "" {
		t.Errorf("LastMessages = %+v, %v; want the second question, then nothing twice", evs, err)
	}
}
