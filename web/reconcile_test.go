package web

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/views"
)

// reconcileConfig is the demo plus two channels whose sandbox providers
// leave a reply needing a person: "stall" accepts the message and then
// answers like a timeout; "flaky" fails its first send ambiguously. Neither
// can look a message up or honours an idempotency key.
func reconcileConfig() *config.Config {
	cfg := config.Default()
	cfg.Providers = []config.Provider{
		{Name: "stall", Kind: "sandbox", TimeoutAfterAccept: true, NoLookup: true, Timeout: 10 * time.Second},
		{Name: "flaky", Kind: "sandbox", Fail: "ambiguous", FailFirst: 1, NoLookup: true, Timeout: 10 * time.Second},
	}
	for _, name := range []string{"stall", "flaky"} {
		ch := cfg.Channels[0]
		ch.Name, ch.Provider = name, name
		cfg.Channels = append(cfg.Channels, ch)
	}
	return cfg
}

// parkedReply sends a message on channel, approves its draft and waits until
// the reply needs reconciliation; it returns the outbox row.
func parkedReply(t *testing.T, e *testEnv, channel, id, conv string) map[string]any {
	t.Helper()
	sendLead(t, e, channel, id, conv)
	draftID := waitDraft(t, e, channel+":"+id)["id"].(string)
	code, ans := apiPost(t, e, "/api/v1/drafts/"+draftID+"/approve", "")
	if code != http.StatusOK {
		t.Fatalf("approve: got %d %v", code, ans)
	}
	outboxID := ans["outbox_id"].(string)
	var row map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		row = apiGet(t, e, outboxPath(outboxID))
		if s := row["status"]; s != string(store.OutboxPending) && s != string(store.OutboxEffectPending) && s != string(store.OutboxNeedsReconciliation) {
			t.Fatalf("row went %v, want needs_reconciliation: %v", s, row)
		}
		return row["status"] == string(store.OutboxNeedsReconciliation)
	}, outboxID+" to need reconciliation")
	return row
}

// attemptExecs lists the execution ids of a timeline's deliver jobs.
func attemptExecs(tl map[string]any) []string {
	var out []string
	jobs, _ := tl["jobs"].([]any)
	for _, j := range jobs {
		jm := j.(map[string]any)
		if jm["kind"] != "deliver" {
			continue
		}
		as, _ := jm["attempts"].([]any)
		for _, a := range as {
			out = append(out, a.(map[string]any)["execution_id"].(string))
		}
	}
	return out
}

func TestReconcileSent(t *testing.T) {
	e := newTestEnv(t, reconcileConfig())
	row := parkedReply(t, e, "stall", "s-1", leadContact)
	id := row["id"].(string)
	if !strings.HasPrefix(id, leadContact+":d") {
		t.Fatalf("outbox id %q, want %s:<draft id>", id, leadContact)
	}
	msgs := sandboxFor(t, e, id)
	if len(msgs) != 1 || msgs[0]["repeats"] != float64(0) {
		t.Fatalf("sandbox messages %v, want the one accepted before the timeout", msgs)
	}
	providerID := msgs[0]["id"].(string)

	// The row as a person sees it, by an escaped and an unescaped id.
	for _, path := range []string{outboxPath(id), "/api/v1/outbox/" + id, "/api/v1/outbox/" + url.PathEscape(id)} {
		got := apiGet(t, e, path)
		if got["id"] != id {
			t.Errorf("GET %s answered row %v, want %s", path, got["id"], id)
		}
	}
	attempts, _ := row["attempts"].([]any)
	tl := apiGet(t, e, timelinePath("stall:s-1"))
	execs := attemptExecs(tl)
	if len(attempts) != 1 || len(execs) != 1 {
		t.Fatalf("row attempts %v and delivery executions %v, want one of each", attempts, execs)
	}
	a := attempts[0].(map[string]any)
	if a["execution_id"] != execs[0] || a["action"] != "send" || a["outcome"] != "ambiguous" {
		t.Errorf("attempt %v, want the ambiguous send of execution %s", a, execs[0])
	}
	if note, _ := row["note"].(string); !strings.Contains(note, "reconcile") {
		t.Errorf("note %q, want it to tell a person to reconcile", note)
	}

	path := "/api/v1/reconcile/" + strings.NewReplacer("+", "%2B", ":", "%3A").Replace(id)
	bad := []struct {
		name, body, want string
	}{
		{"no body", "", "JSON body"},
		{"unknown outcome", `{"outcome":"maybe"}`, `"maybe"`},
		{"no outcome", `{"provider_id":"x"}`, "outcome"},
		{"sent without provider_id", `{"outcome":"sent"}`, "provider_id"},
		{"sent with a blank provider_id", `{"outcome":"sent","provider_id":"  "}`, "provider_id"},
		{"not_sent with provider_id", `{"outcome":"not_sent","provider_id":"x"}`, "provider_id"},
		{"unknown field", `{"outcome":"sent","provider_id":"x","by":"me"}`, `"by"`},
		{"not JSON", `outcome=sent`, "JSON"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			before := apiGet(t, e, outboxPath(id))
			code, ans := apiPost(t, e, path, tt.body)
			msg, _ := ans["error"].(string)
			if code != http.StatusBadRequest || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %v, want 400 naming %s", code, ans, tt.want)
			}
			if after := apiGet(t, e, outboxPath(id)); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused reconciliation changed the row:\n before %v\n after  %v", before, after)
			}
		})
	}
	for _, p := range []string{"/api/v1/reconcile/nobody%3Ad0", "/api/v1/outbox/nobody%3Ad0"} {
		method, body := http.MethodPost, `{"outcome":"not_sent"}`
		if strings.Contains(p, "outbox") {
			method, body = http.MethodGet, ""
		}
		var raw []byte
		if body != "" {
			raw = []byte(body)
		}
		code, ans := e.do(t, method, p, "application/json", raw, tokenHeader())
		if msg, _ := ans["error"].(string); code != http.StatusNotFound || !strings.Contains(msg, "nobody:d0") {
			t.Errorf("%s %s: got %d %v, want 404 naming the id", method, p, code, ans)
		}
	}

	code, ans := apiPost(t, e, path, `{"outcome":"sent","provider_id":"`+providerID+`"}`)
	if code != http.StatusOK || ans["status"] != string(store.OutboxSent) || ans["provider_id"] != providerID {
		t.Fatalf("reconcile sent: got %d %v, want 200 sent as %s", code, ans, providerID)
	}
	got := apiGet(t, e, outboxPath(id))
	recs, _ := got["reconciliations"].([]any)
	if got["status"] != string(store.OutboxSent) || got["provider_id"] != providerID || len(recs) != 1 {
		t.Fatalf("row after reconcile %v, want sent as %s with one reconciliation", got, providerID)
	}
	if r := recs[0].(map[string]any); r["by"] != "api-token" || r["outcome"] != "sent" || r["provider_id"] != providerID || r["at"] == nil {
		t.Errorf("reconciliation %v, want sent %s by api-token", r, providerID)
	}
	if s := leadStatusOf(apiGet(t, e, timelinePath("stall:s-1"))); s != string(leads.Replied) {
		t.Errorf("lead is %v after reconciling sent, want replied", s)
	}
	code, ans = apiPost(t, e, path, `{"outcome":"not_sent"}`)
	if msg, _ := ans["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "sent") {
		t.Errorf("reconciling a sent row: got %d %v, want 409", code, ans)
	}
	if m := sandboxFor(t, e, id); len(m) != 1 || m[0]["repeats"] != float64(0) {
		t.Errorf("sandbox messages %v, want still one, never repeated", m)
	}
}

func TestReconcileNotSentDeliversOnce(t *testing.T) {
	e := newTestEnv(t, reconcileConfig())
	row := parkedReply(t, e, "flaky", "f-1", leadContact)
	id := row["id"].(string)
	if m := sandboxFor(t, e, id); len(m) != 0 {
		t.Fatalf("sandbox holds %v after a failed send, want nothing", m)
	}
	if s := leadStatusOf(apiGet(t, e, timelinePath("flaky:f-1"))); s == string(leads.Replied) {
		t.Fatalf("lead is replied before anything was sent")
	}

	code, ans := apiPost(t, e, "/api/v1/reconcile/"+url.PathEscape(id), `{"outcome":"not_sent"}`)
	if code != http.StatusOK || ans["id"] != id || ans["status"] != string(store.OutboxPending) {
		t.Fatalf("reconcile not_sent: got %d %v, want 200 with row %s pending", code, ans, id)
	}
	sent := waitSent(t, e, id)
	msgs := sandboxFor(t, e, id)
	if len(msgs) != 1 || msgs[0]["repeats"] != float64(0) || sent["provider_id"] != msgs[0]["id"] {
		t.Fatalf("sandbox messages %v, row sent as %v; want exactly one, never repeated, with that id", msgs, sent["provider_id"])
	}
	recs, _ := sent["reconciliations"].([]any)
	if len(recs) != 1 || recs[0].(map[string]any)["by"] != "api-token" || recs[0].(map[string]any)["outcome"] != "not_sent" {
		t.Errorf("reconciliations %v, want one not_sent by api-token", recs)
	}
	attempts, _ := sent["attempts"].([]any)
	var summary []string
	for _, a := range attempts {
		am := a.(map[string]any)
		summary = append(summary, am["action"].(string)+":"+am["outcome"].(string))
	}
	if strings.Join(summary, ",") != "send:ambiguous,send:sent" {
		t.Errorf("attempts %v, want the ambiguous send and, after the person's not_sent, one send", summary)
	}
	tl := apiGet(t, e, timelinePath("flaky:f-1"))
	if s := leadStatusOf(tl); s != string(leads.Replied) {
		t.Errorf("lead is %v, want replied", s)
	}
	if kinds := jobKinds(tl); len(kinds) != 3 {
		t.Errorf("jobs %v, want the draft, the first delivery and the one reconciliation enqueued", kinds)
	}
}

// lookupConfig has three channels, approved automatically, whose one
// delivery attempt ends unknown (needs_reconciliation): "look" goes to a
// sandbox that takes the message and times out, and can look it up;
// "gone" to one that fails before taking it, and can look up; "blind" to
// one that takes it and times out and cannot look up. A fourth, "refuse",
// fails for good: a plain dead letter.
func lookupConfig() *config.Config {
	cfg := config.Default()
	cfg.Retry.MaxAttempts = 1
	cfg.Providers = []config.Provider{
		{Name: "look", Kind: "sandbox", TimeoutAfterAccept: true, Timeout: 10 * time.Second},
		{Name: "gone", Kind: "sandbox", Fail: "ambiguous", Timeout: 10 * time.Second},
		{Name: "blind", Kind: "sandbox", TimeoutAfterAccept: true, NoLookup: true, Timeout: 10 * time.Second},
		{Name: "refuse", Kind: "sandbox", Fail: "permanent"},
	}
	base := cfg.Channels[0]
	cfg.Channels = nil
	for _, name := range []string{"look", "gone", "blind", "refuse"} {
		ch := base
		ch.Name, ch.Provider, ch.AutoApprove = name, name, true
		cfg.Channels = append(cfg.Channels, ch)
	}
	return cfg
}

// rowOn sends a lead on channel and waits until its reply is in status.
func rowOn(t *testing.T, e *testEnv, channel string, status store.OutboxStatus) store.Outbox {
	t.Helper()
	sendLead(t, e, channel, channel+"-1", "+1555000"+fmt.Sprint(len(channel)))
	var row store.Outbox
	testkit.Eventually(t, 10*time.Second, func() bool {
		rows, err := e.st.OutboxByStatus(status, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rows {
			if o.Channel == channel {
				row = o
				return settled(t, e, o.EventKey)
			}
		}
		return false
	}, "the reply on "+channel+" to be "+string(status))
	return row
}

var tileRe = regexp.MustCompile(`<span class="n">(\d+)</span> ?<span class="label">([^<]+)</span>`)

// tiles reads the overview's counts by label.
func tiles(t *testing.T, b *browser) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range tileRe.FindAllStringSubmatch(b.getOK("/").body, -1) {
		n, _ := strconv.Atoi(m[1])
		out[m[2]] = n
	}
	return out
}

// TestLookItUpNow: on the reconcile page, a reply whose provider can find
// a send by our reference gets "Look it up now", which asks once and
// settles it by the answer (found: sent; not found: failed, back among the
// dead letters as resend-safe); a provider without lookup keeps the
// sentence that it cannot be asked again automatically, and its reply is
// refused a lookup. The overview and the pages count a reply to reconcile
// once, never among the dead letters too.
func TestLookItUpNow(t *testing.T) {
	t.Parallel()
	e, _ := newEnv(t, lookupConfig(), envOptions{})
	look := rowOn(t, e, "look", store.OutboxNeedsReconciliation)
	gone := rowOn(t, e, "gone", store.OutboxNeedsReconciliation)
	blind := rowOn(t, e, "blind", store.OutboxNeedsReconciliation)
	refused := rowOn(t, e, "refuse", store.OutboxFailed)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")

	if got := tiles(t, admin); got["dead letters"] != 1 || got["replies to reconcile"] != 3 {
		t.Errorf("overview tiles %v, want 1 dead letter and 3 replies to reconcile, apart", got)
	}
	if ids := readTable(t, admin, "/dead-letters").ids; fmt.Sprint(ids) != fmt.Sprint([]string{refused.ID}) {
		t.Errorf("the table lists %v, want only the refused reply %s", ids, refused.ID)
	}

	rp := admin.getOK("/reconcile")
	// Each row is titled by its customer and channel, not its outbox id.
	for _, ch := range []string{"look", "gone", "blind"} {
		if !strings.Contains(rp.body, `<h2 dir="auto">Reply to Ada <span class="chip">`+ch+`</span></h2>`) {
			t.Errorf("the row on %s is not titled by its customer: %.3000s", ch, rp.body)
		}
	}
	if strings.Contains(rp.body, `<h2 class="mono">`) {
		t.Errorf("a row is still titled by its outbox id")
	}
	if n := strings.Count(rp.body, "Look it up now"); n != 2 {
		t.Errorf("%d lookup buttons, want 2 (look and gone)", n)
	}
	for _, id := range []string{look.ID, gone.ID} {
		if !strings.Contains(rp.body, `action="`+dlPagePath(id, "lookup")+`"`) {
			t.Errorf("no lookup form for %s", id)
		}
	}
	if strings.Contains(rp.body, `action="`+dlPagePath(blind.ID, "lookup")+`"`) || !strings.Contains(rp.body, "Provider blind cannot look a message up, so the answer cannot be asked again automatically") {
		t.Errorf("the reply of the provider without lookup: want no lookup, and the sentence that it cannot be asked again")
	}

	// Found: sent, with the sandbox's id; the notice says so.
	if p := admin.do(http.MethodPost, dlPagePath(look.ID, "lookup"), url.Values{"back": {"reconcile"}}, nil); p.code != http.StatusForbidden {
		t.Errorf("a lookup without the CSRF token: %d, want 403", p.code)
	}
	p := admin.post(dlPagePath(look.ID, "lookup"), url.Values{"back": {"reconcile"}})
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/reconcile?") {
		t.Fatalf("look it up: %d %q, want a redirect to /reconcile", p.code, p.header.Get("Location"))
	}
	after := admin.getOK(p.header.Get("Location"))
	if !has(after.body, "The provider has reply "+look.ID+" as sbx_") || !has(after.body, "recorded as sent") {
		t.Errorf("no notice of the lookup's answer: %.400s", after.body)
	}
	o, _ := e.st.OutboxRow(look.ID)
	if o.Status != store.OutboxSent || !strings.HasPrefix(o.ProviderID, "sbx_") || o.Attempts[len(o.Attempts)-1].Action != "lookup" {
		t.Errorf("the looked-up row is %s as %q, want sent with the sandbox's id after a lookup attempt", o.Status, o.ProviderID)
	}
	if h, _ := e.st.Handoff(store.LeadKey("look", o.ConversationID)); h.Status != leads.Replied {
		t.Errorf("lead %s, want replied", h.Status)
	}
	wantAuditBy(t, e.st, "boss", "look up", look.ID)
	if strings.Contains(after.body, `action="`+dlPagePath(look.ID, "lookup")+`"`) {
		t.Errorf("a settled reply is still on the reconcile page")
	}

	// Not found: failed, back on the table as resend-safe, through the API.
	code, ans := apiPost(t, e, deadLetterPath(gone.ID, "lookup"), "")
	if code != http.StatusOK || ans["verdict"] != "failed" || ans["status"] != string(store.OutboxFailed) {
		t.Fatalf("API lookup: %d %v, want 200 failed", code, ans)
	}
	table := admin.getOK("/dead-letters")
	if !has(table.body, `name="id" value="`+gone.ID+`"`) {
		t.Errorf("the reply the provider never got is not back on the table")
	}
	if ip := admin.getOK(views.DeadLetterURL(gone.ID)); !has(ip.body, "Safe to replay") || strings.Contains(ip.body, "Look it up now") {
		t.Errorf("its page: want it safe to replay, with nothing left to look up")
	}
	if got := tiles(t, admin); got["dead letters"] != 2 || got["replies to reconcile"] != 1 {
		t.Errorf("overview tiles after the lookups %v, want 2 dead letters and 1 reply to reconcile", got)
	}

	// No lookup: refused in a sentence, nothing written.
	if r := admin.hx(dlPagePath(blind.ID, "lookup"), url.Values{}); r.code != http.StatusConflict || !strings.Contains(r.body, "unable to look a message up") {
		t.Errorf("a lookup on a provider without one: %d %.300s, want 409 saying so", r.code, r.body)
	}
	if o, _ := e.st.OutboxRow(blind.ID); o.Status != store.OutboxNeedsReconciliation || len(o.Attempts) != 1 {
		t.Errorf("the refused lookup changed the row: %s %d attempts", o.Status, len(o.Attempts))
	}
	// An approver is not let in.
	dana := loggedIn(t, e, "dana", store.RoleApprover, "")
	if r := dana.post(dlPagePath(blind.ID, "lookup"), url.Values{}); r.code != http.StatusForbidden && r.code != http.StatusNotFound {
		t.Errorf("an approver's lookup: %d, want 403 or 404", r.code)
	}
}
