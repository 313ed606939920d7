package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// leadContact is the contact and conversation of the approval tests: a
// real phone number, so the outbox id "<conversation id>:<draft id>"
// carries a '+' and a ':' through every route.
const leadContact = "+15550001234"

// tokenHeader authenticates as the API token.
func tokenHeader() http.Header { return http.Header{"Authorization": {"Bearer " + testToken}} }

// sendLead posts one message for conversation conv to channel and returns
// its correlation id: from conv, named Ada, "Do you ship to Lisbon?", in a
// corpus body whose layout id picks (demoMessage).
func sendLead(t *testing.T, e *testEnv, channel, id, conv string) string {
	t.Helper()
	code, ans := hookCorpus(t, e, channel, demoMessage(t, id, conv, conv, "Ada", "Do you ship to Lisbon?"))
	if code != http.StatusAccepted {
		t.Fatalf("POST /hooks/%s %s: got %d %v, want 202", channel, id, code, ans)
	}
	corr, _ := ans["correlation_id"].(string)
	return corr
}

// apiGet fetches path with the API token and wants 200.
func apiGet(t *testing.T, e *testEnv, path string) map[string]any {
	t.Helper()
	code, ans := e.do(t, http.MethodGet, path, "", nil, tokenHeader())
	if code != http.StatusOK {
		t.Fatalf("GET %s: got %d %v, want 200", path, code, ans)
	}
	return ans
}

// apiPost posts body (none when empty) with the API token.
func apiPost(t *testing.T, e *testEnv, path, body string) (int, map[string]any) {
	t.Helper()
	var raw []byte
	ct := ""
	if body != "" {
		raw, ct = []byte(body), "application/json"
	}
	return e.do(t, http.MethodPost, path, ct, raw, tokenHeader())
}

func timelinePath(eventKey string) string { return "/api/v1/events/" + url.PathEscape(eventKey) }

// outboxPath escapes every '+' and ':' of id, as a careful client would.
func outboxPath(id string) string {
	return "/api/v1/outbox/" + strings.NewReplacer("+", "%2B", ":", "%3A").Replace(url.PathEscape(id))
}

// waitDraft waits until the event's draft is stored and returns it.
func waitDraft(t *testing.T, e *testEnv, eventKey string) map[string]any {
	t.Helper()
	var d map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		code, tl := e.do(t, http.MethodGet, timelinePath(eventKey), "", nil, tokenHeader())
		if code != http.StatusOK {
			return false
		}
		d, _ = tl["draft"].(map[string]any)
		return d != nil
	}, "the draft of "+eventKey)
	return d
}

// sandboxFor returns the sandbox messages whose reference is ref.
func sandboxFor(t *testing.T, e *testEnv, ref string) []map[string]any {
	t.Helper()
	ans := apiGet(t, e, "/api/v1/sandbox/messages?limit=1000")
	var out []map[string]any
	msgs, _ := ans["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["client_ref"] == ref {
			out = append(out, mm)
		}
	}
	return out
}

// waitSent waits until outbox row id is sent and returns it.
func waitSent(t *testing.T, e *testEnv, id string) map[string]any {
	t.Helper()
	var row map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		var code int
		code, row = e.do(t, http.MethodGet, outboxPath(id), "", nil, tokenHeader())
		if code != http.StatusOK && code != http.StatusNotFound {
			t.Fatalf("GET outbox %s: got %d %v", id, code, row)
		}
		return code == http.StatusOK && row["status"] == string(store.OutboxSent)
	}, "outbox row "+id+" to be sent")
	return row
}

// jobKinds lists the kinds of a timeline's jobs.
func jobKinds(tl map[string]any) []string {
	var out []string
	jobs, _ := tl["jobs"].([]any)
	for _, j := range jobs {
		k, _ := j.(map[string]any)["kind"].(string)
		out = append(out, k)
	}
	return out
}

func leadStatusOf(tl map[string]any) any {
	h, _ := tl["handoff"].(map[string]any)
	return h["status"]
}

// approvalResult is one concurrent approval's result.
type approvalResult struct {
	code int
	body map[string]any
	err  error
}

func TestApproveConcurrentCallersSendOnce(t *testing.T) {
	e := newTestEnv(t, nil)
	key := "demo:m-1"
	corr := sendLead(t, e, "demo", "m-1", leadContact)
	d := waitDraft(t, e, key)
	draftID, _ := d["id"].(string)
	wantOutbox := leadContact + ":" + draftID

	const n = 20
	answers := make([]approvalResult, n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 20 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, e.url+"/api/v1/drafts/"+draftID+"/approve", nil)
			if err != nil {
				answers[i].err = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			<-start
			resp, err := client.Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			answers[i] = approvalResult{code: resp.StatusCode, err: err}
			if err == nil {
				answers[i].err = json.Unmarshal(raw, &answers[i].body)
			}
		}()
	}
	close(start)
	wg.Wait()

	statuses := map[string]int{}
	for i, a := range answers {
		if a.err != nil || a.code != http.StatusOK {
			t.Errorf("approval %d: got %d %v (err %v), want 200", i, a.code, a.body, a.err)
			continue
		}
		statuses[fmt.Sprint(a.body["status"])]++
		if a.body["outbox_id"] != wantOutbox || a.body["draft_id"] != draftID {
			t.Errorf("approval %d: outbox_id %v draft_id %v, want %q and %q", i, a.body["outbox_id"], a.body["draft_id"], wantOutbox, draftID)
		}
		if a.body["approved_by"] != "api-token" || a.body["approved_at"] == "" {
			t.Errorf("approval %d: approved_by %v at %v, want api-token and a time", i, a.body["approved_by"], a.body["approved_at"])
		}
	}
	if statuses["approved"] != 1 || statuses["already_approved"] != n-1 {
		t.Fatalf("statuses %v, want 1 approved and %d already_approved", statuses, n-1)
	}

	// One outbox row and one delivery job, whatever the number of clicks.
	// Counted in one read transaction: the delivery job moves the row from
	// status to status meanwhile, and reads one status at a time could
	// count it twice.
	rows := 0
	err := e.st.View(func(tx *store.Tx) error {
		for _, s := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxNeedsReconciliation, store.OutboxFailed} {
			if err := tx.EachOutbox(s, func(store.Outbox) error { rows++; return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("the store holds %d outbox rows, want 1", rows)
	}
	row := waitSent(t, e, wantOutbox)
	tl := apiGet(t, e, timelinePath(key))
	if ev, _ := tl["event"].(map[string]any); ev["correlation_id"] != corr {
		t.Fatalf("timeline of another event: %v", ev)
	}
	if kinds := jobKinds(tl); slices.Compare(kinds, []string{"deliver", "draft"}) != 0 && slices.Compare(kinds, []string{"draft", "deliver"}) != 0 {
		t.Errorf("jobs of the event: %v, want one draft and exactly one deliver", kinds)
	}
	msgs := sandboxFor(t, e, wantOutbox)
	if len(msgs) != 1 {
		t.Fatalf("sandbox holds %d messages for %s, want 1", len(msgs), wantOutbox)
	}
	if msgs[0]["repeats"] != float64(0) {
		t.Errorf("sandbox message repeated %v times, want 0", msgs[0]["repeats"])
	}
	if row["provider_id"] == nil || row["provider_id"] != msgs[0]["id"] || row["provider"] != "sandbox" {
		t.Errorf("row sent through %v as %v, want the sandbox's id %v", row["provider"], row["provider_id"], msgs[0]["id"])
	}
	if s := leadStatusOf(tl); s != string(leads.Replied) {
		t.Errorf("lead is %v, want replied", s)
	}
	if dr, _ := tl["draft"].(map[string]any); dr["status"] != "approved" || dr["outbox_id"] != wantOutbox {
		t.Errorf("draft %v, want approved with outbox %s", dr, wantOutbox)
	}
}

func TestApproveEditedText(t *testing.T) {
	e := newTestEnv(t, nil)
	sendLead(t, e, "demo", "m-edit", leadContact)
	d := waitDraft(t, e, "demo:m-edit")
	draftID := d["id"].(string)
	path := "/api/v1/drafts/" + draftID + "/approve"

	code, ans := apiPost(t, e, path, `{"text":"  custom  "}`)
	if code != http.StatusOK || ans["status"] != "approved" || ans["edited"] != true {
		t.Fatalf("edited approval: got %d %v, want 200 approved, edited", code, ans)
	}
	out, _ := ans["outbox"].(map[string]any)
	dec, _ := ans["decision"].(map[string]any)
	if out["text"] != "custom" || dec["edited"] != true || dec["text"] != "custom" || dec["by"] != "api-token" {
		t.Errorf("outbox %v decision %v, want text custom and decision edited by api-token", out, dec)
	}
	// A second approval with other text changes nothing.
	code, again := apiPost(t, e, path, `{"text":"something else"}`)
	if code != http.StatusOK || again["status"] != "already_approved" || again["outbox_id"] != ans["outbox_id"] {
		t.Fatalf("second approval: got %d %v, want 200 already_approved for %v", code, again, ans["outbox_id"])
	}
	id := ans["outbox_id"].(string)
	row := waitSent(t, e, id)
	if row["text"] != "custom" {
		t.Errorf("sent text %q, want custom", row["text"])
	}
	msgs := sandboxFor(t, e, id)
	if len(msgs) != 1 || msgs[0]["text"] != "custom" {
		t.Errorf("sandbox messages %v, want one with text custom", msgs)
	}
}

func TestApproveRejectConflicts(t *testing.T) {
	e := newTestEnv(t, nil)
	sendLead(t, e, "demo", "m-approve", leadContact)
	sendLead(t, e, "demo", "m-reject", "+15550009999")
	approved := waitDraft(t, e, "demo:m-approve")["id"].(string)
	rejected := waitDraft(t, e, "demo:m-reject")["id"].(string)

	if code, ans := apiPost(t, e, "/api/v1/drafts/"+approved+"/approve", ""); code != http.StatusOK || ans["status"] != "approved" {
		t.Fatalf("approve: got %d %v", code, ans)
	}
	code, ans := apiPost(t, e, "/api/v1/drafts/"+approved+"/reject", `{"reason":"too late"}`)
	if msg, _ := ans["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "approved by api-token") {
		t.Errorf("reject after approve: got %d %v, want 409 naming who approved", code, ans)
	}

	// The same caller rejecting twice: the second answer says the first stands.
	var firstAt any
	for i, want := range []string{"rejected", "already_rejected"} {
		code, ans := apiPost(t, e, "/api/v1/drafts/"+rejected+"/reject", fmt.Sprintf(`{"reason":"spam %d"}`, i+1))
		dec, _ := ans["decision"].(map[string]any)
		if code != http.StatusOK || ans["status"] != want || ans["draft_id"] != rejected || ans["rejected_by"] != "api-token" || dec["by"] != "api-token" || dec["reason"] != "spam 1" {
			t.Errorf("reject %d: got %d %v, want 200 %s by api-token for spam 1", i+1, code, ans, want)
		}
		if i == 0 {
			firstAt = ans["rejected_at"]
		} else if ans["rejected_at"] != firstAt || firstAt == "" {
			t.Errorf("reject %d: rejected_at %v, want the first rejection's %v", i+1, ans["rejected_at"], firstAt)
		}
	}
	code, ans = apiPost(t, e, "/api/v1/drafts/"+rejected+"/approve", "")
	if msg, _ := ans["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "rejected by api-token") {
		t.Errorf("approve after reject: got %d %v, want 409 naming who rejected", code, ans)
	}
	tl := apiGet(t, e, timelinePath("demo:m-reject"))
	if tl["outbox"] != nil || slices.Contains(jobKinds(tl), "deliver") {
		t.Errorf("a rejected draft has outbox %v and jobs %v, want none to deliver", tl["outbox"], jobKinds(tl))
	}
	if dr, _ := tl["draft"].(map[string]any); dr["status"] != "rejected" {
		t.Errorf("draft is %v, want rejected", dr["status"])
	}
	// Let the approved reply leave before the server stops.
	waitSent(t, e, leadContact+":"+approved)
}

func TestApproveBadInputs(t *testing.T) {
	e := newTestEnv(t, nil)
	sendLead(t, e, "demo", "m-bad", leadContact)
	draftID := waitDraft(t, e, "demo:m-bad")["id"].(string)
	approve := "/api/v1/drafts/" + draftID + "/approve"
	tests := []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"unknown draft", "/api/v1/drafts/dnope/approve", "", 404, "dnope"},
		{"reject unknown draft", "/api/v1/drafts/dnope/reject", "", 404, "no such draft"},
		{"empty text", approve, `{"text":""}`, 400, "text is empty"},
		{"blank text", approve, `{"text":"   "}`, 400, "text is empty"},
		{"text too long", approve, `{"text":"` + strings.Repeat("x", 4001) + `"}`, 400, "4000"},
		{"unknown field", approve, `{"txt":"x"}`, 400, "txt"},
		{"text not a string", approve, `{"text":5}`, 400, "text"},
		{"invalid JSON", approve, `{"text": }`, 400, "invalid JSON"},
		{"truncated JSON", approve, `{"text":"x"`, 400, "JSON"},
		{"two values", approve, `{"text":"x"} {}`, 400, "more than one"},
		{"reject with unknown field", "/api/v1/drafts/" + draftID + "/reject", `{"why":"x"}`, 400, "why"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ans := apiPost(t, e, tt.path, tt.body)
			msg, _ := ans["error"].(string)
			if code != tt.status || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %v, want %d with %q", code, ans, tt.status, tt.want)
			}
		})
	}
	tl := apiGet(t, e, timelinePath("demo:m-bad"))
	if dr, _ := tl["draft"].(map[string]any); dr["status"] != "pending_approval" || dr["decision"] != nil || tl["outbox"] != nil {
		t.Errorf("after refused requests the draft is %v with decision %v and outbox %v; want it untouched", dr["status"], dr["decision"], tl["outbox"])
	}

	lists := []struct {
		name, query, want string
	}{
		{"unknown status", "?status=bogus", "bogus"},
		{"cursor not base64", "?cursor=!!!", "cursor"},
		{"cursor of another status", "?status=approved&cursor=" + cursorFor(t, e), "cursor"},
		{"limit zero", "?limit=0", "limit"},
		{"limit not a number", "?limit=ten", "limit"},
	}
	for _, tt := range lists {
		t.Run("list "+tt.name, func(t *testing.T) {
			code, ans := e.do(t, http.MethodGet, "/api/v1/drafts"+tt.query, "", nil, tokenHeader())
			msg, _ := ans["error"].(string)
			if code != http.StatusBadRequest || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %v, want 400 with %q", code, ans, tt.want)
			}
		})
	}
}

// cursorFor returns a real cursor of the pending_approval list; it needs
// two pending drafts, so it adds one.
func cursorFor(t *testing.T, e *testEnv) string {
	t.Helper()
	sendLead(t, e, "demo", "m-cursor", "+15550004444")
	waitDraft(t, e, "demo:m-cursor")
	page := apiGet(t, e, "/api/v1/drafts?status=pending_approval&limit=1")
	c, _ := page["next_cursor"].(string)
	if c == "" {
		t.Fatalf("no next_cursor with two pending drafts and limit 1: %v", page)
	}
	return c
}

func TestDraftListPages(t *testing.T) {
	e := newTestEnv(t, nil)
	for i := range 5 {
		sendLead(t, e, "demo", fmt.Sprint("page-", i), fmt.Sprint("+1555000100", i))
	}
	var all []any
	testkit.Eventually(t, 10*time.Second, func() bool {
		all, _ = apiGet(t, e, "/api/v1/drafts?status=pending_approval&limit=100")["drafts"].([]any)
		return len(all) == 5
	}, "five pending drafts")
	var want []string
	for _, d := range all {
		want = append(want, d.(map[string]any)["id"].(string))
	}

	var got, created []string
	var sizes []int
	cursor := ""
	for page := 1; ; page++ {
		if page > 5 {
			t.Fatalf("more than 5 pages of 2 for 5 drafts")
		}
		q := "/api/v1/drafts?limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		ans := apiGet(t, e, q)
		drafts, _ := ans["drafts"].([]any)
		sizes = append(sizes, len(drafts))
		for _, d := range drafts {
			m := d.(map[string]any)
			got = append(got, m["id"].(string))
			created = append(created, m["created_at"].(string))
		}
		cursor, _ = ans["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Errorf("page sizes %v, want [2 2 1]", sizes)
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged ids %v, want the unpaged list %v", got, want)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Errorf("draft %s listed twice", id)
		}
		seen[id] = true
	}
	for i := 1; i < len(created); i++ {
		a, errA := time.Parse(time.RFC3339Nano, created[i-1])
		b, errB := time.Parse(time.RFC3339Nano, created[i])
		if errA != nil || errB != nil || b.Before(a) {
			t.Errorf("created_at %s then %s: want oldest first", created[i-1], created[i])
		}
	}
}

func TestAutoApproveChannelSendsWithoutAPI(t *testing.T) {
	cfg := config.Default()
	auto := cfg.Channels[0]
	auto.Name = "auto"
	auto.AutoApprove = true
	cfg.Channels = append(cfg.Channels, auto)
	e := newTestEnv(t, cfg)

	sendLead(t, e, "demo", "manual-1", "+15550002222")
	sendLead(t, e, "auto", "a-1", leadContact)
	ev, err := e.st.EventByKey("auto:a-1")
	if err != nil {
		t.Fatal(err)
	}
	id := leadContact + ":" + store.DraftID(ev.ID)
	row := waitSent(t, e, id)
	msgs := sandboxFor(t, e, id)
	if len(msgs) != 1 || msgs[0]["repeats"] != float64(0) || row["provider_id"] != msgs[0]["id"] {
		t.Errorf("sandbox messages %v, row sent as %v; want one, sent once, with that id", msgs, row["provider_id"])
	}
	tl := apiGet(t, e, timelinePath("auto:a-1"))
	dr, _ := tl["draft"].(map[string]any)
	dec, _ := dr["decision"].(map[string]any)
	if dr["status"] != "approved" || dec["by"] != "auto-approve" || row["approved_by"] != "auto-approve" {
		t.Errorf("draft %v decided by %v, row approved by %v; want approved by auto-approve", dr["status"], dec["by"], row["approved_by"])
	}
	if s := leadStatusOf(tl); s != string(leads.Replied) {
		t.Errorf("lead is %v, want replied", s)
	}
	// The manual channel still waits for a person.
	if d := waitDraft(t, e, "demo:manual-1"); d["status"] != "pending_approval" {
		t.Errorf("draft on the manual channel is %v, want pending_approval", d["status"])
	}
}

// TestApproveTooLongForTheProvider: a reply longer than the channel's
// twilio provider takes (1,600 characters) is refused at approval with
// the count and the limit, and nothing is sent; shortened, it is approved.
func TestApproveTooLongForTheProvider(t *testing.T) {
	sms := standin.New(t, "twilio")
	cfg := config.Default()
	p := config.Provider{Name: "sms", Kind: "twilio", Timeout: 10 * time.Second}
	p.APIBase, p.AccountSID, p.AuthToken, p.From = sms.URL, sms.AccountSID, sms.Token, "+15550001111"
	cfg.Providers = append(cfg.Providers, p)
	cfg.Channels[0].Provider = "sms"
	e := newTestEnv(t, cfg)
	sendLead(t, e, "demo", "m-long", leadContact)
	d := waitDraft(t, e, "demo:m-long")
	path := "/api/v1/drafts/" + d["id"].(string) + "/approve"

	long, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", 1700)})
	code, ans := apiPost(t, e, path, string(long))
	want := "is 1700 characters, and provider sms (twilio) takes at most 1600"
	if msg, _ := ans["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, want) {
		t.Fatalf("approving 1700 characters: got %d %v, want 400 saying %q", code, ans, want)
	}
	code, ans = apiPost(t, e, path, `{"text":"Yes, we ship to Lisbon."}`)
	if code != http.StatusOK || ans["status"] != "approved" {
		t.Fatalf("approving the shortened reply: got %d %v, want 200 approved", code, ans)
	}
	waitSent(t, e, ans["outbox_id"].(string))
	if acc := sms.Accepted(); len(acc) != 1 || acc[0].Text != "Yes, we ship to Lisbon." {
		t.Errorf("twilio accepted %+v, want the shortened reply once", acc)
	}
}
