package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

const corpusBase = "https://handoff.example.com"

// corpusConfig is one channel per preset (corpus.ChannelsYAML) and the
// demo channel.
func corpusConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("base_url: "+corpusBase+"\nchannels:\n"+corpus.ChannelsYAML()+
		"  - {name: demo, fields: {message_id: /id, conversation_id: /conversation_id}}\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestCorpusThroughEveryPreset sends every body of the corpus (every
// preset × layout × text, and the verbatim examples) through the whole
// server, signed, and reads each event back from the store and from the
// API: the text, name, contact, conversation and subject its preset names,
// exactly, and the body exactly as received (JSON byte for byte, a form
// as its text, a multipart body as its fields).
func TestCorpusThroughEveryPreset(t *testing.T) {
	e, _ := newEnv(t, corpusConfig(t), envOptions{now: func() time.Time { return corpus.Epoch }})
	for _, p := range corpus.Presets() {
		t.Run(p, func(t *testing.T) {
			for _, b := range corpus.Bodies(p) {
				t.Run(b.Layout+"/"+b.Text, func(t *testing.T) { sendCorpusBody(t, e, b) })
			}
		})
	}
}

func sendCorpusBody(t *testing.T, e *testEnv, b corpus.Body) {
	ch := corpus.Channel(b.Preset)
	h, raw := b.Signed(corpusBase+"/hooks/"+ch, corpus.Epoch)
	req, err := http.NewRequest(http.MethodPost, e.url+"/hooks/"+ch, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code := resp.StatusCode
	key := ch + ":" + b.Want.MessageID
	if b.Preset == "twilio" { // TwiML
		if !bytes.Contains(answer, []byte("<Response></Response>")) {
			t.Fatalf("answer %d %s, want an empty TwiML <Response>", code, answer)
		}
	} else {
		// One message: {status, event_key}, or a batch answer listing it.
		var one hookAnswer
		var batch batchAnswer
		_ = json.Unmarshal(answer, &one)
		_ = json.Unmarshal(answer, &batch)
		if len(batch.Events) == 1 {
			one = batch.Events[0]
		}
		if one.Status != "accepted" || one.EventKey != key {
			t.Fatalf("answer %d %s, want accepted %s", code, answer, key)
		}
	}
	if want := map[string]int{"twilio": 200, "whatsapp": 200, "messenger": 200, "instagram": 200, "slack": 200,
		"sendgrid": 200, "mailgun": 200, "postmark": 200}[b.Preset]; (want == 0 && code != http.StatusAccepted) || (want != 0 && code != want) {
		t.Fatalf("POST /hooks/%s answered %d %s, want %d (202 for a JSON-answer channel)", ch, code, answer, max(want, 202))
	}

	ev, err := e.st.EventByKey(key)
	if err != nil {
		t.Fatalf("the event %s cannot be read back from the store: %v", key, err)
	}
	got := corpus.Want{MessageID: ev.MessageID, Conversation: ev.ConversationID, Contact: ev.Contact, Name: ev.Name, Text: ev.Text, Subject: ev.Subject}
	if r := ev.ReplyTo; r != nil {
		got.ReplyTo = corpus.ReplyTo{Chat: r.Chat, MessageID: r.MessageID, Thread: r.Thread}
	}
	if got != b.Want {
		t.Errorf("stored %+v\nwant   %+v", got, b.Want)
	}
	checkStoredBody(t, b, raw, ev)

	// The API renders the same event.
	req, _ = http.NewRequest(http.MethodGet, e.url+timelinePath(key), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	var tl struct {
		Event store.Event `json:"event"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(page, &tl) != nil {
		t.Fatalf("GET %s: %d %.300s", timelinePath(key), resp.StatusCode, page)
	}
	a := tl.Event
	got = corpus.Want{MessageID: a.MessageID, Conversation: a.ConversationID, Contact: a.Contact, Name: a.Name, Text: a.Text, Subject: a.Subject}
	if r := a.ReplyTo; r != nil {
		got.ReplyTo = corpus.ReplyTo{Chat: r.Chat, MessageID: r.MessageID, Thread: r.Thread}
	}
	if got != b.Want {
		t.Errorf("the API shows %+v\nwant          %+v", got, b.Want)
	}
	switch {
	case b.IsJSON():
		if !sameJSON(a.Body, raw) {
			t.Errorf("the API's body is another document than the one sent:\n%s\nsent:\n%s", a.Body, raw)
		}
	case !b.IsMultipart():
		if a.BodyText != string(raw) {
			t.Errorf("the API's body_text = %q, want the form as sent %q", a.BodyText, raw)
		}
	}
}

// checkStoredBody: a JSON body is kept byte for byte, a form as its text, a
// multipart body as its fields (its files by name, type and size only).
func checkStoredBody(t *testing.T, b corpus.Body, raw []byte, ev store.Event) {
	t.Helper()
	switch {
	case b.IsMultipart():
		var kept struct {
			Fields map[string][]string `json:"fields"`
		}
		if err := json.Unmarshal(ev.Body, &kept); err != nil {
			t.Fatalf("the stored multipart body is not its fields document: %v: %.300s", err, ev.Body)
		}
		if !reflect.DeepEqual(kept.Fields, map[string][]string(b.Fields)) {
			t.Errorf("stored fields %q\nwant          %q", kept.Fields, b.Fields)
		}
	case b.IsJSON():
		if !bytes.Equal(ev.Body, raw) {
			t.Errorf("the stored body is not the body received:\nstored %q\nsent   %q", ev.Body, raw)
		}
	default:
		if ev.BodyText != string(raw) || ev.Body != nil {
			t.Errorf("the stored form is %q (body %q), want %q", ev.BodyText, ev.Body, raw)
		}
	}
}

// sameJSON says a and b decode to the same document.
func sameJSON(a, b []byte) bool {
	dec := func(raw []byte) (any, bool) {
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		err := d.Decode(&v)
		return v, err == nil
	}
	va, ok1 := dec(a)
	vb, ok2 := dec(b)
	return ok1 && ok2 && reflect.DeepEqual(va, vb)
}
