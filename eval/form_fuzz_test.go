package eval

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// The forms eval writes and reads back — a journal line (Turn), the plan —
// read back as written: decode(encode(v)) == v through the real journal
// (append, fsync, reopen) and WritePlan/ReadPlan, over arbitrary strings.
// What JSON changes is put into the value first, as the texts arrive: a
// string as JSON keeps it (each byte of invalid UTF-8 is U+FFFD; the
// store's texts and a model's parsed answer are valid already), times in
// UTC.

// asJSON is s as encoding/json keeps it.
func asJSON(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func FuzzJournalTurn(f *testing.F) {
	f.Add("d01", "web:m-1", `Fish & chips <b>"x"</b> \ 👍🏽`, "<script>alert(1)</script>", "مرحبا", int64(1767225600), 0.25, int64(800))
	f.Add("", "", "", "", "", int64(0), 0.0, int64(0))
	f.Add("d\xff", "k\u2028", "{\n  \"text\": \"pretty\"\n}\n", "a\x00b", "line\r\nline", int64(-1), 1.0, int64(-5))
	f.Fuzz(func(t *testing.T, id, key, customer, sent, text string, unix int64, dist float64, ms int64) {
		if id == "" {
			id = "d"
		}
		id, key, customer, sent, text = asJSON(id), asJSON(key), asJSON(customer), asJSON(sent), asJSON(text)
		if dist != dist || dist > 1e300 || dist < -1e300 {
			dist = 0.5 // JSON has no NaN nor infinities; a distance is 0 to 1
		}
		lat := float64(ms) / 1000
		at := time.Unix(unix%(1<<40), 0).UTC()
		want := Turn{
			DraftID: id, EventKey: key, Channel: "web", ConversationID: key, DraftedAt: at, ApprovedAt: at.Add(time.Minute),
			Edited: len(sent)%2 == 0, Customer: customer, Sent: sent,
			Current: Side{Text: text, Drafter: "openai", Model: "m", PromptVersion: "v1", Distance: dist, Cost: dist, Currency: "USD",
				Guards: &store.Guards{CustomerLanguage: "eng", ReplyLanguage: "deu", LanguageDiffers: true, Figures: []store.GuardFigure{{Kind: "price", Text: text}}}, GuardHits: 2},
			Candidate: Side{Text: sent + text, Distance: dist, DistanceApprox: true, LatencyMS: &lat, PromptTokens: ms, OutputTokens: unix},
			Error:     customer,
		}
		path := filepath.Join(t.TempDir(), JournalFile)
		j, done, err := openJournal(path)
		if err != nil || len(done) != 0 {
			t.Fatalf("open a new journal: %d turns, %v", len(done), err)
		}
		if err := j.append(want); err != nil {
			t.Fatal(err)
		}
		j.close()
		j, done, err = openJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		j.close()
		if got := done[want.DraftID]; len(done) != 1 || !reflect.DeepEqual(got, want) {
			t.Fatalf("the journal read back\n%#v\nwant\n%#v", got, want)
		}

		since := at
		p := Plan{V: formVersion, Created: at, Source: text, Eligible: int(ms), Turns: []string{id, key},
			Settings: Settings{Client: customer, Channel: sent, Channels: []string{text}, Since: &since, Sample: int(ms), Seed: uint64(unix),
				Candidate: Version{Model: text, PromptVersion: id, PromptFile: key, PromptHash: sent, FactsHash: customer}}}
		dir := t.TempDir()
		if err := WritePlan(dir, p); err != nil {
			t.Fatal(err)
		}
		back, ok, err := ReadPlan(dir)
		if err != nil || !ok || !reflect.DeepEqual(back, p) {
			t.Fatalf("the plan read back %v, %v as\n%#v\nwant\n%#v", ok, err, back, p)
		}
		if d := p.Settings.Differs(back.Settings); d != "" {
			t.Errorf("a plan read back differs from itself: %s", d)
		}
		_ = os.RemoveAll(dir)
	})
}
