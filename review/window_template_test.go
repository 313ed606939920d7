package review_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// TestSendTemplateAfterTheWindow: once the window closed, a person answers
// the draft with one of its provider's templates: the draft's one outbox
// row (the reply's id) carries the template with {name} filled in, the
// turn ends, and asking again, or approving, answers that row.
func TestSendTemplateAfterTheWindow(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, windowConfig())
	ctx := context.Background()
	rec := record(t, st, "wa", "wa:tpl-1", t0)
	d := saved(t, rv, rec.Event, "Still interested?")
	late := t0.Add(3 * 24 * time.Hour)
	var closed *review.WindowClosedError
	if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: late}); !errors.As(err, &closed) || !strings.Contains(err.Error(), "templates (follow_up)") {
		t.Fatalf("Approve after the window = %v, want a WindowClosedError naming follow_up", err)
	}
	a, err := rv.SendTemplate(ctx, d.ID, review.TemplateChoice{Name: "follow_up"}, store.Decision{By: "ann", At: late})
	if err != nil || !a.Created {
		t.Fatalf("SendTemplate = %+v, %v; want the draft answered", a, err)
	}
	want := &store.OutboxTemplate{Name: "follow_up", Language: "en_US", Params: []string{"Ada"}}
	if a.Outbox.ID != store.OutboxID(d.ConversationID, d.ID) || !reflect.DeepEqual(a.Outbox.Template, want) || a.Outbox.Text != "template follow_up (en_US): Ada" {
		t.Errorf("outbox row %s template %+v text %q; want %s with %+v", a.Outbox.ID, a.Outbox.Template, a.Outbox.Text, store.OutboxID(d.ConversationID, d.ID), want)
	}
	if a.Draft.Status != store.DraftApproved || a.Draft.Decision.Text != a.Outbox.Text || a.Draft.Decision.Edited {
		t.Errorf("draft %s decision %+v; want it approved with the template's text", a.Draft.Status, a.Draft.Decision)
	}
	if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 1 {
		t.Errorf("%d delivery jobs, want 1", n)
	}
	h, _ := st.Handoff(store.LeadKey("wa", rec.Event.ConversationID))
	if h.TurnDraft != "" {
		t.Errorf("the turn is still open (%s) after the template answered it", h.TurnDraft)
	}
	again, err := rv.SendTemplate(ctx, d.ID, review.TemplateChoice{Name: "follow_up"}, store.Decision{By: "bob", At: late})
	if err != nil || again.Created || again.Outbox.ID != a.Outbox.ID {
		t.Errorf("SendTemplate again = created %v row %s, %v; want the first answer", again.Created, again.Outbox.ID, err)
	}
	if ap, err := rv.Approve(ctx, d.ID, store.Decision{By: "bob", At: late}); err != nil || ap.Created || ap.Outbox.Template == nil {
		t.Errorf("Approve after the template = created %v template %+v, %v; want the template's row", ap.Created, ap.Outbox.Template, err)
	}
}

// TestSendTemplateRefusals: a template the provider does not have, the
// wrong number of parameters, a parameter WhatsApp refuses, a provider
// without templates: each one sentence, nothing written; given
// parameters replace the config's.
func TestSendTemplateRefusals(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, windowConfig())
	ctx := context.Background()
	late := t0.Add(48 * time.Hour)
	for i, tc := range []struct {
		channel string
		choice  review.TemplateChoice
		want    string // "" : answered
	}{
		{"wa", review.TemplateChoice{Name: "welcome"}, `it is not one of its templates (follow_up)`},
		{"wa", review.TemplateChoice{Name: "follow_up", Params: []string{"a", "b"}}, "it takes 1 parameters, and 2 were given"},
		{"wa", review.TemplateChoice{Name: "follow_up", Params: []string{"two\nlines"}}, "parameter 1: a template parameter must not hold line breaks"},
		{"ig", review.TemplateChoice{Name: "follow_up"}, "the provider has no templates configured; reply on another channel of the lead"},
		{"wa", review.TemplateChoice{Name: "follow_up", Params: []string{"Mrs Lovelace"}}, ""},
	} {
		rec := record(t, st, tc.channel, tc.channel+":tpl-r"+string(rune('a'+i)), t0)
		d := saved(t, rv, rec.Event, "Hello?")
		a, err := rv.SendTemplate(ctx, d.ID, tc.choice, store.Decision{By: "ann", At: late})
		if tc.want == "" {
			if err != nil || a.Outbox.Template == nil || a.Outbox.Template.Params[0] != "Mrs Lovelace" {
				t.Errorf("%d: SendTemplate = %+v, %v; want the given parameter sent", i, a.Outbox.Template, err)
			}
			continue
		}
		var te *review.TemplateError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) || strings.Contains(te.Error(), ". ") {
			t.Errorf("%d: SendTemplate = %v; want a TemplateError saying %q", i, err, tc.want)
		}
		if got, _ := st.Draft(d.ID); got.Status != store.DraftPending {
			t.Errorf("%d: after the refusal the draft is %s, want pending", i, got.Status)
		}
	}
}
