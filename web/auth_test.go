package web

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/handoff/handoff/store"
)

// TestLoginRateLimitParallel: twenty wrong passwords for one name, all
// released at once, get at most five "wrong" answers; the rest are refused
// before any password is compared.
func TestLoginRateLimitParallel(t *testing.T) {
	e := newTestEnv(t, nil)
	addUser(t, e.st, "ann", store.RoleApprover, "", "right-password")
	const n = 20
	codes := make([]int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		b := newBrowser(t, e.url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i] = b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"wrong-password"}}, nil).code
		}()
	}
	close(start)
	wg.Wait()
	wrong, limited := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusUnauthorized:
			wrong++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Errorf("a parallel login got %d", c)
		}
	}
	if wrong > 5 || wrong+limited != n {
		t.Errorf("%d answers said wrong password and %d were limited; want at most 5 compared", wrong, limited)
	}
}

// TestFailedLoginKeepsNoTypedName: a name that is no user (perhaps a
// password typed in the wrong field) is not written to the audit log.
func TestFailedLoginKeepsNoTypedName(t *testing.T) {
	e := newTestEnv(t, nil)
	b := newBrowser(t, e.url)
	const typed = "MySecretPassw0rd!"
	if p := b.do(http.MethodPost, "/login", url.Values{"name": {typed}, "password": {"x"}}, nil); p.code != http.StatusUnauthorized {
		t.Fatalf("got %d, want 401", p.code)
	}
	log, err := e.st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "login failed" || strings.Contains(log[0].Who, typed) {
		t.Errorf("audit %+v; want one failed login that does not hold %q", log, typed)
	}
}

// TestFormBodiesAreBounded: the dashboard refuses multipart bodies and forms
// over 64 KiB before parsing them; nothing changes.
func TestFormBodiesAreBounded(t *testing.T) {
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	d := pending(t, e, "demo", "big-1", "hello")
	big := b.post("/drafts/"+d.ID+"/approve", url.Values{"text": {strings.Repeat("x", maxFormBody+1)}})
	if big.code != http.StatusRequestEntityTooLarge && big.code != http.StatusForbidden && big.code != http.StatusBadRequest {
		t.Errorf("an oversize form got %d, want it refused", big.code)
	}
	multi := b.do(http.MethodPost, "/login", nil, http.Header{"Content-Type": {"multipart/form-data; boundary=x"}})
	if multi.code != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart login got %d, want 415", multi.code)
	}
	got, err := e.st.Draft(d.ID)
	if err != nil || got.Status != store.DraftPending {
		t.Errorf("draft after refused requests: %s, %v; want still pending", got.Status, err)
	}
}

// TestAPISessionNeedsCSRFHeader: a session may use the JSON API, but an
// unsafe call must carry X-CSRF-Token; a csrf form field is not enough.
func TestAPISessionNeedsCSRFHeader(t *testing.T) {
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	d := pending(t, e, "demo", "api-csrf-1", "hello")
	p := b.do(http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", url.Values{"csrf": {b.csrf}}, nil)
	if p.code != http.StatusForbidden {
		t.Errorf("session API approve with the token only as a form field got %d, want 403", p.code)
	}
	if got, _ := e.st.Draft(d.ID); got.Status != store.DraftPending {
		t.Fatalf("the refused call approved the draft")
	}
	p = b.do(http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", nil, http.Header{"X-Csrf-Token": {b.csrf}})
	if p.code != http.StatusOK {
		t.Errorf("session API approve with the header got %d %.200s, want 200", p.code, p.body)
	}
}
