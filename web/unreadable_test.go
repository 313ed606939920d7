package web

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/storetest"
)

// ExpectUnreadable is apptest.ExpectUnreadable, set by app_test.go as
// NewApp is: the check after a test that damaged records on purpose.
var ExpectUnreadable func(dir string)

// rotten is a process started on a copy of e's file in which one record's
// bytes were flipped in place (bucket, key): the bit-rot case.
func rotten(t *testing.T, e *testEnv, bucket string, key []byte) *testEnv {
	t.Helper()
	var b bytes.Buffer
	if _, err := e.st.Backup(&b); err != nil {
		t.Fatal(err)
	}
	cfg := *e.cfg
	cfg.DataDir = t.TempDir()
	path := filepath.Join(cfg.DataDir, store.FileName)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	// "v":1 is where every record starts: "v"#1 is JSON no more.
	if err := storetest.Rot(path, bucket, key, storetest.Replace(`"v":1`, `"v"#1`)); err != nil {
		t.Fatal(err)
	}
	ExpectUnreadable(cfg.DataDir)
	a := NewApp(t, &cfg, nil, testToken)
	if err := a.Start(t.Context()); err != nil {
		t.Fatalf("start on a file with one unreadable record: %v", err)
	}
	return &testEnv{url: "http://" + a.Addr().String(), st: a.Store(), runner: a.Jobs(), cfg: &cfg, srv: a.Web(), metrics: a.Web().metrics, app: a}
}

// TestOneUnreadableRecord flips bytes inside one record of a real file
// (an event, a draft, a job, a lead, an outbox row) and starts the whole
// process on it: it starts, every page and list answers 200 for an admin
// and an approver, the record shows as one unreadable row with its id where
// it is listed, and the rest of the lists go on.
func TestOneUnreadableRecord(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, pagesConfig())
	d1 := pending(t, e, "demo", "u1", "first")
	d2 := pending(t, e, "demo", "u2", "second")
	d3 := pending(t, e, "demo", "u3", "third")
	row := needsReconciliation(t, e, "u4")
	addUser(t, e.st, "ann", store.RoleApprover, "sales", "ann-password")
	addUser(t, e.st, "boss", store.RoleAdmin, "", "boss-password")
	ev1, err := e.st.Timeline(d1.EventKey)
	if err != nil {
		t.Fatal(err)
	}
	lead3 := store.LeadKey("demo", "u3@example.com")
	if _, err := e.st.Handoff(lead3); err != nil {
		t.Fatalf("lead of u3: %v", err)
	}

	tests := []struct {
		name, bucket, key string
		kind              string
		listed            []string // pages whose rows name the record
	}{
		{"event", "events", ev1.Event.ID, "event", []string{"/drafts", "/events/" + url.PathEscape(d1.EventKey)}},
		{"draft", "drafts", d2.ID, "draft", []string{"/drafts"}},
		{"job", "jobs", ev1.Jobs[0].ID, "job", []string{"/events/" + url.PathEscape(d1.EventKey)}},
		{"lead", "handoffs", lead3, "lead", []string{"/handoffs"}},
		{"outbox row", "outbox", row.ID, "outbox row", []string{"/reconcile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rotten(t, e, tt.bucket, []byte(tt.key))
			if got := r.st.Unreadable(); len(got) != 1 || got[0].Kind != tt.kind || got[0].ID != tt.key {
				t.Errorf("the store knows %+v as unreadable, want the one %s %s", got, tt.kind, tt.key)
			}
			pages := []string{
				"/", "/drafts", "/drafts/live", "/drafts?id=" + d3.ID, "/handoffs", "/handoffs?status=owned&stuck=true",
				"/events/" + url.PathEscape(d1.EventKey), "/events/" + url.PathEscape(d3.EventKey),
				"/search?q=" + url.QueryEscape("Person"), "/search?q=third",
			}
			admin := []string{"/reconcile", "/dead-letters", "/audit", "/users", "/clients"}
			for _, who := range []struct {
				name  string
				role  store.Role
				pages []string
			}{{"ann", store.RoleApprover, pages}, {"boss", store.RoleAdmin, append(pages, admin...)}} {
				b := newBrowser(t, r.url)
				b.login(who.name, who.name+"-password")
				for _, p := range who.pages {
					got := b.get(p)
					if got.code != http.StatusOK {
						t.Errorf("%s GET %s: %d, want 200: %.400s", who.name, p, got.code, got.body)
					}
				}
				for _, p := range tt.listed {
					if who.role != store.RoleAdmin && p == "/reconcile" {
						continue
					}
					got := b.get(p)
					if !strings.Contains(got.body, "cannot be read") || !strings.Contains(got.body, tt.key) {
						t.Errorf("%s GET %s does not show %s %s as unreadable: %.2000s", who.name, p, tt.kind, tt.key, got.body)
					}
				}
				if got := b.get("/"); !strings.Contains(got.body, "1 record cannot be read") || !strings.Contains(got.body, tt.key) {
					t.Errorf("the overview has no banner naming %s: %.3000s", tt.key, got.body)
				}
			}
			api := http.Header{"Authorization": {"Bearer " + testToken}}
			for _, p := range []string{"/api/v1/drafts", "/api/v1/handoffs", "/api/v1/dead-letters", "/api/v1/events/" + url.PathEscape(d3.EventKey)} {
				if code, ans := r.do(t, http.MethodGet, p, "", nil, api); code != http.StatusOK {
					t.Errorf("GET %s: %d %v, want 200", p, code, ans)
				}
			}
			code, ans := r.do(t, http.MethodGet, "/api/v1/events/"+url.PathEscape(d1.EventKey), "", nil, api)
			switch tt.kind {
			case "event":
				if msg, _ := ans["error"].(string); code != http.StatusUnprocessableEntity || !strings.Contains(msg, "event "+tt.key+" cannot be read") {
					t.Errorf("GET the unreadable event: %d %v, want 422 naming it", code, ans)
				}
			default:
				if code != http.StatusOK {
					t.Errorf("GET the event of an unreadable %s: %d %v, want 200", tt.kind, code, ans)
				}
			}
			if code, _ := r.do(t, http.MethodGet, "/readyz", "", nil, nil); code != http.StatusOK {
				t.Errorf("/readyz: %d, want 200", code)
			}
			if v, ok := gauge(t, scrape(t, r), "handoff_unreadable_records"); !ok || v != 1 {
				t.Errorf("handoff_unreadable_records = %v (present %v), want 1", v, ok)
			}
			// The rest goes on: a new message is drafted and listed.
			d5 := pending(t, r, "demo", "u5", "after the damage")
			if _, err := r.st.Draft(d5.ID); err != nil {
				t.Errorf("a new draft after the damage: %v", err)
			}
		})
	}
}
