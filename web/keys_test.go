package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/keys"
	"github.com/handoff/handoff/store"
)

// keyPath is the API path of an action on key.
func keyPath(key, action string) string {
	p := "/api/v1/keys/" + key
	if action != "" {
		p += "/" + action
	}
	return p
}

func TestKeysConcurrentFirstClaims(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	const n = 50
	codes := make([]int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, err := http.NewRequest(http.MethodPost, e.url+keyPath("invoice-77", "claim"), strings.NewReader(`{"amount":12}`))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	created, busy := 0, 0
	for i, c := range codes {
		switch c {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			busy++
		default:
			t.Errorf("claim %d: %d, want 201 or 409", i, c)
		}
	}
	if created != 1 || busy != n-1 {
		t.Errorf("%d claims got 201 and %d got 409; want exactly one 201", created, busy)
	}
}

func TestKeysAPI(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	cfg := config.Default()
	e, _ := newEnv(t, cfg, envOptions{now: clk.Now})
	post := func(key, action, query, body string) (int, map[string]any) {
		t.Helper()
		return apiPost(t, e, keyPath(key, action)+query, body)
	}
	want := func(what string, code int, ans map[string]any, wantCode int, wantText string) {
		t.Helper()
		if code != wantCode || !strings.Contains(errorOf(ans)+" "+strings.Join(stringsOf(ans), " "), wantText) {
			t.Errorf("%s: %d %v, want %d with %q", what, code, ans, wantCode, wantText)
		}
	}

	t.Run("first claim, reuse, conflict", func(t *testing.T) {
		code, ans := post("order-1", "claim", "", `{"sku":"A","qty":1}`)
		if code != http.StatusCreated || ans["state"] != "started" {
			t.Fatalf("first claim: %d %v", code, ans)
		}
		code, ans = post("order-1", "claim", "", `{ "sku" : "A", "qty" : 1 }`)
		want("the same body, spaced out, while held", code, ans, http.StatusConflict, "held by another claim")
		code, ans = post("order-1", "claim", "", `{"sku":"B","qty":1}`)
		want("another body", code, ans, http.StatusUnprocessableEntity, "different body")
		code, ans = post("order-1", "complete", "", `{"order":991}`)
		if code != http.StatusOK || ans["state"] != "completed" {
			t.Fatalf("complete: %d %v", code, ans)
		}
		code, ans = post("order-1", "complete", "", `{"order": 991}`)
		if code != http.StatusOK || ans["state"] != "completed" {
			t.Errorf("complete again with the same result: %d %v, want 200", code, ans)
		}
		code, ans = post("order-1", "claim", "", `{"sku":"A","qty":1}`)
		if res, _ := ans["result"].(map[string]any); code != http.StatusOK || ans["state"] != "completed" || res["order"] != float64(991) {
			t.Errorf("claim after completion: %d %v, want 200 with the result", code, ans)
		}
	})

	t.Run("bodies that are not UTF-8", func(t *testing.T) {
		code, ans := post("utf-5", "claim", "", "{\"name\":\"u-\xff\"}")
		want("claim", code, ans, http.StatusBadRequest, "not valid UTF-8")
		if code, ans := post("utf-5", "claim", "", `{}`); code != http.StatusCreated {
			t.Fatalf("claim: %d %v", code, ans)
		}
		code, ans = post("utf-5", "complete", "", "{\"id\":\"inv-\xfe\"}")
		want("complete", code, ans, http.StatusBadRequest, "not valid UTF-8")
	})

	t.Run("takeover after the lease", func(t *testing.T) {
		code, first := post("sync-2", "claim", "?lease=1s", `{}`)
		stale, _ := first["claim"].(string)
		if code != http.StatusCreated || stale == "" {
			t.Fatalf("claim: %d %v, want 201 naming the claim", code, first)
		}
		clk.Add(999 * time.Millisecond)
		code, ans := post("sync-2", "claim", "?lease=1s", `{}`)
		want("within the lease", code, ans, http.StatusConflict, "held by another claim")
		clk.Add(time.Millisecond)
		code, ans = post("sync-2", "claim", "", `{}`)
		fresh, _ := ans["claim"].(string)
		if code != http.StatusCreated || ans["taken_over"] != true || ans["state"] != "started" || fresh == "" || fresh == stale {
			t.Fatalf("claim after the lease: %d %v, want 201 taken over with a new claim", code, ans)
		}
		// The holder that lost the key wakes up: it may not move the new
		// holder's key, so it will not run the effect.
		code, ans = post("sync-2", "effect-pending", "?claim="+stale, "")
		want("effect-pending by the claim that lost the key", code, ans, http.StatusConflict, "lost the key")
		code, ans = post("sync-2", "complete", "?claim="+stale, `{"done":1}`)
		want("complete by the claim that lost the key", code, ans, http.StatusConflict, "lost the key")
		if code, ans := post("sync-2", "effect-pending", "?claim="+fresh, ""); code != http.StatusOK || ans["state"] != "effect_pending" {
			t.Fatalf("effect-pending by the holder: %d %v", code, ans)
		}
		rec := apiGet(t, e, keyPath("sync-2", ""))["record"].(map[string]any)
		if tos := list(rec["takeovers"]); len(tos) != 1 || tos[0].(map[string]any)["previous_state"] != "started" {
			t.Errorf("record %v, want one takeover from started", rec)
		}
	})

	t.Run("effect pending holds the key as long as the claim asked", func(t *testing.T) {
		if code, ans := post("long-4", "claim", "?lease=2h", `{}`); code != http.StatusCreated {
			t.Fatalf("claim: %d %v", code, ans)
		}
		now := clk.Now()
		if code, ans := post("long-4", "effect-pending", "", ""); code != http.StatusOK || ans["state"] != "effect_pending" {
			t.Fatalf("effect-pending: %d %v", code, ans)
		}
		rec := apiGet(t, e, keyPath("long-4", ""))["record"].(map[string]any)
		if got, want := rec["lease_until"], now.Add(2*time.Hour).Format(time.RFC3339Nano); got != want {
			t.Errorf("lease_until = %v, want %s: two hours from effect-pending, as claimed", got, want)
		}
	})

	t.Run("effect pending, then the holder is gone", func(t *testing.T) {
		if code, ans := post("mail-3", "claim", "?lease=1s", `{"to":"a@b.c"}`); code != http.StatusCreated {
			t.Fatalf("claim: %d %v", code, ans)
		}
		if code, ans := post("mail-3", "effect-pending", "", ""); code != http.StatusOK || ans["state"] != "effect_pending" {
			t.Fatalf("effect-pending: %d %v", code, ans)
		}
		code, ans := post("mail-3", "effect-pending", "", "")
		want("effect-pending twice", code, ans, http.StatusConflict, "effect_pending")
		clk.Add(defaultKeyLease)
		code, ans = post("mail-3", "claim", "", `{"to":"a@b.c"}`)
		want("claim after the effect's lease", code, ans, http.StatusConflict, "needs reconciliation")
		if got := apiGet(t, e, keyPath("mail-3", "")); got["state"] != "needs_reconciliation" {
			t.Errorf("GET: %v, want needs_reconciliation", got)
		}
		code, ans = post("mail-3", "reconcile", "", `{"outcome":"completed","result":{"message_id":"m-1"}}`)
		if code != http.StatusOK || ans["state"] != "completed" {
			t.Fatalf("reconcile completed: %d %v", code, ans)
		}
		code, ans = post("mail-3", "claim", "", `{"to":"a@b.c"}`)
		if res, _ := ans["result"].(map[string]any); code != http.StatusOK || res["message_id"] != "m-1" {
			t.Errorf("claim after reconciliation: %d %v", code, ans)
		}
	})

	t.Run("released as not done", func(t *testing.T) {
		post("pay-4", "claim", "", `{}`)
		post("pay-4", "effect-pending", "", "")
		if code, ans := post("pay-4", "reconcile", "", `{"outcome":"not_done"}`); code != http.StatusOK {
			t.Fatalf("reconcile not_done: %d %v", code, ans)
		}
		if code, _ := e.do(t, http.MethodGet, keyPath("pay-4", ""), "", nil, tokenHeader()); code != http.StatusNotFound {
			t.Errorf("GET after release: %d, want 404", code)
		}
		if code, ans := post("pay-4", "claim", "", `{}`); code != http.StatusCreated {
			t.Errorf("claim after release: %d %v, want 201", code, ans)
		}
		wantAuditBy(t, e.st, "api-token", "key released (reconciled as not done)", "pay-4")
	})

	t.Run("illegal transitions", func(t *testing.T) {
		post("done-5", "claim", "", `{}`)
		post("done-5", "complete", "", `{"n":1}`)
		post("open-5", "claim", "", `{}`)
		tests := []struct {
			name, key, action, body string
		}{
			{"effect-pending on completed", "done-5", "effect-pending", ""},
			{"complete with a different result", "done-5", "complete", `{"n":2}`},
			{"reconcile not_done on started", "open-5", "reconcile", `{"outcome":"not_done"}`},
			{"reconcile not_done on completed", "done-5", "reconcile", `{"outcome":"not_done"}`},
			{"reconcile completed, other result, on completed", "done-5", "reconcile", `{"outcome":"completed","result":{"n":3}}`},
		}
		for _, tt := range tests {
			code, ans := post(tt.key, tt.action, "", tt.body)
			want(tt.name, code, ans, http.StatusConflict, "this needs it to be")
		}
		if got := apiGet(t, e, keyPath("done-5", "")); got["state"] != "completed" || got["result"].(map[string]any)["n"] != float64(1) {
			t.Errorf("refused moves changed done-5: %v", got)
		}
		if got := apiGet(t, e, keyPath("open-5", "")); got["state"] != "started" {
			t.Errorf("refused moves changed open-5: %v", got)
		}
	})

	t.Run("completed keys expire after retention", func(t *testing.T) {
		for _, k := range []string{"exp-6", "exp-7"} {
			post(k, "claim", "", `{}`)
			post(k, "complete", "", `{"ok":true}`)
		}
		clk.Add(cfg.Retention.Keys - time.Second)
		if code, _ := post("exp-6", "claim", "", `{}`); code != http.StatusOK {
			t.Errorf("claim just before expiry: %d, want 200", code)
		}
		clk.Add(time.Second)
		if code, ans := post("exp-6", "claim", "", `{"another":"body"}`); code != http.StatusCreated {
			t.Errorf("claim after expiry: %d %v, want 201 (the key counts as absent)", code, ans)
		}
		n, err := e.st.PruneKeys(context.Background(), clk.Now(), 100)
		if err != nil || n < 1 {
			t.Fatalf("PruneKeys: %d %v", n, err)
		}
		if code, _ := e.do(t, http.MethodGet, keyPath("exp-7", ""), "", nil, tokenHeader()); code != http.StatusNotFound {
			t.Errorf("GET a pruned key: %d, want 404", code)
		}
		if got := apiGet(t, e, keyPath("exp-6", "")); got["state"] != "started" {
			t.Errorf("the reclaimed key: %v, want started", got)
		}
	})

	t.Run("bad inputs", func(t *testing.T) {
		long := strings.Repeat("k", maxKeyLen+1)
		tests := []struct {
			name, key, action, query, body string
			code                           int
			text                           string
		}{
			{"key too long", long, "claim", "", `{}`, http.StatusBadRequest, "1 to 256 bytes"},
			{"key too long on complete", long, "complete", "", `{}`, http.StatusBadRequest, "1 to 256 bytes"},
			{"invalid JSON", "bad-1", "claim", "", `{"a":`, http.StatusBadRequest, "not valid JSON"},
			{"lease not a duration", "bad-2", "claim", "?lease=soon", `{}`, http.StatusBadRequest, "lease"},
			{"lease too short", "bad-2", "claim", "?lease=10ms", `{}`, http.StatusBadRequest, "lease"},
			{"lease too long", "bad-2", "claim", "?lease=25h", `{}`, http.StatusBadRequest, "lease"},
			{"unknown outcome", "order-1", "reconcile", "", `{"outcome":"maybe"}`, http.StatusBadRequest, `"maybe"`},
			{"reconcile without a body", "order-1", "reconcile", "", "", http.StatusBadRequest, "JSON body"},
			{"reconcile with an unknown field", "order-1", "reconcile", "", `{"outcome":"not_done","why":"x"}`, http.StatusBadRequest, `"why"`},
			{"complete with invalid JSON", "order-1", "complete", "", `{`, http.StatusBadRequest, "not valid JSON"},
			{"effect-pending on an unknown key", "never", "effect-pending", "", "", http.StatusNotFound, "never claimed"},
		}
		for _, tt := range tests {
			code, ans := post(tt.key, tt.action, tt.query, tt.body)
			want(tt.name, code, ans, tt.code, tt.text)
		}
		if code, _ := e.do(t, http.MethodGet, keyPath("bad-2", ""), "", nil, tokenHeader()); code != http.StatusNotFound {
			t.Errorf("a refused claim stored the key: %d", code)
		}
	})
}

// stringsOf lists the string values of an answer (for matching its words).
func stringsOf(ans map[string]any) []string {
	var out []string
	for _, v := range ans {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestAnswerForKeys pins how the key API's refusals are answered, as
// package keys returns them (wrapped with context).
func TestAnswerForKeys(t *testing.T) {
	until := time.Date(2026, 11, 29, 9, 5, 0, 0, time.UTC)
	wrap := func(err error) error { return fmt.Errorf("keys: claim k-1: %w", err) }
	tests := []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"another body", wrap(&keys.MismatchError{Key: "k-1"}), 422, `key "k-1" was first claimed with a different body; use a new key for a different request`},
		{"held", wrap(&keys.BusyError{Key: "k-1", State: store.KeyStarted, Until: until}), 409, `key "k-1" is held by another claim (started) until 2026-11-29T09:05:00Z; try again after that`},
		{"unsure", wrap(&keys.UnsureError{Key: "k-1", Note: "the effect may have happened"}), 409,
			`key "k-1" needs reconciliation: the effect may have happened; check the side effect, then POST /api/v1/keys/k-1/reconcile`},
		{"lost claim", wrap(&keys.LostClaimError{Key: "k-1", Holder: "B", Claim: "A"}), 409, (&keys.LostClaimError{Key: "k-1", Holder: "B", Claim: "A"}).Error()},
		{"state", wrap(&keys.StateError{Key: "k-1", State: store.KeyCompleted, Want: "started"}), 409, "key k-1 is completed; this needs it to be started"},
		{"never claimed", missing(fmt.Errorf("keys: complete k-1: %w", store.ErrNotFound), "key %q was never claimed", "k-1"), 404, `key "k-1" was never claimed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, msg := answerFor(tt.err); status != tt.status || msg != tt.msg {
				t.Errorf("answerFor = %d %q, want %d %q", status, msg, tt.status, tt.msg)
			}
		})
	}
}
