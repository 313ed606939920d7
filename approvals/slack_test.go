package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// slackVectors are testdata/slack/vectors.json: interaction requests
// signed and parsed by @slack/bolt (gen.js).
type slackVectors struct {
	Secret  string `json:"secret"`
	Draft   string `json:"draft"`
	Vectors []struct {
		Name    string            `json:"name"`
		Now     int64             `json:"now"`
		Valid   bool              `json:"valid"`
		Body    string            `json:"body"`
		Headers map[string]string `json:"headers"`
	} `json:"vectors"`
}

func readSlackVectors(t *testing.T) slackVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/slack/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v slackVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// request is the vector named name as the surface receives it.
func (sv slackVectors) request(t *testing.T, name string) *Request {
	t.Helper()
	for _, v := range sv.Vectors {
		if v.Name == name {
			h := http.Header{}
			for k, val := range v.Headers {
				h.Set(k, val)
			}
			return &Request{Header: h, Body: []byte(v.Body), Now: time.Unix(v.Now, 0).UTC()}
		}
	}
	t.Fatalf("no slack vector %q", name)
	return nil
}

// toStandin sends Slack's hooks.slack.com (a response_url) to the stand-in.
type toStandin struct{ api *url.URL }

func (s toStandin) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == "hooks.slack.com" {
		r = r.Clone(r.Context())
		u := *r.URL
		u.Scheme, u.Host, u.Path = s.api.Scheme, s.api.Host, "/response"+u.Path
		r.URL, r.Host = &u, s.api.Host
	}
	return http.DefaultTransport.RoundTrip(r)
}

// slackFixture is a fixture whose approvals have Slack configured against a
// stand-in of its Web API: dana is mapped by id, bea found by her email.
func slackFixture(t *testing.T, sv slackVectors) (*fixture, *standin.SurfaceAPI) {
	t.Helper()
	f := newFixture(t)
	api := standin.NewSurfaceAPI(t, "xoxb-test-token")
	api.Emails["U0BEA"] = "bea@beta.test"
	f.cfg.Approvals.Slack = &config.SlackSurface{
		BotToken: "xoxb-test-token", SigningSecret: sv.Secret, APIURL: api.URL,
		Channels: map[string]string{"acme": "C0ACME", "beta": "C0BETA"},
		Users:    map[string]string{"U0DANA": "dana"},
	}
	u, _ := url.Parse(api.URL)
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now, HTTP: &http.Client{Transport: toStandin{u}, Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Surfaces()) != 1 || a.Surfaces()[0].Name() != ViaSlack {
		t.Fatalf("surfaces = %v, want slack", a.Surfaces())
	}
	f.a = a
	t.Cleanup(func() {
		a.Wait()
		if bad := api.Malformed(); len(bad) > 0 {
			t.Errorf("calls the API refused as malformed: %q", bad)
		}
	})
	return f, api
}

// pendingID is pending with the event's id fixed (so the draft's is
// "d"+eventID, as the vectors name it).
func (f *fixture) pendingID(t *testing.T, eventID, channel, key, text string) store.Draft {
	t.Helper()
	ev := store.Event{
		ID: eventID, Key: channel + ":" + key, Channel: channel, MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "ada@example.com", Name: "Ada", Text: "Do you have the blue one in stock?", ReceivedAt: t0,
	}
	rec, err := leads.RecordEvent(context.Background(), f.st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = %v, %v", key, rec.Created, err)
	}
	d, _, err := review.New(f.st, f.cfg).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: channel, ConversationID: ev.ConversationID,
		Text: text, Drafter: "template", CreatedAt: t0,
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) draft(t *testing.T, id string) store.Draft {
	t.Helper()
	d, err := f.st.Draft(id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ephemerals are the texts sent to response_urls so far.
func ephemerals(f *fixture, api *standin.SurfaceAPI) []string {
	f.a.Wait()
	var out []string
	for _, c := range api.Calls("response_url") {
		if c.Body["response_type"] != "ephemeral" {
			continue
		}
		s, _ := c.Body["text"].(string)
		out = append(out, s)
	}
	return out
}

// TestSlackInteractions walks one draft through every Slack interaction as
// @slack/bolt signs and parses them: the card posted once, refusals for a
// stranger and a person of another client, Edit's modal and its
// submission approving the edit, a second click answered "already
// approved", a replay refused, Undo, and Reject — and the card following
// each decision through chat.update.
func TestSlackInteractions(t *testing.T) {
	ctx := context.Background()
	sv := readSlackVectors(t)
	f, api := slackFixture(t, sv)
	s, _ := f.a.Inbound(ViaSlack)
	d := f.pendingID(t, strings.TrimPrefix(sv.Draft, "d"), "web", "m1", "Hi Ada, yes: the blue one is in stock.")
	if d.ID != sv.Draft {
		t.Fatalf("draft id = %s, want the vectors' %s", d.ID, sv.Draft)
	}
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	posts := api.Calls("chat.postMessage")
	if len(posts) != 1 || posts[0].Body["channel"] != "C0ACME" {
		t.Fatalf("chat.postMessage calls = %+v, want one to C0ACME", posts)
	}
	checkSlackMessage(t, posts[0].Body)
	if got := slackButtons(posts[0].Body); strings.Join(got, ",") != "handoff.approve,handoff.edit,handoff.reject" {
		t.Errorf("waiting card's buttons = %v", got)
	}

	receive := func(name string, wantStatus int) Answer {
		t.Helper()
		ans := s.Receive(ctx, sv.request(t, name))
		if ans.Status != wantStatus {
			t.Fatalf("%s: status %d (%s), want %d", name, ans.Status, ans.Body, wantStatus)
		}
		return ans
	}
	receive("approve by a stranger", http.StatusOK)
	receive("approve by bea of another client", http.StatusOK)
	// The refusals are posted after each request's own answer
	// (Approvals.Later), in any order: each once.
	got := ephemerals(f, api)
	if len(got) != 2 || !oneEach(got, "not linked to a handoff user", "(bea) are not an approver of this client") {
		t.Fatalf("ephemeral refusals = %q", got)
	}
	if st := f.draft(t, d.ID).Status; st != store.DraftPending {
		t.Fatalf("after the refusals the draft is %s, want pending", st)
	}

	receive("edit by dana", http.StatusOK)
	opens := api.Calls("views.open")
	if len(opens) != 1 {
		t.Fatalf("views.open calls = %d, want 1", len(opens))
	}
	view, _ := opens[0].Body["view"].(map[string]any)
	checkSlackModal(t, view)
	if opens[0].Body["trigger_id"] == "" || view["private_metadata"] != d.ID {
		t.Errorf("views.open = %+v", opens[0].Body)
	}
	ans := receive("edited reply submitted by dana", http.StatusOK)
	if string(ans.Body) != `{"response_action":"clear"}` {
		t.Errorf("view_submission answer = %s", ans.Body)
	}
	got1 := f.draft(t, d.ID)
	if dec := got1.Decision; got1.Status != store.DraftApproved || dec == nil || dec.By != "dana" || dec.Via != ViaSlack || !dec.Edited ||
		dec.Text != "Hi Ada, the blue one is in stock: shall I hold it for you?" || dec.From != "slack T0001/U0DANA" {
		t.Fatalf("after the edit the draft = %+v, decision %+v", got1, got1.Decision)
	}

	receive("approve by dana", http.StatusOK)
	if got := ephemerals(f, api); len(got) != 3 || !strings.Contains(got[2], "already approved by dana") {
		t.Fatalf("a second approval's answer = %q, want already approved by dana", got)
	}
	receive("approve by dana", http.StatusUnauthorized) // the same signed request again

	f.runJobs(t)
	updates := api.Calls("chat.update")
	if len(updates) != 1 || slackButtons(updates[0].Body)[0] != slackUndo || !strings.Contains(slackText(updates[0].Body), "Approved with an edit by dana via slack") {
		t.Fatalf("chat.update after the approval = %+v", updates)
	}
	checkSlackMessage(t, updates[0].Body)

	receive("undo by dana", http.StatusOK)
	if st := f.draft(t, d.ID).Status; st != store.DraftPending {
		t.Fatalf("after undo the draft is %s, want pending", st)
	}
	f.runJobs(t)
	receive("reject by dana", http.StatusOK)
	f.runJobs(t)
	updates = api.Calls("chat.update")
	if len(updates) != 3 {
		t.Fatalf("chat.update calls = %d, want 3 (held, waiting again, rejected)", len(updates))
	}
	if b := slackButtons(updates[1].Body); len(b) != 3 {
		t.Errorf("the undone card's buttons = %v, want approve, edit, reject", b)
	}
	if b := slackButtons(updates[2].Body); len(b) != 0 || !strings.Contains(slackText(updates[2].Body), "Rejected by dana via slack") {
		t.Errorf("the rejected card = %v, %q", b, slackText(updates[2].Body))
	}
	for _, name := range []string{"signed with another secret", "signed six minutes ago"} {
		receive(name, http.StatusUnauthorized)
	}
	if n := len(api.Calls("chat.postMessage")); n != 1 {
		t.Errorf("chat.postMessage calls = %d, want 1: one message per draft", n)
	}
	// The card is final: further sweeps post and change nothing.
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.runJobs(t); n != 0 {
		t.Errorf("jobs after the card is final = %d", n)
	}
}

// TestSlackAndDashboardAtOnce: dana's Approve in Slack and root's on the
// dashboard at the same moment: one approval, one outbox row and delivery
// job, and the loser in Slack told who approved.
func TestSlackAndDashboardAtOnce(t *testing.T) {
	ctx := context.Background()
	sv := readSlackVectors(t)
	for i := range 10 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f, api := slackFixture(t, sv)
			s, _ := f.a.Inbound(ViaSlack)
			d := f.pendingID(t, strings.TrimPrefix(sv.Draft, "d"), "web", "m1", "Hi Ada")
			var dash review.Approved
			var ans Answer
			var dashErr error
			testkit.Together(2, func(i int) {
				if i == 0 {
					ans = s.Receive(ctx, sv.request(t, "approve by dana"))
					return
				}
				dash, dashErr = review.New(f.st, f.cfg).Approve(ctx, d.ID, store.Decision{By: "root", At: f.clock.Now()})
			})
			if dashErr != nil || ans.Status != http.StatusOK {
				t.Fatalf("dashboard: %v; slack: %d %s", dashErr, ans.Status, ans.Body)
			}
			final := f.draft(t, d.ID)
			says := ephemerals(f, api)
			switch final.Decision.By {
			case "root":
				if !dash.Created || len(says) != 1 || !strings.Contains(says[0], "already approved by root") {
					t.Fatalf("root won: dashboard created %v; slack said %q", dash.Created, says)
				}
			case "dana":
				if dash.Created || dash.Draft.Decision.By != "dana" || len(says) != 0 {
					t.Fatalf("dana won: dashboard created %v (by %s); slack said %q", dash.Created, dash.Draft.Decision.By, says)
				}
			default:
				t.Fatalf("approved by %q", final.Decision.By)
			}
			if dash.Outbox.ID != final.OutboxID {
				t.Errorf("the dashboard's outbox row %s, the draft's %s: want one", dash.Outbox.ID, final.OutboxID)
			}
			var deliveries []store.Job
			if err := f.st.View(func(tx *store.Tx) (err error) { deliveries, err = tx.JobsByCorrelation(d.CorrelationID); return err }); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, j := range deliveries {
				if j.Kind == store.KindDeliver {
					n++
				}
			}
			if n != 1 {
				t.Errorf("delivery jobs = %d, want 1", n)
			}
		})
	}
}

// TestSlackBlocksWithinLimits: a card of a long reply and many long
// messages, in every state, and its Edit modal, keep Block Kit's
// documented limits.
func TestSlackBlocksWithinLimits(t *testing.T) {
	long := strings.Repeat("The blue one <b>is</b> & in stock. ", 200)
	v := View{
		Draft: store.Draft{ID: "d01JDRAFTVECTQR0000000000AA-v12"}, Client: "acme", ClientName: strings.Repeat("Acme ", 40), Channel: "web",
		Customer: strings.Repeat("Ada Lovelace ", 30), Text: long[:3000], Status: "Approved by dana via slack at 06:10 UTC",
		UndoUntil: t0.Add(10 * time.Second),
	}
	for range 12 {
		v.Messages = append(v.Messages, long)
	}
	for _, st := range []State{Waiting, Held, Approved, Rejected, Superseded} {
		v.State = st
		blocks := slackBlocks(v)
		raw, _ := json.Marshal(slackMessage{Channel: "C0ACME", Text: slackFallback(v), Blocks: blocks})
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		t.Run(string(st), func(t *testing.T) { checkSlackMessage(t, body) })
		if strings.Contains(slackText(body), "<b>") {
			t.Errorf("%s: mrkdwn not escaped", st)
		}
	}
	raw, _ := json.Marshal(slackEditView(v))
	var view map[string]any
	_ = json.Unmarshal(raw, &view)
	checkSlackModal(t, view)
}

// checkSlackMessage checks a chat.postMessage/chat.update body against
// Block Kit's documented limits (docs.slack.dev/reference/block-kit): at
// most 50 blocks, known block types, section and context text ≤3000,
// header plain_text ≤150, actions ≤25 elements, buttons' text ≤75 and
// value ≤2000, action_id and block_id ≤255 and unique.
func checkSlackMessage(t *testing.T, body map[string]any) {
	t.Helper()
	if s, _ := body["text"].(string); s == "" || utf8.RuneCountInString(s) > 40000 {
		t.Errorf("message text (the notification) is %d characters", utf8.RuneCountInString(s))
	}
	blocks, _ := body["blocks"].([]any)
	checkSlackBlocks(t, blocks, 50)
}

func checkSlackModal(t *testing.T, view map[string]any) {
	t.Helper()
	if view["type"] != "modal" {
		t.Errorf("view type %v, want modal", view["type"])
	}
	for _, k := range []string{"title", "submit", "close"} {
		o, _ := view[k].(map[string]any)
		checkText(t, o, "plain_text", 24, "modal "+k)
	}
	if s, _ := view["callback_id"].(string); len(s) > 255 {
		t.Errorf("callback_id %d bytes", len(s))
	}
	if s, _ := view["private_metadata"].(string); len(s) > 3000 {
		t.Errorf("private_metadata %d bytes", len(s))
	}
	blocks, _ := view["blocks"].([]any)
	checkSlackBlocks(t, blocks, 100)
}

func checkText(t *testing.T, o map[string]any, kind string, max int, what string) {
	t.Helper()
	if o == nil {
		t.Errorf("%s: no text object", what)
		return
	}
	typ, _ := o["type"].(string)
	text, _ := o["text"].(string)
	if kind != "" && typ != kind || typ != "plain_text" && typ != "mrkdwn" {
		t.Errorf("%s: text type %q, want %s", what, typ, kind)
	}
	if n := utf8.RuneCountInString(text); n == 0 || n > max {
		t.Errorf("%s: text is %d characters, want 1 to %d", what, n, max)
	}
}

func checkSlackBlocks(t *testing.T, blocks []any, maxBlocks int) {
	t.Helper()
	if len(blocks) == 0 || len(blocks) > maxBlocks {
		t.Errorf("%d blocks, want 1 to %d", len(blocks), maxBlocks)
	}
	actionIDs, blockIDs := map[string]bool{}, map[string]bool{}
	for i, raw := range blocks {
		b, _ := raw.(map[string]any)
		what := fmt.Sprintf("block %d (%v)", i, b["type"])
		if id, ok := b["block_id"].(string); ok {
			if len(id) > 255 || blockIDs[id] {
				t.Errorf("%s: block_id %q too long or repeated", what, id)
			}
			blockIDs[id] = true
		}
		obj := func(k string) map[string]any { o, _ := b[k].(map[string]any); return o }
		switch b["type"] {
		case "header":
			checkText(t, obj("text"), "plain_text", 150, what)
		case "section":
			checkText(t, obj("text"), "", 3000, what)
		case "context":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				t.Errorf("%s: %d elements, want 1 to 10", what, len(els))
			}
			for _, e := range els {
				o, _ := e.(map[string]any)
				checkText(t, o, "", 3000, what)
			}
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				t.Errorf("%s: %d elements, want 1 to 25", what, len(els))
			}
			for _, e := range els {
				o, _ := e.(map[string]any)
				if o["type"] != "button" {
					t.Errorf("%s: element type %v", what, o["type"])
				}
				tx, _ := o["text"].(map[string]any)
				checkText(t, tx, "plain_text", 75, what+" button")
				id, _ := o["action_id"].(string)
				if id == "" || len(id) > 255 || actionIDs[id] {
					t.Errorf("%s: action_id %q empty, too long or repeated", what, id)
				}
				actionIDs[id] = true
				if v, _ := o["value"].(string); len(v) > 2000 {
					t.Errorf("%s: value %d bytes", what, len(v))
				}
				if s, ok := o["style"].(string); ok && s != "primary" && s != "danger" {
					t.Errorf("%s: style %q", what, s)
				}
				if c, ok := o["confirm"].(map[string]any); ok {
					for k, max := range map[string]int{"title": 100, "text": 300, "confirm": 30, "deny": 30} {
						o, _ := c[k].(map[string]any)
						checkText(t, o, "plain_text", max, what+" confirm "+k)
					}
				}
			}
		case "input":
			checkText(t, obj("label"), "plain_text", 2000, what+" label")
			el := obj("element")
			if el["type"] != "plain_text_input" {
				t.Errorf("%s: element %v", what, el["type"])
			}
			maxLen, _ := el["max_length"].(float64)
			if iv, _ := el["initial_value"].(string); maxLen > 3000 || utf8.RuneCountInString(iv) > int(maxLen) {
				t.Errorf("%s: initial_value %d characters, max_length %v", what, utf8.RuneCountInString(iv), maxLen)
			}
			if id, _ := el["action_id"].(string); id == "" || len(id) > 255 {
				t.Errorf("%s: action_id %q", what, id)
			}
		case "divider":
		default:
			t.Errorf("%s: not a block type handoff means to send", what)
		}
	}
}

// slackButtons are the action_ids of a message body's buttons.
func slackButtons(body map[string]any) []string {
	var out []string
	blocks, _ := body["blocks"].([]any)
	for _, raw := range blocks {
		b, _ := raw.(map[string]any)
		if b["type"] != "actions" {
			continue
		}
		els, _ := b["elements"].([]any)
		for _, e := range els {
			o, _ := e.(map[string]any)
			id, _ := o["action_id"].(string)
			out = append(out, id)
		}
	}
	return out
}

// slackText is every text of a message body's blocks, joined.
func slackText(body map[string]any) string {
	raw, _ := json.Marshal(body["blocks"])
	return string(raw)
}

// TestSlackChannelPerClient: each client's drafts go to its own channel,
// and a client the config does not map is not announced on Slack.
func TestSlackChannelPerClient(t *testing.T) {
	ctx := context.Background()
	sv := readSlackVectors(t)
	f, api := slackFixture(t, sv)
	f.pending(t, "web", "m1", "Hi Ada")
	f.pending(t, "shop", "m2", "Hi Bo")
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	got := map[any]int{}
	for _, c := range api.Calls("chat.postMessage") {
		got[c.Body["channel"]]++
	}
	if len(got) != 2 || got["C0ACME"] != 1 || got["C0BETA"] != 1 {
		t.Fatalf("cards by channel = %v, want one in C0ACME and one in C0BETA", got)
	}

	g, api2 := slackFixture(t, sv)
	delete(g.cfg.Approvals.Slack.Channels, "beta")
	g.pending(t, "shop", "m3", "Hi Bo")
	if err := g.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	g.runJobs(t)
	if n := len(api2.Calls("chat.postMessage")); n != 0 {
		t.Errorf("a client without a Slack channel got %d cards", n)
	}
}
