package web

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/workers"
)

// canaryEnv is the demo with a canary: the template drafter as A (v1) and
// a template of its own as B (v2), drafting share of new turns.
func canaryEnv(t *testing.T, share float64) (*testEnv, string) {
	t.Helper()
	cfg := config.Default()
	cfg.Drafter.Template = "Hi {{.Name}}, A here."
	cfg.Drafter.Canary = &config.Canary{PromptVersion: "v2", Template: "Hello {{.Name}}, this is B.", Share: share}
	e, _ := newEnv(t, cfg, envOptions{})
	return e, cfg.ClientOf("demo")
}

// postCorpus posts corpus message n to the demo channel and returns its
// event key.
func postCorpus(t *testing.T, e *testEnv, n int, id string) string {
	t.Helper()
	b := corpus.Message(n, id, "", fmt.Sprintf("+1555%07d", n))
	resp, err := http.Post(e.url+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo %s: %d, want 202", id, resp.StatusCode)
	}
	return "demo:" + b.Want.MessageID
}

// TestCanarySplitsTurns: with a canary, each new turn is drafted by the
// arm its first message's key gives (workers.ArmOf), never by both: the
// draft records its arm, B's prompt version and B's text; the split is
// near the share. Promoting B drafts every later turn with it, rolling
// back every later turn with A, each in one action, audited; the same
// decision again is refused naming who made it; an approver may not decide.
func TestCanarySplitsTurns(t *testing.T) {
	e, client := canaryEnv(t, 0.5)
	var b int
	const n = 24
	for i := range n {
		key := postCorpus(t, e, i, fmt.Sprintf("c-%d", i))
		d := waitDraft(t, e, key)
		arm, _ := d["canary"].(string)
		want := workers.ArmOf(key, 0.5)
		text, _ := d["text"].(string)
		switch {
		case arm != want:
			t.Errorf("draft of %s: arm %q, want %q (ArmOf its first message)", key, arm, want)
		case arm == workers.ArmB && (d["prompt_version"] != "v2" || !strings.Contains(text, "this is B.")):
			t.Errorf("B's draft of %s: version %v, text %q; want v2 and B's template", key, d["prompt_version"], text)
		case arm == workers.ArmA && (d["prompt_version"] != "v1" || !strings.Contains(text, "A here.")):
			t.Errorf("A's draft of %s: version %v, text %q; want v1 and A's template", key, d["prompt_version"], text)
		}
		if arm == workers.ArmB {
			b++
		}
	}
	if b == 0 || b == n {
		t.Errorf("%d of %d turns drafted by B at share 0.5; want some by each", b, n)
	}

	approver := http.Header{"Authorization": {"Bearer " + tokenFor(t, e, store.ScopeApprove)}}
	if code, ans := e.do(t, http.MethodPost, "/api/v1/canary/"+client+"/promote", "", nil, approver); code != http.StatusForbidden {
		t.Errorf("an approve token promoting: %d %v, want 403", code, ans)
	}
	code, ans := apiPost(t, e, "/api/v1/canary/"+client+"/promote", "")
	if msg, _ := ans["message"].(string); code != http.StatusOK || ans["status"] != "promoted" || !strings.Contains(msg, "Promoted v2") {
		t.Fatalf("promote: %d %v, want 200 promoted with its sentence", code, ans)
	}
	code, ans = apiPost(t, e, "/api/v1/canary/"+client+"/promote", "")
	if msg, _ := ans["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "already promoted by") {
		t.Errorf("promote again: %d %v, want 409 naming who promoted it", code, ans)
	}
	for i := n; i < n+6; i++ {
		key := postCorpus(t, e, i, fmt.Sprintf("c-%d", i))
		if d := waitDraft(t, e, key); d["canary"] != workers.ArmB || d["prompt_version"] != "v2" {
			t.Errorf("after the promotion the draft of %s is arm %v, version %v; want B, v2", key, d["canary"], d["prompt_version"])
		}
	}
	if code, ans := apiPost(t, e, "/api/v1/canary/"+client+"/rollback", ""); code != http.StatusOK || ans["status"] != "rolled_back" {
		t.Fatalf("roll back: %d %v", code, ans)
	}
	for i := n + 6; i < n+12; i++ {
		key := postCorpus(t, e, i, fmt.Sprintf("c-%d", i))
		if d := waitDraft(t, e, key); d["canary"] != workers.ArmA || d["prompt_version"] != "v1" {
			t.Errorf("after the roll back the draft of %s is arm %v, version %v; want A, v1", key, d["canary"], d["prompt_version"])
		}
	}
	if code, ans := apiPost(t, e, "/api/v1/canary/nobody/promote", ""); code != http.StatusNotFound || !strings.Contains(fmt.Sprint(ans["error"]), `no client "nobody"`) {
		t.Errorf("an unknown client: %d %v, want 404 naming it", code, ans)
	}
	if code, ans := apiPost(t, e, "/api/v1/canary/"+client+"/flip", ""); code != http.StatusNotFound || !strings.Contains(fmt.Sprint(ans["error"]), "not a canary action") {
		t.Errorf("an unknown action: %d %v, want 404 naming it", code, ans)
	}
	audit, err := e.st.AuditLog(100)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		if strings.HasPrefix(a.Action, "canary ") {
			actions = append(actions, a.Action+" "+a.Target)
		}
	}
	if want := []string{"canary rollback " + client, "canary promote " + client}; /* newest first */ fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Errorf("audited %v, want %v", actions, want)
	}
}

// TestCanaryPanel: the overview shows each version's figures beside the
// other's and, to an admin alone, the buttons; the form promotes.
func TestCanaryPanel(t *testing.T) {
	e, client := canaryEnv(t, 1)
	waitDraft(t, e, postCorpus(t, e, 1, "p-1"))
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := ann.getOK("/")
	if !strings.Contains(p.body, `id="canary"`) || !strings.Contains(p.body, "Running: 100% of new turns are drafted by v2") || strings.Contains(p.body, "canary-promote-") {
		t.Errorf("an approver's overview: no canary panel, or it offers the buttons: %.600s", p.body[max(0, strings.Index(p.body, `id="canary"`)):])
	}
	boss := loggedIn(t, e, "root", store.RoleAdmin, "")
	p = boss.getOK("/")
	if !strings.Contains(p.body, `id="canary-promote-`+client+`"`) || !strings.Contains(p.body, `<span class="mono">v1</span> (A)`) || !strings.Contains(p.body, `<span class="mono">v2</span> (B)`) {
		t.Errorf("an admin's overview lacks the buttons or a version's row: %.1200s", p.body[max(0, strings.Index(p.body, `id="canary"`)):])
	}
	p = boss.post("/canary/"+client+"/promote", nil)
	if p.code != http.StatusOK || !strings.Contains(p.body, "Promoted v2 for "+client) || !strings.Contains(p.body, "Promoted by root") {
		t.Errorf("the promote form: %d %.400s", p.code, p.body)
	}
	if p := ann.post("/canary/"+client+"/rollback", nil); p.code != http.StatusForbidden {
		t.Errorf("an approver's roll back form: %d, want 403", p.code)
	}
}

// TestCanaryDecidedOnce: two admins promoting at once make one decision:
// one is told it was done, the other who did it.
func TestCanaryDecidedOnce(t *testing.T) {
	e, client := canaryEnv(t, 0.5)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = apiPost(t, e, "/api/v1/canary/"+client+"/promote", "")
		}()
	}
	wg.Wait()
	ok, conflict := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
			conflict++
		}
	}
	if ok != 1 || conflict != len(codes)-1 {
		t.Errorf("%d promotions at once: %d succeeded, %d refused as already made (codes %v); want 1 and %d", len(codes), ok, conflict, codes, len(codes)-1)
	}
}
