package drafter

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

var citeFacts = &Facts{Version: 2, Entries: []Fact{
	{ID: "F1", Text: "Open Mon–Fri 9:00–17:30."},
	{ID: "F2", Text: "A haircut is €35."},
	{ID: "F7", Text: "Parking behind the shop & free."},
}}

// TestCite: the marks go, with the spaces before them, wherever they
// stand; each cited entry is named once in the order first cited; an id
// the version does not have is reported; a reply written without facts
// keeps its brackets.
func TestCite(t *testing.T) {
	for _, tc := range []struct {
		name, reply, want string
		cited             []string
		unknown           []string
	}{
		{"after a sentence", "We open at 9 [F1]. A haircut is €35 [F2].", "We open at 9. A haircut is €35.", []string{"F1", "F2"}, nil},
		{"several in one", "Yes, €35 and we are open until 17:30 [F2, F1][F2]", "Yes, €35 and we are open until 17:30", []string{"F2", "F1"}, nil},
		{"at line starts", "[F7] Park behind the shop.\n[F1]\n\n😀 مرحبا [ F2 ;F9 ]", "Park behind the shop.\n\n😀 مرحبا", []string{"F7", "F1", "F2"}, []string{"F9"}},
		{"indented list kept", "Prices:\n  - haircut €35 [F2]\n  - colour: a person will confirm", "Prices:\n  - haircut €35\n  - colour: a person will confirm", []string{"F2"}, nil},
		{"not a mark", "Reply [to] this & <b>that</b> [F] [f2]", "Reply [to] this & <b>that</b> [F] [f2]", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cited, unknown := Cite(tc.reply, citeFacts)
			if got != tc.want {
				t.Errorf("text = %q, want %q", got, tc.want)
			}
			var ids []string
			for _, c := range cited {
				ids = append(ids, c.ID)
			}
			if !reflect.DeepEqual(ids, tc.cited) || !reflect.DeepEqual(unknown, tc.unknown) {
				t.Errorf("cited %v unknown %v, want %v and %v", ids, unknown, tc.cited, tc.unknown)
			}
		})
	}
	if got, cited, _ := Cite("See [F1].", nil); got != "See [F1]." || cited != nil {
		t.Errorf("without facts: %q %v, want the reply as it is", got, cited)
	}
}

// TestOpenAICitesFacts: the scripted model cites the entries the prompt
// offered (testkit.CiteFacts), in a corpus reply; the output has the
// reply without the marks, the version and the cited entries with their
// text, and a note for an id the version does not have.
func TestOpenAICitesFacts(t *testing.T) {
	m := testkit.NewModel(t)
	body := corpus.TextNamed("fish").Body
	m.Answer(testkit.CiteFacts(body, "haircut", "Parking", "nothing-matches"))
	o, err := NewOpenAI(OpenAIConfig{BaseURL: m.URL, Model: "m", PromptVersion: "p", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in := oaInput()
	in.Facts = citeFacts
	out, err := o.Draft(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(body); out.Text != want {
		t.Errorf("text = %q, want the body without marks %q", out.Text, want)
	}
	if !reflect.DeepEqual(out.Cited, []Fact{citeFacts.Entries[1], citeFacts.Entries[2]}) || out.FactsVersion != 2 {
		t.Errorf("cited %+v version %d, want F2 and F7 of version 2", out.Cited, out.FactsVersion)
	}
	if got := testkit.OfferedFacts(m.Calls()[0].Req); !reflect.DeepEqual(got, map[string]string{"F1": citeFacts.Entries[0].Text, "F2": citeFacts.Entries[1].Text, "F7": citeFacts.Entries[2].Text}) {
		t.Errorf("the prompt offered %v", got)
	}
	// An id the version does not have is taken out and said.
	m.Always(testkit.CiteReply("We are open [F1][F99]."))
	out, err = o.Draft(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(out.Notes)
	if out.Text != "We are open." || len(out.Cited) != 1 || !strings.Contains(string(raw), "F99, not in facts version 2") {
		t.Errorf("text %q cited %v notes %s, want F1 cited and F99 noted", out.Text, out.Cited, raw)
	}
}

// FuzzCite: whatever the reply, no mark is left in the text, each cited
// entry is one of the version's, once, and a reply without a mark comes
// back as it was (trimmed).
func FuzzCite(f *testing.F) {
	f.Add("We open at 9 [F1]. A haircut is €35 [F2, F9].\n[F7]")
	f.Add(corpus.TextNamed("fish").Body + " [F2]")
	f.Add("[F1][ F2 ;F7 ]\n\n  - indented [F2]")
	f.Add("[F[F1]1] nested")
	f.Fuzz(func(t *testing.T, reply string) {
		text, cited, _ := Cite(reply, citeFacts)
		if citeMark.MatchString(text) {
			t.Fatalf("a mark is left: %q -> %q", reply, text)
		}
		seen := map[string]bool{}
		for _, c := range cited {
			if seen[c.ID] || !slicesContains(citeFacts.Entries, c) {
				t.Fatalf("cited %+v from %q", cited, reply)
			}
			seen[c.ID] = true
		}
		if !citeMark.MatchString(reply) && text != strings.TrimSpace(reply) {
			t.Fatalf("a reply without marks changed: %q -> %q", reply, text)
		}
	})
}

func slicesContains(es []Fact, e Fact) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}
