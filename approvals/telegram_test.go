package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/standin"
)

const tgSecret = "tg-webhook-secret_0123456789"

// telegramFixture is a fixture whose approvals have Telegram configured
// against a stand-in of the Bot API: user 42 is dana, 43 is bea.
func telegramFixture(t *testing.T) (*fixture, *standin.SurfaceAPI, Inbound) {
	t.Helper()
	f := newFixture(t)
	api := standin.NewSurfaceAPI(t, "123456:ABC-test")
	f.cfg.Approvals.Telegram = &config.TelegramSurface{
		BotToken: "123456:ABC-test", WebhookSecret: tgSecret, APIURL: api.URL,
		Chats: map[string]string{"acme": "-1001234567890", "beta": "-1009876543210"},
		Users: map[string]string{"42": "dana", "43": "bea"},
	}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	in, ok := a.Inbound(ViaTelegram)
	if !ok {
		t.Fatal("telegram is not an inbound surface")
	}
	t.Cleanup(func() {
		a.Wait()
		if bad := api.Malformed(); len(bad) > 0 {
			t.Errorf("calls the Bot API refused as malformed: %q", bad)
		}
	})
	return f, api, in
}

// tgUser is a Telegram User object.
func tgUser(id int64, name string) map[string]any {
	return map[string]any{"id": id, "is_bot": false, "first_name": name, "username": name, "language_code": "en"}
}

// cardMessage is the card as Telegram gives it back inside an update: the
// bot's message, with the keyboard it was sent with.
func cardMessage(sent standin.SurfaceCall, messageID int) map[string]any {
	return map[string]any{
		"message_id": messageID, "date": 1767225600,
		"from": map[string]any{"id": 123456, "is_bot": true, "first_name": "handoff", "username": "handoff_bot"},
		"chat": map[string]any{"id": -1001234567890, "title": "Acme approvers", "type": "supergroup"},
		"text": sent.Body["text"], "reply_markup": sent.Body["reply_markup"],
	}
}

// callbackUpdate is an Update with a callback_query, as the Bot API documents it.
func callbackUpdate(updateID int64, from map[string]any, card map[string]any, data string) []byte {
	raw, _ := json.Marshal(map[string]any{"update_id": updateID, "callback_query": map[string]any{
		"id": "cq" + string(rune('a'+updateID%26)), "from": from, "message": card, "chat_instance": "-8123456789", "data": data,
	}})
	return raw
}

// replyUpdate is an Update with a message replying to card.
func replyUpdate(updateID int64, from map[string]any, card map[string]any, text string) []byte {
	raw, _ := json.Marshal(map[string]any{"update_id": updateID, "message": map[string]any{
		"message_id": 900 + updateID, "date": 1767225700, "from": from,
		"chat": map[string]any{"id": -1001234567890, "title": "Acme approvers", "type": "supergroup"},
		"text": text, "reply_to_message": card,
	}})
	return raw
}

func tgRequest(body []byte, secret string) *Request {
	h := http.Header{"Content-Type": {"application/json"}}
	if secret != "" {
		h.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	return &Request{Header: h, Body: body, Now: t0}
}

// buttonData is the callback_data of the button whose text has prefix.
func buttonData(t *testing.T, call standin.SurfaceCall, prefix string) string {
	t.Helper()
	rm, _ := call.Body["reply_markup"].(map[string]any)
	rows, _ := rm["inline_keyboard"].([]any)
	for _, row := range rows {
		for _, b := range row.([]any) {
			bm := b.(map[string]any)
			if strings.HasPrefix(bm["text"].(string), prefix) {
				return bm["callback_data"].(string)
			}
		}
	}
	t.Fatalf("no button %q in %+v", prefix, call.Body["reply_markup"])
	return ""
}

func callbackAnswers(f *fixture, api *standin.SurfaceAPI) []string {
	f.a.Wait()
	var out []string
	for _, c := range api.Calls("answerCallbackQuery") {
		s, _ := c.Body["text"].(string)
		out = append(out, s)
	}
	return out
}

// TestTelegramCallbacksAndReplies: the card is sent once with its
// keyboard; the webhook's secret is checked; a stranger and a person of
// another client are refused; Approve, Undo and an edit by reply decide
// through review, each answered and followed by editMessageText; an
// update sent twice is taken once; a forged button is refused.
func TestTelegramCallbacksAndReplies(t *testing.T) {
	ctx := context.Background()
	f, api, in := telegramFixture(t)
	d := f.pending(t, "web", "m1", "Hi Ada, yes: the blue one is in stock.")
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	sends := api.Calls("sendMessage")
	if len(sends) != 1 || sends[0].Body["chat_id"] != "-1001234567890" || !strings.Contains(sends[0].Body["text"].(string), "Hi Ada, yes") {
		t.Fatalf("sendMessage calls = %+v, want the card in acme's chat", sends)
	}
	card := cardMessage(sends[0], 101)
	approve := buttonData(t, sends[0], "✅")

	for _, secret := range []string{"", "wrong", tgSecret + "x"} {
		if ans := in.Receive(ctx, tgRequest(callbackUpdate(1, tgUser(42, "dana"), card, approve), secret)); ans.Status != http.StatusUnauthorized {
			t.Errorf("secret %q: status %d, want 401", secret, ans.Status)
		}
	}
	receive := func(body []byte) {
		t.Helper()
		if ans := in.Receive(ctx, tgRequest(body, tgSecret)); ans.Status != http.StatusOK {
			t.Fatalf("status %d (%s)", ans.Status, ans.Body)
		}
	}
	receive(callbackUpdate(2, tgUser(99, "eve"), card, approve))
	receive(callbackUpdate(3, tgUser(43, "bea"), card, approve))
	receive(callbackUpdate(4, tgUser(42, "dana"), card, "a:"+d.ID+".AAAAAAAAAAAA"))
	// Each answer is sent after its request's own answer (Approvals.Later),
	// so they arrive in any order: each refusal once.
	got := callbackAnswers(f, api)
	if len(got) != 3 || !oneEach(got, "not linked", "not an approver of this client", "not one of handoff's") {
		t.Fatalf("answers = %q; want one each saying not linked, not an approver of this client and not one of handoff's", got)
	}
	if st := f.draft(t, d.ID).Status; st != store.DraftPending {
		t.Fatalf("after the refusals the draft is %s", st)
	}

	receive(callbackUpdate(5, tgUser(42, "dana"), card, approve))
	receive(callbackUpdate(5, tgUser(42, "dana"), card, approve)) // sent again by Telegram
	got = callbackAnswers(f, api)
	if len(got) != 4 || !strings.HasPrefix(got[3], "Approved by dana") {
		t.Fatalf("answers = %q, want one more: approved by dana", got)
	}
	if dec := f.draft(t, d.ID).Decision; dec == nil || dec.Via != ViaTelegram || dec.From != "telegram 42" {
		t.Fatalf("decision = %+v", dec)
	}
	f.runJobs(t)
	edits := api.Calls("editMessageText")
	if len(edits) != 1 || edits[0].Body["message_id"] != float64(101) || !strings.Contains(edits[0].Body["text"].(string), "Approved by dana via telegram") {
		t.Fatalf("editMessageText = %+v", edits)
	}
	undo := buttonData(t, edits[0], "↩️")
	receive(callbackUpdate(6, tgUser(42, "dana"), card, undo))
	if st := f.draft(t, d.ID).Status; st != store.DraftPending {
		t.Fatalf("after undo the draft is %s", st)
	}
	// Telegram sends the Approve update again, minutes later: it was taken
	// once, so the undone draft stays undone.
	again := tgRequest(callbackUpdate(5, tgUser(42, "dana"), card, approve), tgSecret)
	again.Now = t0.Add(5 * time.Minute)
	if ans := in.Receive(ctx, again); ans.Status != http.StatusOK {
		t.Fatalf("resent update: status %d (%s)", ans.Status, ans.Body)
	}
	if st := f.draft(t, d.ID).Status; st != store.DraftPending {
		t.Fatalf("the Approve update sent again after undo moved the draft to %s", st)
	}
	f.runJobs(t)
	edits = api.Calls("editMessageText")
	if len(edits) != 2 || buttonData(t, edits[1], "✅") == "" {
		t.Fatalf("editMessageText after undo = %+v", edits)
	}
	// Edit: a reply to the card is the reply, approved by its author.
	receive(replyUpdate(7, tgUser(43, "bea"), cardMessage(edits[1], 101), "Not mine to send"))
	receive(replyUpdate(8, tgUser(42, "dana"), cardMessage(edits[1], 101), "Hi Ada, it is in stock: shall I hold it?"))
	dec := f.draft(t, d.ID).Decision
	if dec == nil || dec.By != "dana" || !dec.Edited || dec.Text != "Hi Ada, it is in stock: shall I hold it?" || dec.Via != ViaTelegram {
		t.Fatalf("after the reply the decision = %+v", dec)
	}
	f.a.Wait()
	says := api.Calls("sendMessage")[1:]
	if len(says) != 1 || !strings.Contains(says[0].Body["text"].(string), "not an approver of this client") {
		t.Fatalf("replies to the people = %+v, want bea refused", says)
	}
	f.runJobs(t)
	f.clock.Advance(11 * time.Second)
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	edits = api.Calls("editMessageText")
	last := edits[len(edits)-1]
	if last.Body["reply_markup"] != nil || !strings.Contains(last.Body["text"].(string), "Approved with an edit by dana via telegram") {
		t.Errorf("the final card = %+v, want no keyboard, approved with an edit", last.Body)
	}
	cards := 0
	for _, c := range api.Calls("sendMessage") {
		if c.Body["reply_markup"] != nil {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("cards sent = %d, want 1 per draft", cards)
	}
}

// TestTelegramCardText: a card of a long reply and many long messages is
// within the 4096 characters, the reply whole.
func TestTelegramCardText(t *testing.T) {
	long := strings.Repeat("x", 4000)
	v := View{Draft: store.Draft{ID: "d1"}, Customer: "Ada", ClientName: "Acme", Channel: "web", Text: long, State: Waiting}
	for range 5 {
		v.Messages = append(v.Messages, strings.Repeat("m", 2000))
	}
	text := telegramCardText(v)
	if n := len([]rune(text)); n > telegramText {
		t.Errorf("card text is %d characters", n)
	}
	if !strings.Contains(text, long) {
		t.Error("the reply was shortened to make room for the messages")
	}
}

// TestRateLimitsWait: a surface's rate limit makes the announce job wait
// as long as the API says (jobs.RetryLater), for Slack and Telegram, and
// nothing is recorded as posted.
func TestRateLimitsWait(t *testing.T) {
	ctx := context.Background()
	tf, tapi, _ := telegramFixture(t)
	sv := readSlackVectors(t)
	sf, sapi := slackFixture(t, sv)
	tapi.Limit["sendMessage"] = 7
	sapi.Limit["chat.postMessage"] = 3
	for _, c := range []struct {
		f       *fixture
		surface string
		want    time.Duration
	}{{tf, ViaTelegram, 7 * time.Second}, {sf, ViaSlack, 3 * time.Second}} {
		d := c.f.pending(t, "web", "m1", "Hi Ada")
		if err := c.f.a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		err := c.f.a.Announce(ctx, c.surface, d.ID)
		var later *jobs.RetryLater
		if !errors.As(err, &later) || later.After != c.want {
			t.Errorf("%s: Announce = %v, want a retry after %s", c.surface, err, c.want)
		}
		var card store.Card
		if err := c.f.st.View(func(tx *store.Tx) (err error) { card, err = tx.Card(c.surface, d.ID); return err }); err != nil || card.Ref != "" {
			t.Errorf("%s: card = %+v, %v; want one still being posted", c.surface, card, err)
		}
	}
}

// oneEach says whether every want is in exactly one of got.
func oneEach(got []string, want ...string) bool {
	for _, w := range want {
		n := 0
		for _, g := range got {
			if strings.Contains(g, w) {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	return true
}
