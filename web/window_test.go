package web

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// windowEnv is the demo plus a wa channel replying through a whatsapp
// stand-in with one template, on a clock the test moves.
func windowEnv(t *testing.T) (*testEnv, *standin.Server, *testkit.Clock) {
	t.Helper()
	wa := standin.New(t, "whatsapp")
	cfg := config.Default()
	p := config.Provider{Name: "wa", Kind: "whatsapp", Timeout: 10 * time.Second}
	p.APIBase, p.PhoneNumberID, p.Token = wa.URL, wa.PhoneID, wa.Token
	p.Templates = []kinds.Template{{Name: "follow_up", Language: "en_US", Parameters: []string{kinds.NameParameter}}}
	cfg.Providers = append(cfg.Providers, p)
	ch := cfg.Channels[0]
	ch.Name, ch.Provider, ch.AutoApprove = "wa", "wa", false
	cfg.Channels = append(cfg.Channels, ch)
	// In the past: the runner and the provider keep the wall clock, so a
	// job the moved clock makes due is due for them too.
	clock := testkit.NewClock(time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC))
	e, _ := newEnv(t, cfg, envOptions{now: clock.Now})
	return e, wa, clock
}

// TestTemplateAfterTheWindow: a WhatsApp lead's draft waits past the
// 24-hour window: the card says so and offers the template, the approval
// is refused (409) in one sentence naming the way out, and the template
// goes out as the draft's answer, through the Cloud API's template shape.
func TestTemplateAfterTheWindow(t *testing.T) {
	e, wa, clock := windowEnv(t)
	sendLead(t, e, "wa", "m-late", leadContact)
	d := waitDraft(t, e, "wa:m-late")
	id := d["id"].(string)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")

	clock.Advance(time.Hour)
	if p := b.getOK("/drafts?id=" + url.QueryEscape(id)); !strings.Contains(p.body, `id="reply-window"`) || !strings.Contains(p.body, "23h left") || strings.Contains(p.body, `id="template-form"`) {
		t.Errorf("an hour after the message the card does not say 23h left (or offers a template): %.400s", p.body[strings.Index(p.body, `id="card"`):])
	}

	clock.Advance(24 * time.Hour)
	code, ans := apiPost(t, e, "/api/v1/drafts/"+id+"/approve", "")
	msg, _ := ans["error"].(string)
	if code != http.StatusConflict || !strings.Contains(msg, "send one of the channel's approved templates (follow_up) or reply on another channel of the lead") {
		t.Fatalf("approving after the window: got %d %v, want 409 naming the template", code, ans)
	}
	b.login("ann", "ann-password") // a day later the session has ended
	if p := b.getOK("/drafts?id=" + url.QueryEscape(id)); !strings.Contains(p.body, `id="template-form"`) || !strings.Contains(p.body, `<option value="follow_up">`) {
		t.Errorf("the card of a closed window offers no template: %.600s", p.body[strings.Index(p.body, `id="card"`):])
	}

	code, ans = apiPost(t, e, "/api/v1/drafts/"+id+"/template", `{"template":"welcome"}`)
	if msg, _ := ans["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "it is not one of its templates (follow_up)") {
		t.Errorf("an unknown template: got %d %v, want 400 naming follow_up", code, ans)
	}
	p := b.hx("/drafts/"+id+"/template", url.Values{"template": {"follow_up"}})
	if p.code != http.StatusOK || !strings.Contains(p.body, "template follow_up (en_US): Ada is on its way") {
		t.Fatalf("sending the template from the card: %d %.400s", p.code, p.body)
	}
	row := waitSent(t, e, store.OutboxID(leadContact, id))
	if tpl, _ := row["template"].(map[string]any); tpl["name"] != "follow_up" {
		t.Errorf("the outbox row's template is %v, want follow_up", row["template"])
	}
	if acc := wa.Accepted(); len(acc) != 1 || acc[0].Text != "template follow_up" || acc[0].Ref != store.OutboxID(leadContact, id) {
		t.Errorf("the Cloud API accepted %+v, want the template once, with our reference", acc)
	}
	if bad := wa.Malformed(); len(bad) > 0 {
		t.Errorf("the stand-in refused the template's shape: %v", bad)
	}
	code, ans = apiPost(t, e, "/api/v1/drafts/"+id+"/template", `{"template":"follow_up"}`)
	if code != http.StatusOK || ans["status"] != "already_approved" {
		t.Errorf("the template again: got %d %v, want 200 already_approved", code, ans)
	}
}

// TestQueueClosingFirst: on the queue's page the draft whose window closes
// soonest comes first, ahead of older drafts of channels without one.
func TestQueueClosingFirst(t *testing.T) {
	e, _, clock := windowEnv(t)
	sendLead(t, e, "demo", "m-old", "+15550009001")
	waitDraft(t, e, "demo:m-old")
	clock.Advance(time.Minute)
	sendLead(t, e, "wa", "m-new", "+15550009002")
	wa := waitDraft(t, e, "wa:m-new")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts")
	if !strings.Contains(p.body, `<section id="card" class="card" data-draft="`+wa["id"].(string)+`"`) {
		t.Errorf("the queue's first card is not the draft whose window closes: %.300s", p.body[strings.Index(p.body, `id="card"`):])
	}
}

// TestUnknownWindowCard: when a WhatsApp lead's latest message cannot be
// read, its window cannot be judged: the card says so and offers the
// template instead, the approval is refused (409) in one sentence saying
// why, nothing reaches the Cloud API, and the template still goes out.
func TestUnknownWindowCard(t *testing.T) {
	e, wa, _ := windowEnv(t)
	sendLead(t, e, "wa", "m-lost", leadContact)
	d := waitDraft(t, e, "wa:m-lost")
	id := d["id"].(string)
	lead := store.LeadKey("wa", leadContact)
	err := e.st.Update(t.Context(), func(tx *store.Tx) error {
		old, err := tx.Handoff(lead)
		if err != nil {
			return err
		}
		h := old
		h.LastEventKey = lead + ":gone" // the latest message can no longer be read
		return tx.PutHandoff(&old, &h)
	})
	if err != nil {
		t.Fatal(err)
	}
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts?id=" + url.QueryEscape(id))
	card := p.body[strings.Index(p.body, `id="card"`):]
	if !strings.Contains(card, "reply window cannot be judged") || !strings.Contains(card, "counts as closed") || !strings.Contains(card, `id="template-form"`) {
		t.Errorf("the card of an unknown window does not say it cannot be judged, or offers no template: %.800s", card)
	}
	code, ans := apiPost(t, e, "/api/v1/drafts/"+id+"/approve", "")
	msg, _ := ans["error"].(string)
	if code != http.StatusConflict || !strings.Contains(msg, "cannot be judged") || !strings.Contains(msg, "follow_up") {
		t.Fatalf("approving with the window unknown: got %d %v, want 409 saying it cannot be judged and naming the template", code, ans)
	}
	if acc := wa.Accepted(); len(acc) != 0 {
		t.Errorf("the Cloud API accepted %+v after a refused approval, want nothing", acc)
	}
	if p := b.hx("/drafts/"+id+"/template", url.Values{"template": {"follow_up"}}); p.code != http.StatusOK {
		t.Fatalf("sending the template from the card: %d %.400s", p.code, p.body)
	}
	waitSent(t, e, store.OutboxID(leadContact, id))
	if acc := wa.Accepted(); len(acc) != 1 || acc[0].Text != "template follow_up" {
		t.Errorf("the Cloud API accepted %+v, want the template once", acc)
	}
}

// TestClosedWindowOffersNoApprove: once the reply window closed, the card
// offers no Approve (nor Edit and approve, nor a reply of one's own, nor a
// new draft — each would be refused): it shows the draft and the ways out,
// the template, another channel, Reject and closing the lead; the lead's
// page offers no reply of one's own either. While the window is open the
// card offers Approve.
func TestClosedWindowOffersNoApprove(t *testing.T) {
	e, _, clock := windowEnv(t)
	sendLead(t, e, "wa", "m-shut", leadContact)
	d := waitDraft(t, e, "wa:m-shut")
	id := d["id"].(string)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	card := func() string {
		t.Helper()
		p := b.getOK("/drafts?id=" + url.QueryEscape(id))
		return p.body[strings.Index(p.body, `id="card"`):]
	}

	clock.Advance(time.Hour)
	if c := card(); !strings.Contains(c, `id="approve"`) || !strings.Contains(c, `id="send-own"`) || strings.Contains(c, `id="draft-unsendable"`) {
		t.Fatalf("with the window open the card does not offer Approve and a reply of one's own: %.3000s", c)
	}

	clock.Advance(24 * time.Hour)
	b.login("ann", "ann-password") // a day later the session has ended
	c := card()
	for _, gone := range []string{`id="approve"`, `id="approve-edit"`, `id="draft-text"`, `id="send-own"`, `id="redraft"`} {
		if strings.Contains(c, gone) {
			t.Errorf("the card of a closed window still has %s", gone)
		}
	}
	for _, want := range []string{`id="template-form"`, `id="send-template"`, `id="reject"`, `id="close-lead"`, `id="draft-unsendable"`, `id="window-closed-actions"`, "reply on another channel of the lead", html.EscapeString(d["text"].(string))} {
		if !strings.Contains(c, want) {
			t.Errorf("the card of a closed window lacks %q: %.4000s", want, c)
		}
	}
	if p := b.getOK("/events/" + url.PathEscape("wa:m-shut")); strings.Contains(p.body, `id="send-own"`) || !strings.Contains(p.body, `id="close-lead"`) {
		t.Errorf("the lead's page after the window offers a reply of one's own, or no close: %.3000s", p.body)
	}
	// Reject is still a way out.
	if p := b.hx("/drafts/"+id+"/reject", url.Values{"reason": {"too late"}}); p.code != http.StatusOK {
		t.Errorf("reject after the window: %d %.300s", p.code, p.body)
	}
}
