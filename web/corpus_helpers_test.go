package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/handoff/handoff/store"
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
	return turnDraft(t, e, channel+":"+b.Want.MessageID)
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

// withMembers is the demo body b with the string members named in kv
// (key, value, key, value ...) set to the values, each written as b's
// layout writes a string (Python's and PHP's \u escapes, Go's HTML
// escapes, or raw UTF-8), the layout of the rest untouched: a corpus
// message carrying the words or the name a test is about.
func withMembers(t *testing.T, b corpus.Body, kv ...string) corpus.Body {
	t.Helper()
	if len(kv)%2 != 0 {
		t.Fatalf("withMembers: %d arguments, want key and value pairs", len(kv))
	}
	raw := string(b.Raw)
	for i := 0; i < len(kv); i += 2 {
		k, v := kv[i], kv[i+1]
		re := regexp.MustCompile(`("` + regexp.QuoteMeta(k) + `"\s*:\s*)"(?:[^"\\]|\\.)*"`)
		if n := len(re.FindAllStringIndex(raw, -1)); n != 1 {
			t.Fatalf("%s: %d %q members, want 1", b.Name(), n, k)
		}
		lit := layoutString(b.Layout, v)
		raw = re.ReplaceAllStringFunc(raw, func(m string) string { return re.FindStringSubmatch(m)[1] + lit })
		switch k {
		case "id":
			b.Want.MessageID = v
		case "from":
			b.Want.Contact = v
		case "conversation_id":
			b.Want.Conversation = v
		case "name":
			b.Want.Name = v
		case "text":
			b.Want.Text = v
		default:
			t.Fatalf("withMembers: %q is not a member the demo channel reads", k)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("%s with %q is not JSON: %v\n%s", b.Name(), kv, err, raw)
	}
	for i := 0; i < len(kv); i += 2 {
		if doc[kv[i]] != kv[i+1] {
			t.Fatalf("%s: %q reads %q, want %q", b.Name(), kv[i], doc[kv[i]], kv[i+1])
		}
	}
	b.Raw = []byte(raw)
	return b
}

// layoutString is s as a JSON string the way the corpus layout writes
// strings: "goescaped" as Go's json.Marshal (< > & as \u003c …), "python"
// with every non-ASCII character as \uXXXX (surrogate pairs), "php" that
// and "/" as "\/", the others as JSON.stringify (raw UTF-8).
func layoutString(layout, s string) string {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(layout == "goescaped")
	_ = enc.Encode(s) // a string always encodes
	lit := strings.TrimSuffix(buf.String(), "\n")
	if layout != "python" && layout != "php" {
		return lit
	}
	var out strings.Builder
	for _, r := range lit {
		switch {
		case r == '/' && layout == "php":
			out.WriteString(`\/`)
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// TestCorpusMemberHelpers: withMembers and withoutMembers keep every demo
// body JSON and in its layout (a Python or PHP body stays ASCII, a Go one
// without a raw < > &), whatever the values.
func TestCorpusMemberHelpers(t *testing.T) {
	for _, b := range corpus.Bodies(corpus.Demo) {
		if b.Layout == "verbatim" {
			continue
		}
		got := withMembers(t, b, "name", "Zoë </b> & \"Ada\" 🌸", "text", "Where is my refund?\nשלום / \\ 👍🏽")
		got = withoutMembers(t, got, "conversation_id")
		if got.Want.Conversation != b.Want.Contact || got.Want.Name != "Zoë </b> & \"Ada\" 🌸" {
			t.Errorf("%s: want %+v", b.Name(), got.Want)
		}
		raw := string(got.Raw)
		switch b.Layout {
		case "python", "php":
			for _, r := range raw {
				if r >= utf8.RuneSelf {
					t.Errorf("%s: a raw %q in a body its sender writes in ASCII", b.Name(), r)
					break
				}
			}
		case "goescaped":
			if strings.ContainsAny(raw, "<>&") {
				t.Errorf("%s: a raw < > or & in a body Go's encoder wrote: %s", b.Name(), raw)
			}
		}
		// One line fewer in an indented layout (the conversation id's), as many in a one-line one.
		lines := strings.Count(string(b.Raw), "\n")
		if lines > 1 {
			lines--
		}
		if strings.Count(raw, "\n") != lines {
			t.Errorf("%s: the lines changed:\n%s\nfrom\n%s", b.Name(), raw, b.Raw)
		}
	}
}
