package workers

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// TestDigestWarnsOfClosingWindows: a digest lists the waiting drafts whose
// lead's reply window closes within two hours, with the time left and the
// link; not those with longer, none closed already, none on a channel
// without a window.
func TestDigestWarnsOfClosingWindows(t *testing.T) {
	cfg, err := config.Parse([]byte("base_url: "+digestBase+`
providers:
  - {name: wa, kind: whatsapp, phone_number_id: "1", token_env: T}
channels:
  - {name: demo, preset: whatsapp}
  - {name: wa, preset: whatsapp, provider: wa}
digests:
  - {name: d, to: sandbox, address: team, schedule: "@daily"}
`), func(string) string { return "token" })
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	ada := waiting(t, st, "wa", "Ada", "Is it still available?", dt0)
	bob := waiting(t, st, "wa", "Bob", "And the price?", dt0.Add(10*time.Hour))
	old := waiting(t, st, "wa", "Cy", "Hello?", dt0.Add(-2*time.Hour))
	web := waiting(t, st, "demo", "Dee", "Hi", dt0)
	text := func(now time.Time) string {
		t.Helper()
		var out string
		err := st.View(func(tx *store.Tx) error {
			w, err := tx.WaitingDrafts(nil, digestLines)
			if err != nil {
				return err
			}
			out, err = digestText(tx, cfg, cfg.Digests[0], w, now, "at-x")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := text(dt0.Add(22*time.Hour + 30*time.Minute))
	head := "Reply windows closing within 2h (after that only a template, or another channel, can answer):\n"
	want := head + "- Ada (wa): closes in 1h30m " + link(ada.ID) + "\n"
	if !strings.Contains(got, want) {
		t.Errorf("digest at 22h30m:\n%s\nwant it to contain\n%s", got, want)
	}
	for _, d := range []store.Draft{bob, old, web} {
		if strings.Contains(got, "closes in") && strings.Contains(got[strings.Index(got, head):], d.ID) {
			t.Errorf("digest at 22h30m warns of %s (%s), whose window is not closing:\n%s", d.ID, d.Channel, got)
		}
	}
	if got := text(dt0.Add(3 * time.Hour)); strings.Contains(got, "Reply windows closing") {
		t.Errorf("digest at 3h warns of a closing window:\n%s", got)
	}
	if got := text(dt0.Add(25 * time.Hour)); strings.Contains(got, "- Ada (wa): closes") {
		t.Errorf("digest at 25h warns of Ada's window, closed already:\n%s", got)
	}
}
