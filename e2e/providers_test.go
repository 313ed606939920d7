package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/testkit/standin"
)

// pvConfig is an instance whose demo channel auto-approves to a provider
// of kind at the stand-in s, and stores receipts of a simple status shape
// ({"statuses":[{"id","status","biz_opaque_callback_data"}]}), as a
// WhatsApp channel does.
func pvConfig(s *standin.Server) (string, []string) {
	keys := map[string]string{
		"twilio":   fmt.Sprintf("account_sid: %s, auth_token_env: PV_TOKEN, from: \"+15550001111\", status_callback: \"https://handoff.example/hooks/demo\"", s.AccountSID),
		"whatsapp": fmt.Sprintf("phone_number_id: \"%s\", token_env: PV_TOKEN", s.PhoneID),
		"telegram": "token_env: PV_TOKEN",
		"slack":    "token_env: PV_TOKEN",
	}[s.Kind]
	return fmt.Sprintf(`workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    messages: {when: [/id]}
    receipts: {items: /statuses/*, id: /statuses/*/id, status: /statuses/*/status}
    provider: out
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - {name: out, kind: %s, api_base: "%s", timeout: 5s, %s}
retry: {max_attempts: 10, base_delay: 50ms, max_delay: 200ms}
`, s.Kind, s.URL, keys), []string{"PV_TOKEN=" + s.Token}
}

// TestProviderKindsSurviveSIGKILL: for each kind, replies go out through
// its stand-in while handoff is SIGKILLed with a send in flight that the
// stand-in has already accepted. Afterwards every reply was accepted at
// most once, a sent row names the id the stand-in gave, and, for the kinds
// whose receipts name our reference, the status webhooks (through the real
// hook) settle every row whose message arrived, with no person.
func TestProviderKindsSurviveSIGKILL(t *testing.T) {
	const n = 8
	for _, kind := range []string{"twilio", "whatsapp", "telegram", "slack"} {
		t.Run(kind, func(t *testing.T) {
			s := standin.New(t, kind)
			s.SetHold(150 * time.Millisecond)
			cfg, env := pvConfig(s)
			inst := startInstance(t, cfg, env...)
			events := rsPostHooks(t, inst, "pv-"+kind, n)
			testkit.Eventually(t, 30*time.Second, func() bool { return s.Holding() > 0 }, "a send the stand-in holds")
			inst.kill()
			inst.start(env)
			rows := rsSettle(t, inst, events, 60*time.Second)

			byRef := map[string][]standin.Message{}
			byTo := map[string][]standin.Message{}
			for _, m := range s.Accepted() {
				byRef[m.Ref] = append(byRef[m.Ref], m)
				byTo[strings.TrimPrefix(m.To, "+")] = append(byTo[strings.TrimPrefix(m.To, "+")], m)
			}
			receipts := kind == "twilio" || kind == "whatsapp"
			states, settledByReceipt, unknownArrived := map[string]int{}, 0, 0
			defer func() {
				t.Logf("%s: %d replies, %d POSTs, %d accepted, rows %v, %d settled by a receipt", kind, n, s.Posts(), len(s.Accepted()), states, settledByReceipt)
			}()
			for _, key := range events {
				row := rows[key]
				got := byRef[row.ID]
				if !receipts {
					// Telegram and Slack carry no reference of ours: each
					// lead has its own recipient, so count by that.
					// (Telegram sends a numeric chat id as a number.)
					got = byTo[strings.TrimPrefix(toOf(t, inst, key), "+")]
				}
				if len(got) > 1 {
					t.Errorf("%s: the stand-in accepted %d copies of %s; want at most one", key, len(got), row.ID)
				}
				states[row.Status]++
				switch row.Status {
				case "sent":
					if len(got) != 1 || row.ProviderID != got[0].ID {
						t.Errorf("%s: sent as %q but the stand-in accepted %+v", key, row.ProviderID, got)
					}
				case "needs_reconciliation":
					// The kill's send: unknown, and said so.
				default:
					t.Errorf("%s: row %s (%s); want sent or needs_reconciliation", key, row.Status, row.Note)
				}
				if row.Status == "needs_reconciliation" && len(got) == 1 {
					unknownArrived++
					if receipts {
						postReceipt(t, inst, kind, got[0])
					}
				}
			}
			// The kill landed while the stand-in held a send it had
			// accepted: no kind can know that outcome from its answer, so
			// at least that row waits, saying so.
			if unknownArrived == 0 {
				t.Errorf("no row is needs_reconciliation with its message at the stand-in (rows %v); the send held at the kill must be one", states)
			}
			if !receipts {
				return
			}
			for _, key := range events {
				row := rsSettle(t, inst, []string{key}, 10*time.Second)[key]
				if rows[key].Status == "needs_reconciliation" && row.Status == "sent" {
					settledByReceipt++
				}
				if got := byRef[row.ID]; len(got) == 1 && (row.Status != "sent" || row.ProviderID != got[0].ID) {
					t.Errorf("%s: after its receipt the row is %s %q; want sent as %s", key, row.Status, row.ProviderID, got[0].ID)
				}
			}
			if settledByReceipt != unknownArrived {
				t.Errorf("receipts settled %d rows, want all %d that waited with their message at the stand-in", settledByReceipt, unknownArrived)
			}
		})
	}
}

// toOf is the contact (the reply's to) of the event key.
func toOf(t *testing.T, inst *instance, key string) string {
	t.Helper()
	var tl struct {
		Event struct {
			Contact string `json:"contact"`
		} `json:"event"`
	}
	if code, err := dlvGet(inst, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
		t.Fatalf("GET event %s: %d %v", key, code, err)
	}
	return tl.Event.Contact
}

// postReceipt delivers m's "delivered" status to the demo hook: WhatsApp's
// carries our reference in the item, Twilio's in the callback URL.
func postReceipt(t *testing.T, inst *instance, kind string, m standin.Message) {
	t.Helper()
	item := map[string]string{"id": m.ID, "status": "delivered"}
	path := "/hooks/demo"
	if kind == "whatsapp" {
		item["biz_opaque_callback_data"] = m.Ref
	} else {
		cb, err := url.Parse(m.Callback)
		if err != nil {
			t.Fatal(err)
		}
		path += "?" + cb.RawQuery
	}
	body, _ := json.Marshal(map[string]any{"statuses": []any{item}})
	resp, err := inst.client.Post(inst.cur().URL()+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST receipt: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || !strings.Contains(string(b), `"receipts":1`) {
		t.Fatalf("POST receipt: %d %s", resp.StatusCode, b)
	}
}

// TestSMTPSurvivesSIGKILL: replies go out through a real SMTP server
// (Mailpit) whose answer to DATA's final dot is held back by a proxy, and
// handoff is SIGKILLed while the server already has a message. The next
// process looks the Message-ID up instead of sending again: every reply
// arrives exactly once and every row is sent with its Message-ID.
func TestSMTPSurvivesSIGKILL(t *testing.T) {
	const n = 8
	mp := testkit.StartMailpit(t)
	proxy := testkit.StartSMTPCut(t, mp.SMTP)
	proxy.Arm(false)
	proxy.SetDelay(300 * time.Millisecond)
	host, port, _ := net.SplitHostPort(proxy.Addr)
	inst := startInstance(t, fmt.Sprintf(`workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: mail
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - {name: mail, kind: smtp, host: "%s", port: %s, tls: none, from: "Agency <hello@agency.example>",
     timeout: 5s, lookup_url: "%s", lookup_settle: 1s}
retry: {max_attempts: 10, base_delay: 50ms, max_delay: 200ms}
`, host, port, mp.LookupURL()))
	events := make([]string, n)
	for k := range n {
		id := fmt.Sprintf("pv-smtp-%02d", k)
		events[k] = "demo:" + id
		inst.mustPostBody(corpus.Message(10+k, id, fmt.Sprintf("lead-%02d", k), fmt.Sprintf("lead%02d@lead.example", k)))
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return proxy.Holding() > 0 }, "an answer the proxy holds")
	inst.kill()
	inst.restart()
	rows := rsSettle(t, inst, events, 60*time.Second)
	byID := map[string]int{}
	for _, m := range mp.Messages(t) {
		byID[m.MessageID]++
	}
	lookups := 0
	for _, key := range events {
		row := rows[key]
		if row.Status != "sent" || byID[row.ProviderID] != 1 {
			t.Errorf("%s: row %s %q (%s); the server holds %d of it; want sent, exactly once", key, row.Status, row.ProviderID, rsSteps(row), byID[row.ProviderID])
		}
		for _, a := range row.Attempts {
			if a.Action == "lookup" && a.Outcome == "sent" {
				lookups++
			}
		}
	}
	if len(byID) != n {
		t.Errorf("the server holds %d distinct messages, want %d", len(byID), n)
	}
	// The kill landed while the proxy held the answer to a message the
	// server had: that row can only have been settled by its lookup.
	if lookups == 0 {
		t.Errorf("no row was found by lookup after the kill; the message whose answer was held must be")
	}
	t.Logf("smtp: %d replies, %d messages at the server, %d rows found by lookup after the kill", n, len(mp.Messages(t)), lookups)
}

// TestProviderHTTPSurvivesSIGKILL: the generic http kind, SIGKILLed while its
// receiver holds a send it has accepted, with each way it can learn the
// outcome afterwards: an Idempotency-Key the receiver deduplicates on (the
// next process resends), a lookup by our reference (it looks the send up)
// and neither (the row waits for a person, saying so). Every reply ends as
// exactly one message at the receiver, or none, and its row says which.
func TestProviderHTTPSurvivesSIGKILL(t *testing.T) {
	const n = 8
	for _, su := range []struct {
		name, keys string
		dedupe     bool
		resolved   string // how the held send's row ends: its last attempt, or its status
	}{
		{"idempotency key", "    supports_idempotency_key: true\n    timeout: 5s\n", true, "resend:sent"},
		{"lookup", "    lookup_url: \"%s/messages/{ref}\"\n    lookup_settle: 500ms\n    timeout: 5s\n", false, "lookup:sent"},
		{"neither", "    timeout: 5s\n", false, "needs_reconciliation"},
	} {
		t.Run(su.name, func(t *testing.T) {
			p := newRSProvider(t, false, su.dedupe, 0, 150*time.Millisecond)
			inst := startInstance(t, rsConfig(p.url, strings.ReplaceAll(su.keys, "%s", p.url), "{max_attempts: 10, base_delay: 50ms, max_delay: 200ms}"))
			events := rsPostHooks(t, inst, "pvh-"+strings.ReplaceAll(su.name, " ", "-"), n)
			testkit.Eventually(t, 30*time.Second, func() bool { return p.seen().holding > 0 }, "a send the receiver holds")
			inst.kill()
			inst.restart()
			rows := rsSettle(t, inst, events, 60*time.Second)
			s := p.seen()
			resolved, states := 0, map[string]int{}
			for _, key := range events {
				row := rows[key]
				states[row.Status]++
				posts := s.byRef[row.ID]
				effects := s.effects(row.ID, su.dedupe)
				switch {
				case effects > 1:
					t.Errorf("%s: the receiver has %d messages for %s; want at most one", key, effects, row.ID)
				case row.Status == "sent" && (effects != 1 || row.ProviderID != posts[0].ID):
					t.Errorf("%s: sent as %q, but the receiver has %d messages for it (%+v)", key, row.ProviderID, effects, posts)
				case row.Status == "needs_reconciliation" && su.name != "neither":
					t.Errorf("%s: needs_reconciliation (%s); with a key or a lookup no send is left unknown", key, row.Note)
				case row.Status != "sent" && row.Status != "needs_reconciliation":
					t.Errorf("%s: row %s (%s); want sent or needs_reconciliation", key, row.Status, row.Note)
				}
				last := ""
				if len(row.Attempts) > 0 {
					a := row.Attempts[len(row.Attempts)-1]
					last = a.Action + ":" + a.Outcome
				}
				if last == su.resolved || row.Status == su.resolved && effects == 1 {
					resolved++
				}
			}
			t.Logf("http %s: %d replies, %d POSTs, rows %v, %d resolved as %s", su.name, n, len(s.posts), states, resolved, su.resolved)
			// The kill landed on a send the receiver had: its row must have
			// been resolved the way this setup allows, not sent blindly.
			if resolved == 0 {
				t.Errorf("no row ends %s; the send held at the kill must (rows %v)", su.resolved, states)
			}
		})
	}
}

// TestEmailReplyAnswersInboundSubject: an email arrives through the
// mailgun preset with the subject "Refund?"; the approved reply reaches a
// real mail server (Mailpit) as "Re: Refund?", threaded to the email's
// Message-ID.
func TestEmailReplyAnswersInboundSubject(t *testing.T) {
	mp := testkit.StartMailpit(t)
	host, port, _ := net.SplitHostPort(mp.SMTP)
	inst := startInstance(t, fmt.Sprintf(`workers: 2
channels:
  - name: mail-in
    preset: mailgun
    provider: mail
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - {name: mail, kind: smtp, host: "%s", port: %s, tls: none, from: "Agency <hello@agency.example>", timeout: 5s}
`, host, port))
	const msgID = "<20261201.refund.1@mg.example.com>"
	form := url.Values{"Message-Id": {msgID}, "sender": {"ada@lead.example"}, "from": {"Ada <ada@lead.example>"},
		"subject": {"Refund?"}, "stripped-text": {"Can I have my money back?"}}
	resp, err := inst.client.Post(inst.cur().URL()+"/hooks/mail-in", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /hooks/mail-in: %d %s, want 200 (mailgun's answer)", resp.StatusCode, b)
	}
	key := "mail-in:" + msgID
	row := rsSettle(t, inst, []string{key}, 30*time.Second)[key]
	if row.Status != "sent" {
		t.Fatalf("the reply is %s (%s), want sent", row.Status, row.Note)
	}
	got := mp.Search(t, "to:ada@lead.example")
	if len(got) != 1 || got[0].MessageID != row.ProviderID {
		t.Fatalf("mailpit holds %d replies to ada (%+v), want one with Message-ID %s", len(got), got, row.ProviderID)
	}
	if got[0].Subject != "Re: Refund?" {
		t.Errorf("the reply's subject is %q, want %q", got[0].Subject, "Re: Refund?")
	}
	if irt := mp.Headers(t, got[0].ID)["In-Reply-To"]; len(irt) != 1 || irt[0] != msgID {
		t.Errorf("In-Reply-To %v, want %s", irt, msgID)
	}
}
