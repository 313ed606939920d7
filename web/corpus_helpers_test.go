package web

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// hookCorpus posts the corpus body b to channel unsigned and returns the
// status and the answer.
func hookCorpus(t *testing.T, e *testEnv, channel string, b corpus.Body) (int, map[string]any) {
	t.Helper()
	return e.do(t, http.MethodPost, "/hooks/"+channel, b.ContentType, b.Raw, nil)
}

// pendingCorpus is pending for a corpus body: it posts b to channel and
// waits for the draft of its event.
func pendingCorpus(t *testing.T, e *testEnv, channel string, b corpus.Body) store.Draft {
	t.Helper()
	if code, ans := hookCorpus(t, e, channel, b); code != http.StatusAccepted {
		t.Fatalf("hook %s: %d %v", b.Name(), code, ans)
	}
	key := channel + ":" + b.Want.MessageID
	var d store.Draft
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		d, err = e.st.DraftByEvent(key)
		return err == nil
	}, "the draft of "+key)
	return d
}

// withoutMembers is the demo body b without its top-level members keys,
// written in b's own layout otherwise (the corpus always writes a demo
// body's from, conversation_id and name): a message that names no
// contact, conversation or name, as a sender that has none leaves the
// member out. Its
// Want says what the demo channel reads without them (the conversation
// defaults to the contact, else to the message id).
func withoutMembers(t *testing.T, b corpus.Body, keys ...string) corpus.Body {
	t.Helper()
	raw := string(b.Raw)
	for _, k := range keys {
		// The member (a string, escapes and all) and the separator before
		// it (a demo body's id comes first, so every other member has
		// one): the layout of the rest is untouched.
		re := regexp.MustCompile(`,\s*"` + regexp.QuoteMeta(k) + `"\s*:\s*"(?:[^"\\]|\\.)*"`)
		if n := len(re.FindAllStringIndex(raw, -1)); n != 1 {
			t.Fatalf("%s: %d top-level %q members, want 1", b.Name(), n, k)
		}
		raw = re.ReplaceAllString(raw, "")
		switch k {
		case "from":
			b.Want.Contact = ""
		case "conversation_id":
			b.Want.Conversation = ""
		case "name":
			b.Want.Name = ""
		case "text":
			b.Want.Text = ""
		}
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("%s without %v is not JSON: %v\n%s", b.Name(), keys, err, raw)
	}
	for _, k := range keys {
		if _, ok := doc[k]; ok {
			t.Fatalf("%s without %v still has %q", b.Name(), keys, k)
		}
	}
	if b.Want.Conversation == "" {
		b.Want.Conversation = b.Want.Contact
	}
	if b.Want.Conversation == "" {
		b.Want.Conversation = b.Want.MessageID
	}
	b.Raw = []byte(raw)
	return b
}

// wantStored checks the stored event of a demo-channel corpus body against
// its Want.
func wantStored(t *testing.T, e *testEnv, channel string, b corpus.Body) store.Event {
	t.Helper()
	ev, err := e.st.EventByKey(channel + ":" + b.Want.MessageID)
	if err != nil {
		t.Fatalf("%s: %v", b.Name(), err)
	}
	got := corpus.Want{MessageID: ev.MessageID, Conversation: ev.ConversationID, Contact: ev.Contact, Name: ev.Name, Text: ev.Text, Subject: ev.Subject}
	if got != b.Want {
		t.Errorf("%s: stored %+v\nwant %+v", b.Name(), got, b.Want)
	}
	return ev
}
