package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// ntfyStandIn is an ntfy server's publish endpoint as docs.ntfy.sh
// documents it: a JSON publish POSTed to the root, its fields those of
// "Publish as JSON" (unknown ones refused), its actions those of "Action
// buttons" (http: label, url, method, body, clear; view: label, url), a
// topic of [-_A-Za-z0-9]{1,64}, a bearer access token when the server asks
// for one. It answers as ntfy does: 200 with the message JSON, or
// {"code","http","error"}.
type ntfyStandIn struct {
	*httptest.Server
	token string
	mu    sync.Mutex
	got   []ntfyPublish
	bad   []string
	fail  int // answer this many publishes with a 500 first
	// failTopic, when set, answers the next publish to that topic with a
	// 500, once.
	failTopic string
}

var ntfyTopicRE = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)

func newNtfyStandIn(t *testing.T, token string) *ntfyStandIn {
	s := &ntfyStandIn{token: token}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		refuse := func(status, code int, msg string) {
			s.bad = append(s.bad, msg)
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"code":%d,"http":%d,"error":%q}`, code, status, msg)
		}
		if r.Method != http.MethodPost || r.URL.Path != "/" {
			refuse(http.StatusNotFound, 40401, "a JSON publish is a POST to the root: "+r.Method+" "+r.URL.Path)
			return
		}
		if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
			refuse(http.StatusUnauthorized, 40101, "unauthorized")
			return
		}
		var p struct {
			Topic    string   `json:"topic"`
			Message  string   `json:"message"`
			Title    string   `json:"title"`
			Tags     []string `json:"tags"`
			Priority int      `json:"priority"`
			Actions  []struct {
				Action  string            `json:"action"`
				Label   string            `json:"label"`
				URL     string            `json:"url"`
				Method  string            `json:"method"`
				Headers map[string]string `json:"headers"`
				Body    string            `json:"body"`
				Clear   bool              `json:"clear"`
			} `json:"actions"`
			Click    string `json:"click"`
			Attach   string `json:"attach"`
			Markdown bool   `json:"markdown"`
			Icon     string `json:"icon"`
			Filename string `json:"filename"`
			Delay    string `json:"delay"`
			Email    string `json:"email"`
			Call     string `json:"call"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			refuse(http.StatusBadRequest, 40024, "the JSON publish is not ntfy's: "+err.Error())
			return
		}
		switch {
		case !ntfyTopicRE.MatchString(p.Topic):
			refuse(http.StatusBadRequest, 40009, "invalid topic "+p.Topic)
			return
		case p.Priority < 0 || p.Priority > 5:
			refuse(http.StatusBadRequest, 40007, "invalid priority")
			return
		case len(p.Actions) > 3:
			refuse(http.StatusBadRequest, 40018, "too many actions")
			return
		case len(p.Message) > 4096:
			refuse(http.StatusBadRequest, 40000, "the message is over 4,096 bytes")
			return
		}
		pub := ntfyPublish{Topic: p.Topic, Title: p.Title, Message: p.Message, Priority: p.Priority, Tags: p.Tags, Click: p.Click}
		for _, a := range p.Actions {
			u, err := url.Parse(a.URL)
			switch {
			case a.Label == "" || err != nil || !u.IsAbs():
				refuse(http.StatusBadRequest, 40018, "an action needs a label and an absolute url")
				return
			case a.Action == "http" && a.Method != "" && a.Method != http.MethodPost && a.Method != http.MethodPut && a.Method != http.MethodGet:
				refuse(http.StatusBadRequest, 40018, "invalid method")
				return
			case a.Action != "http" && a.Action != "view" && a.Action != "broadcast":
				refuse(http.StatusBadRequest, 40018, "invalid action "+a.Action)
				return
			}
			pub.Actions = append(pub.Actions, ntfyAction{Action: a.Action, Label: a.Label, URL: a.URL, Method: a.Method, Body: a.Body, Clear: a.Clear})
		}
		if s.fail > 0 || s.failTopic != "" && s.failTopic == p.Topic {
			if s.failTopic == p.Topic {
				s.failTopic = ""
			} else {
				s.fail--
			}
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"code":50001,"http":500,"error":"internal server error"}`)
			return
		}
		s.got = append(s.got, pub)
		fmt.Fprintf(w, `{"id":"msg%d","time":1767225600,"event":"message","topic":%q}`, len(s.got), p.Topic)
	}))
	t.Cleanup(func() {
		s.Close()
		if len(s.bad) > 0 {
			t.Errorf("publishes the ntfy stand-in refused: %q", s.bad)
		}
	})
	return s
}

func (s *ntfyStandIn) publishes() []ntfyPublish {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ntfyPublish(nil), s.got...)
}

// ntfyFixture: topics for dana (acme), bea (beta) and root (admin).
func ntfyFixture(t *testing.T) (*fixture, *ntfyStandIn, Inbound) {
	t.Helper()
	f := newFixture(t)
	srv := newNtfyStandIn(t, "tk_test")
	f.cfg.BaseURL = "https://handoff.example.com"
	f.cfg.Approvals.Mail.Ntfy = &config.NtfySurface{URL: srv.URL, Token: "tk_test", TokenTTL: 10 * time.Minute,
		Topics: map[string]string{"dana": "handoff-dana-x7Kq", "bea": "handoff-bea-p2Lm", "root": "handoff-root-9zQ"}}
	a, err := New(f.st, f.cfg, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	in, ok := a.Inbound(ViaNtfy)
	if !ok {
		t.Fatal("ntfy is not an inbound surface")
	}
	return f, srv, in
}

// tokenOf is the token in a push's Approve button's URL.
func tokenOf(t *testing.T, p ntfyPublish) string {
	t.Helper()
	for _, a := range p.Actions {
		if a.Action == "http" && a.Label == "Approve" {
			return strings.TrimPrefix(a.URL, "https://handoff.example.com/surfaces/ntfy/")
		}
	}
	t.Fatalf("no Approve button in %+v", p)
	return ""
}

func pushTo(t *testing.T, ps []ntfyPublish, topic string) ntfyPublish {
	t.Helper()
	for _, p := range ps {
		if p.Topic == topic {
			return p
		}
	}
	t.Fatalf("no push to %s in %+v", topic, ps)
	return ntfyPublish{}
}

func press(in Inbound, token, body string, now time.Time) Answer {
	return in.Receive(context.Background(), &Request{Path: token, Body: []byte(body), Now: now, Header: http.Header{}})
}

// TestNtfyPushAndPress: a waiting draft is pushed once to each person
// allowed on its client (dana, root; not bea), in ntfy's JSON publish with
// Approve and Reject http buttons that POST to /surfaces/ntfy/<token> and a
// view button; only the token's hash is stored. dana's Approve approves
// via ntfy; the same button again, root's after it, an unknown token, an
// expired one and a body that is neither word decide nothing; Reject
// rejects; expired tokens are swept.
func TestNtfyPushAndPress(t *testing.T) {
	ctx := context.Background()
	f, srv, in := ntfyFixture(t)
	d := f.pending(t, "web", "n1", corpus.TextNamed("emoji").Body)
	for range 2 {
		if err := f.a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.runJobs(t)
	}
	ps := srv.publishes()
	if len(ps) != 2 {
		t.Fatalf("%d pushes, want one to dana and one to root: %+v", len(ps), ps)
	}
	dp := pushTo(t, ps, "handoff-dana-x7Kq")
	pushTo(t, ps, "handoff-root-9zQ")
	if !strings.Contains(dp.Message, corpus.TextNamed("emoji").Body) || !strings.HasPrefix(dp.Title, "Reply to Ada — Acme · web") || dp.Click != "https://handoff.example.com/drafts?id="+d.ID {
		t.Errorf("dana's push = %+v", dp)
	}
	if len(dp.Actions) != 3 || dp.Actions[0].Method != "POST" || dp.Actions[0].Body != "approve" || !dp.Actions[0].Clear ||
		dp.Actions[1].Label != "Reject" || dp.Actions[1].Body != "reject" || dp.Actions[1].URL != dp.Actions[0].URL || dp.Actions[2].Action != "view" {
		t.Errorf("dana's buttons = %+v", dp.Actions)
	}
	tok := tokenOf(t, dp)
	if len(tok) != 43 {
		t.Errorf("the token %q is %d characters, want 43 (256 bits)", tok, len(tok))
	}
	// Only the hash is stored.
	if err := f.st.View(func(tx *store.Tx) error {
		ts, err := tx.PushTokensOf(ViaNtfy, d.ID)
		if len(ts) != 2 {
			return fmt.Errorf("%d tokens stored, want 2", len(ts))
		}
		raw, _ := json.Marshal(ts)
		if bytes.Contains(raw, []byte(tok)) {
			return errors.New("the token itself is stored")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	now := f.clock.Now()
	if ans := press(in, tok, "maybe", now); ans.Status != http.StatusBadRequest {
		t.Errorf("body maybe: %d %s", ans.Status, ans.Body)
	}
	if ans := press(in, "not-a-token-of-ours", "approve", now); ans.Status != http.StatusGone {
		t.Errorf("an unknown token: %d %s", ans.Status, ans.Body)
	}
	if ans := press(in, tok, "approve", now); ans.Status != http.StatusOK || !strings.HasPrefix(string(ans.Body), "Approved by dana") {
		t.Fatalf("dana's Approve: %d %s", ans.Status, ans.Body)
	}
	if got, _ := f.st.Draft(d.ID); got.Decision == nil || got.Decision.Via != ViaNtfy || got.Decision.By != "dana" || got.Decision.From != "ntfy handoff-dana-x7Kq" {
		t.Errorf("the decision = %+v", got.Decision)
	}
	if ans := press(in, tok, "approve", now); ans.Status != http.StatusGone {
		t.Errorf("the same button again: %d %s", ans.Status, ans.Body)
	}
	rootTok := tokenOf(t, pushTo(t, ps, "handoff-root-9zQ"))
	if ans := press(in, rootTok, "reject", now); ans.Status != http.StatusConflict || !strings.Contains(string(ans.Body), "already approved") {
		t.Errorf("root's Reject after dana's Approve: %d %s", ans.Status, ans.Body)
	}

	// Reject, and a token past its time.
	d2 := f.pending(t, "web", "n2", "Hello again")
	d3 := f.pending(t, "shop", "n3", "Hello Bea")
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.runJobs(t)
	ps = srv.publishes()[2:]
	var danaTok2, beaTok string
	for _, p := range ps {
		switch {
		case p.Topic == "handoff-dana-x7Kq" && strings.Contains(p.Click, d2.ID):
			danaTok2 = tokenOf(t, p)
		case p.Topic == "handoff-bea-p2Lm" && strings.Contains(p.Click, d3.ID):
			beaTok = tokenOf(t, p)
		case p.Topic == "handoff-dana-x7Kq" || p.Topic == "handoff-bea-p2Lm" && !strings.Contains(p.Click, d3.ID):
			t.Errorf("a push of another client's draft: %+v", p)
		}
	}
	if ans := press(in, danaTok2, "reject", f.clock.Now()); ans.Status != http.StatusOK || !strings.HasPrefix(string(ans.Body), "Rejected by dana") {
		t.Errorf("dana's Reject: %d %s", ans.Status, ans.Body)
	}
	f.clock.Advance(11 * time.Minute)
	if ans := press(in, beaTok, "approve", f.clock.Now()); ans.Status != http.StatusGone {
		t.Errorf("an expired button: %d %s", ans.Status, ans.Body)
	}
	if got, _ := f.st.Draft(d3.ID); got.Status != store.DraftPending {
		t.Errorf("after the expired press d3 is %s", got.Status)
	}
	// Left: root's of d1 (its refused Reject spent nothing), root's of d2,
	// bea's and root's of d3; all expired, all swept.
	if n, err := f.st.SweepPushTokens(ctx, f.clock.Now(), 100); err != nil || n != 4 {
		t.Errorf("sweep = %d, %v; want the 4 expired tokens", n, err)
	}
	if err := f.st.View(func(tx *store.Tx) error {
		for _, id := range []string{d.ID, d2.ID, d3.ID} {
			if ts, err := tx.PushTokensOf(ViaNtfy, id); err != nil || len(ts) != 0 {
				return fmt.Errorf("tokens of %s after the sweep: %+v, %v", id, ts, err)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// TestNtfyRetrySkipsPushed: a publish the server refuses fails the
// announce job; its retry pushes only to the people not pushed yet.
func TestNtfyRetrySkipsPushed(t *testing.T) {
	ctx := context.Background()
	f, srv, _ := ntfyFixture(t)
	d := f.pending(t, "web", "r1", "Hello")
	if err := f.a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.fail = 0
	srv.mu.Unlock()
	// dana goes out, root's publish is refused: the job fails.
	var v View
	if err := f.st.View(func(tx *store.Tx) (err error) { v, err = f.a.viewTx(tx, d.ID, f.clock.Now()); return err }); err != nil {
		t.Fatal(err)
	}
	s, _ := f.a.Surface(ViaNtfy)
	ns := s.(*ntfySurface)
	if err := ns.push(ctx, "dana", "handoff-dana-x7Kq", v, f.clock.Now(), ""); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.fail = 1
	srv.mu.Unlock()
	var nerr *NtfyError
	if _, err := s.Post(ctx, "acme", v); !errors.As(err, &nerr) || nerr.Status != http.StatusInternalServerError {
		t.Fatalf("Post with the server failing: %v, want its 500", err)
	}
	if _, err := s.Post(ctx, "acme", v); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, p := range srv.publishes() {
		n[p.Topic]++
	}
	if n["handoff-dana-x7Kq"] != 1 || n["handoff-root-9zQ"] != 1 || len(n) != 2 {
		t.Errorf("pushes per topic = %v, want one each to dana and root", n)
	}
}

// TestNtfyRemindRetrySkipsPushed: a reminder whose push to one person is
// refused fails its job; the retry pushes only the people that attempt did
// not reach (dana was pushed the reminder once, not twice), and a later
// stage, due after those pushes, pushes everyone again.
func TestNtfyRemindRetrySkipsPushed(t *testing.T) {
	ctx := context.Background()
	f, srv, _ := ntfyFixture(t)
	d := f.pendingText(t, "web", "r1", corpus.TextNamed("arabic").Body, corpus.TextNamed("fish").Body)
	var v View
	if err := f.st.View(func(tx *store.Tx) (err error) { v, err = f.a.viewTx(tx, d.ID, f.clock.Now()); return err }); err != nil {
		t.Fatal(err)
	}
	s, _ := f.a.Surface(ViaNtfy)
	rm := s.(Reminder)
	before := len(srv.publishes())
	f.clock.Advance(time.Hour)
	n := Notice{Stage: StageRemind, View: v, Line: "Still waiting.", Since: f.clock.Now()}
	srv.mu.Lock()
	srv.failTopic = "handoff-root-9zQ"
	srv.mu.Unlock()
	var nerr *NtfyError
	if err := rm.Remind(ctx, n); !errors.As(err, &nerr) || nerr.Status != http.StatusInternalServerError {
		t.Fatalf("Remind with root's publish refused: %v, want its 500", err)
	}
	f.clock.Advance(time.Minute)
	n.Retry = true
	if err := rm.Remind(ctx, n); err != nil {
		t.Fatal(err)
	}
	count := func() map[string]int {
		c := map[string]int{}
		for _, p := range srv.publishes()[before:] {
			c[p.Topic]++
		}
		return c
	}
	if c := count(); c["handoff-dana-x7Kq"] != 1 || c["handoff-root-9zQ"] != 1 || len(c) != 2 {
		t.Errorf("reminder pushes per topic after the retry = %v, want one each to dana and root", c)
	}
	f.clock.Advance(time.Hour)
	later := Notice{Stage: StageWindow, View: v, Line: "Window closing.", Since: f.clock.Now(), Retry: true}
	if err := rm.Remind(ctx, later); err != nil {
		t.Fatal(err)
	}
	if c := count(); c["handoff-dana-x7Kq"] != 2 || c["handoff-root-9zQ"] != 2 {
		t.Errorf("pushes per topic after a later stage = %v, want a second one each", c)
	}
}

// TestNtfyPressesAtOnce: dana's Approve pressed twice at once, with the
// dashboard's approval beside: one outbox row, one 200 for the button.
func TestNtfyPressesAtOnce(t *testing.T) {
	ctx := context.Background()
	f, srv, in := ntfyFixture(t)
	rv := review.New(f.st, f.cfg)
	for i := range 10 {
		d := f.pending(t, "web", fmt.Sprintf("p%d", i), "Hello")
		if err := f.a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.runJobs(t)
		var tok string
		for _, p := range srv.publishes() {
			if p.Topic == "handoff-dana-x7Kq" && strings.Contains(p.Click, d.ID) {
				tok = tokenOf(t, p)
			}
		}
		var wg sync.WaitGroup
		answers := make([]Answer, 2)
		for j := range answers {
			wg.Add(1)
			go func() { defer wg.Done(); answers[j] = press(in, tok, "approve", f.clock.Now()) }()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = rv.Approve(ctx, d.ID, store.Decision{By: "root", At: f.clock.Now()})
		}()
		wg.Wait()
		ok := 0
		for _, a := range answers {
			if a.Status == http.StatusOK {
				ok++
			} else if a.Status != http.StatusGone && a.Status != http.StatusConflict {
				t.Errorf("press: %d %s", a.Status, a.Body)
			}
		}
		if ok > 1 {
			t.Fatalf("%d presses of one button decided", ok)
		}
		if err := f.st.View(func(tx *store.Tx) error {
			_, err := tx.Outbox(store.OutboxID(d.ConversationID, d.ID))
			return err
		}); err != nil {
			t.Fatalf("the outbox row: %v", err)
		}
	}
}
