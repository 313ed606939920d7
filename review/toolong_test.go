package review_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// smsConfig has the sms channel sending through a twilio provider (1,600
// characters at most) and the sms-auto channel approving its own drafts
// through it.
func smsConfig() *config.Config {
	p := config.Provider{Name: "sms", Kind: "twilio"}
	p.AccountSID, p.AuthToken, p.From = "AC"+strings.Repeat("a", 32), "t", "+15550001111"
	return &config.Config{
		Providers: []config.Provider{p},
		Channels: []config.Channel{
			{Name: "sms", Provider: "sms"},
			{Name: "sms-auto", Provider: "sms", AutoApprove: true},
			{Name: "web", Provider: "sandbox"},
		},
		Retry: config.Retry{MaxAttempts: 3},
	}
}

// TestApproveRefusesTooLong: a reply longer than its provider's kind takes
// is refused at approval in one sentence with the count and the limit, and
// nothing is written; at the limit, shortened by an edit, or on a kind
// with no limit, it is approved.
func TestApproveRefusesTooLong(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, smsConfig())
	ctx := context.Background()
	long := strings.Repeat("a", 1599) + "👍" // 1,601 UTF-16 code units, as Twilio counts
	for i, tc := range []struct {
		channel, text, edit string
		refused             bool
	}{
		{"sms", long, "", true},
		{"sms", strings.Repeat("b", 1700), "", true},
		{"sms", strings.Repeat("c", 1600), "", false},
		{"sms", long, "Shorter now.", false},
		{"sms", "Short.", long, true}, // an edit that makes it too long
		{"web", long, "", false},      // the sandbox takes any length
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rec := record(t, st, tc.channel, fmt.Sprintf("%s:long-%d", tc.channel, i), t0)
			d := saved(t, rv, rec.Event, tc.text)
			a, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0, Text: tc.edit})
			var tooLong *review.TooLongError
			if !tc.refused {
				if err != nil || !a.Created {
					t.Fatalf("Approve = %+v, %v; want it approved", a, err)
				}
				return
			}
			sent := tc.text
			if tc.edit != "" {
				sent = tc.edit
			}
			n := len([]rune(sent)) + strings.Count(sent, "👍")
			if !errors.As(err, &tooLong) || tooLong.Length != n || tooLong.Max != 1600 {
				t.Fatalf("Approve = %v, want a TooLongError of %d characters against 1600", err, n)
			}
			if msg := tooLong.Error(); !strings.Contains(msg, fmt.Sprintf("is %d characters", n)) || !strings.Contains(msg, "at most 1600") || strings.Count(msg, ". ") > 0 {
				t.Errorf("the refusal says %q: want one sentence with %d and 1600", msg, n)
			}
			got, err := st.Draft(d.ID)
			if err != nil || got.Status != store.DraftPending || got.OutboxID != "" {
				t.Errorf("after the refusal the draft is %s (outbox %q), %v; want it pending with no outbox row", got.Status, got.OutboxID, err)
			}
			if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 0 {
				t.Errorf("%d delivery jobs after a refused approval, want 0", n)
			}
		})
	}
}

// TestAutoApproveLeavesTooLong: a channel that approves its own drafts
// leaves one too long for its provider pending, for a person to shorten.
func TestAutoApproveLeavesTooLong(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, smsConfig())
	ctx := context.Background()
	for _, tc := range []struct {
		text string
		want store.DraftStatus
	}{{strings.Repeat("x", 1601), store.DraftPending}, {strings.Repeat("x", 1600), store.DraftApproved}} {
		key := fmt.Sprintf("sms-auto:%d", len(tc.text))
		rec := record(t, st, "sms-auto", key, t0)
		job := claim(t, st, t0)
		d := draftFor(rec.Event, tc.text)
		d.ExecutionID = job.ExecutionID
		got, err := rv.Record(ctx, job, &d, 1, t0.Add(time.Second), nil)
		if err != nil || got.Status != tc.want {
			t.Errorf("Record(%d characters) = %s, %v; want %s", len(tc.text), got.Status, err, tc.want)
		}
	}
}
