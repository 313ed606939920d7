package web

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
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
	body := `{"id":"s1","from":"+15550001111","text":"Is the blue one in stock?"}`
	if code, ans := e.do(t, http.MethodPost, "/hooks/demo", "application/json", []byte(body), nil); code != http.StatusAccepted {
		t.Fatalf("hook: %d %v", code, ans)
	}
	var d store.Draft
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		d, err = e.st.DraftByEvent("demo:s1")
		return err == nil
	}, "the draft of s1")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts")
	if !strings.Contains(p.body, `<h2 dir="auto">+15550001111</h2>`) {
		t.Errorf("the card of a lead with no name does not call it by its number: %.200s", p.body[strings.Index(p.body, `id="card"`):])
	}
	if !strings.Contains(p.body, "<strong>+15550001111</strong>") {
		t.Error("the queue list does not call the nameless lead by its number")
	}
	want := `id="sms-count" class="muted small sms-count" aria-live="polite">` + smsWant(d.Text)
	if !strings.Contains(p.body, want) {
		t.Errorf("the card lacks %q", want)
	}
}

// smsWant is the count line of a short GSM-7 reply.
func smsWant(text string) string { return strconv.Itoa(len(text)) + " characters · 1 SMS" }
