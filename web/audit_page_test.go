package web

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestAuditPageFilterAndPaging: /audit shows the log a page at a time,
// newest first, with "Older →" to the next page and back to the newest;
// it filters by who, by action and by a part of the target or detail
// (accents and case aside); a cursor it never gave out is a 400 in one
// sentence. Details from the corpus are escaped.
func TestAuditPageFilterAndPaging(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	texts := corpus.Texts()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := range 130 {
		en := store.AuditEntry{At: at.Add(time.Duration(i) * time.Second), Who: []string{"dana", "lee"}[i%2], Action: []string{"approve draft", "close lead"}[i%2],
			Target: fmt.Sprintf("t-%03d", i), Detail: texts[i%len(texts)].Body}
		if i == 40 {
			en.Detail = "closed: Zoë Müller asked us to stop"
		}
		if err := e.st.Audit(context.Background(), en); err != nil {
			t.Fatal(err)
		}
	}
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	rows := regexp.MustCompile(`<td class="mono">t-(\d{3})</td>`)
	targets := func(body string) []string {
		var out []string
		for _, m := range rows.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}

	p := root.getOK("/audit")
	got := targets(p.body)
	// root's login is the newest entry, so the page holds 99 of these.
	if len(got) != 99 || got[0] != "129" || got[98] != "031" {
		t.Fatalf("the first page: %d rows from %v to %v; want 99 (after root's login), t-129 down to t-031", len(got), first(got), last(got))
	}
	older := regexp.MustCompile(`id="audit-older" class="button" href="([^"]+)"`).FindStringSubmatch(p.body)
	if older == nil || !strings.Contains(p.body, "100 entries, the newest first.") {
		t.Fatalf("the first page offers no Older → or says no count: %.3000s", p.body)
	}
	if !strings.Contains(p.body, html.EscapeString(texts[0].Body)) {
		t.Errorf("a corpus detail is not shown escaped")
	}
	p = root.getOK(html.UnescapeString(older[1]))
	if got := targets(p.body); len(got) != 31 || got[0] != "030" || got[30] != "000" || strings.Contains(p.body, `id="audit-older"`) || !strings.Contains(p.body, `id="audit-newest"`) {
		t.Errorf("the second page: %d rows %v…%v, older link %v; want the 31 oldest, no Older →, a way back", len(got), first(got), last(got), strings.Contains(p.body, `id="audit-older"`))
	}

	p = root.getOK("/audit?who=LEE&action=close+lead")
	if got := targets(p.body); len(got) != 65 || got[0] != "129" || !strings.Contains(p.body, "65 entries matching the filter, newest first: the whole log.") {
		t.Errorf("who=LEE action=close lead: %d rows; want lee's 65 closes: %s", len(got), p.body[strings.Index(p.body, `id="audit-summary"`):][:200])
	}
	p = root.getOK("/audit?q=" + url.QueryEscape("zoe muller"))
	if got := targets(p.body); len(got) != 1 || got[0] != "040" {
		t.Errorf("q='zoe muller': rows %v; want t-040, the entry about Zoë Müller", got)
	}
	p = root.getOK("/audit?q=t-12")
	if got := targets(p.body); len(got) != 10 {
		t.Errorf("q=t-12: rows %v; want t-120 to t-129", got)
	}
	if p := root.get("/audit?before=nonsense"); p.code != http.StatusBadRequest || !strings.Contains(p.body, "is not an entry id this log gave out") {
		t.Errorf("a bad cursor: %d %.300s; want 400 in a sentence", p.code, p.body)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}
