package web

import (
	"strconv"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestQueueCardSMS shows a lead that gave only a number on a channel that
// replies by SMS: the card and the list call it by the number, not "—",
// and the reply shows its SMS length and segment count.
func TestQueueCardSMS(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "tw", Kind: "twilio", ProviderKinds: config.ProviderKinds{AccountSID: "AC0123456789abcdef0123456789abcdef", AuthTokenEnv: "TW_TOKEN", AuthToken: "tw-token-value", From: "+15550009999"}})
	cfg.Channels[0].Provider = "tw"
	e := newTestEnv(t, cfg)
	// Nameless messages (corpus bodies without their name member: pretty
	// with markup, Python's escapes with emoji), from two numbers.
	ms := []corpus.Body{
		withoutMembers(t, corpus.MessageAs("fish", "pretty2", "s1", "", "+15550001111"), "name"),
		withoutMembers(t, corpus.MessageAs("emoji", "python", "s2", "", "+15550001112"), "name"),
	}
	var ds []store.Draft
	for _, m := range ms {
		ds = append(ds, pendingCorpus(t, e, "demo", m))
		wantStored(t, e, "demo", m)
	}
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	for i, d := range ds {
		number := ms[i].Want.Contact
		p := b.getOK("/drafts?id=" + d.ID)
		if !strings.Contains(p.body, `<h2 dir="auto">`+number+`</h2>`) {
			t.Errorf("the card of a lead with no name does not call it by its number %s: %.200s", number, p.body[strings.Index(p.body, `id="card"`):])
		}
		if !strings.Contains(p.body, "<strong>"+number+"</strong>") {
			t.Errorf("the queue list does not call the nameless lead by its number %s", number)
		}
		want := `id="sms-count" class="muted small sms-count" aria-live="polite">` + smsWant(d.Text)
		if !strings.Contains(p.body, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
}

// smsWant is the count line of a short GSM-7 reply.
func smsWant(text string) string { return strconv.Itoa(len(text)) + " characters · 1 SMS" }
