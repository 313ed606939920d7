package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestOverviewCountsOutcomesApart walks the five endings through
// the dashboard — one rejection, one close, two own replies and one
// "draft again" — and reads the overview's prompt row: each counted as
// itself (1 rejected, 1 closed, 2 own replies, 1 drafted again), the
// rates over the four judged endings (the close says nothing of the
// prompt), and the store's figures the same.
func TestOverviewCountsOutcomesApart(t *testing.T) {
	t.Parallel()
	e := holdingEnv(t, nil)
	texts := corpus.Texts()
	var ds []store.Draft
	for i, id := range []string{"oc-rej", "oc-close", "oc-own1", "oc-own2", "oc-again"} {
		ds = append(ds, pending(t, e, "demo", id, texts[i].Body))
	}
	b := loggedIn(t, e, "dana", store.RoleApprover, "")
	if p := b.hx("/drafts/"+ds[0].ID+"/reject", url.Values{"reason": {"off"}}); p.code != http.StatusOK {
		t.Fatalf("reject: %d %.300s", p.code, p.body)
	}
	for _, a := range []struct {
		d      store.Draft
		action string
		form   url.Values
	}{
		{ds[1], "close", url.Values{"reason": {"spam"}}},
		{ds[2], "reply", url.Values{"text": {texts[5].Body}}},
		{ds[3], "reply", url.Values{"text": {texts[2].Body}}},
		{ds[4], "redraft", url.Values{"instruction": {"shorter"}}},
	} {
		a.form.Set("back", "/drafts")
		if p := b.post("/events/"+url.PathEscape(a.d.EventKey)+"/"+a.action, a.form); p.code != http.StatusSeeOther {
			t.Fatalf("%s %s: %d %.300s", a.action, a.d.EventKey, p.code, p.body)
		}
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		d, err := e.st.DraftByEvent(ds[4].EventKey)
		return err == nil && d.Version == 2
	}, "the draft written again")

	figs, err := e.st.DraftFigures(store.Everything(), time.Now().AddDate(0, 0, -1))
	if err != nil {
		t.Fatal(err)
	}
	var sum store.DraftFigure
	for _, f := range figs {
		sum.Drafts += f.Drafts
		sum.Waiting += f.Waiting
		sum.Rejected += f.Rejected
		sum.OwnReplies += f.OwnReplies
		sum.DraftedAgain += f.DraftedAgain
		sum.Closed += f.Closed
	}
	if sum.Drafts != 6 || sum.Waiting != 1 || sum.Rejected != 1 || sum.OwnReplies != 2 || sum.DraftedAgain != 1 || sum.Closed != 1 {
		t.Errorf("figures %+v; want 6 drafts (the five and the new one), 1 waiting, 1 rejected, 2 own replies, 1 drafted again, 1 closed", sum)
	}

	admin := loggedIn(t, e, "ann", store.RoleAdmin, "")
	p := admin.getOK("/")
	row := regexp.MustCompile(`(?s)<td class="mono">[^<]+</td>(.*?)</tr>`).FindStringSubmatch(p.body)
	if row == nil {
		t.Fatalf("the overview has no prompt row: %.3000s", p.body)
	}
	cells := regexp.MustCompile(`<td>([^<]*)</td>`).FindAllStringSubmatch(row[1], -1)
	var got []string
	for _, c := range cells {
		got = append(got, c[1])
	}
	// Drafts, unchanged, edited, rejected, own reply, drafted again, closed, waiting.
	want := []string{"6", "0 (0%)", "0 (0%)", "1 (25%)", "2 (50%)", "1 (25%)", "1", "1"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("the prompt row reads %q; want %q", got, want)
	}
	for _, h := range []string{"<th>Own reply</th>", "<th>Drafted again</th>", "<th>Closed</th>"} {
		if !strings.Contains(p.body, h) {
			t.Errorf("the overview lacks the column %s", h)
		}
	}
}
