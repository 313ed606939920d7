package crm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/webhook"
)

// failures is what a stand-in is told to do to the next calls of a route:
// "503" (answer it, nothing written), "429", "drop" (write, then cut the
// connection before the answer: the outcome is unknown to the caller).
type failures struct {
	mu   sync.Mutex
	next map[string][]string // route → failures, first first
}

func (f *failures) add(route string, what ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = map[string][]string{}
	}
	f.next[route] = append(f.next[route], what...)
}

func (f *failures) take(route string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.next[route]
	if len(q) == 0 {
		return ""
	}
	f.next[route] = q[1:]
	return q[0]
}

// drop cuts the connection of w without an answer.
func drop(t reporter, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// strict decodes body into v refusing unknown fields and trailing data: a
// request the CRM's documented shape does not describe fails the test.
func strict(t *testing.T, body []byte, v any) bool {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		t.Errorf("request body %s does not fit the documented shape: %v", body, err)
		return false
	}
	return true
}

// hubSpot stands in for HubSpot's contacts batch upsert: contacts keyed
// by the idProperty's value, the request checked against the documented
// shape (POST, Bearer token, {"inputs":[{"idProperty","id","properties"}]},
// properties all strings, the idProperty's own value equal to id).
type hubSpot struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	failures
	mu       sync.Mutex
	contacts map[string]map[string]string // id → properties
	ids      map[string]string            // id → contact id
	upserts  map[string]int               // id → upserts applied
	// assign, when set, is the portal's workflow: on each upsert of a
	// contact without an owner, the owner id it sets ("" none).
	assign func(props map[string]string) string
	reads  int // contacts read by id
	// statuses lists, per contact, the handoff_status of each upsert
	// applied, in order.
	statuses map[string][]string
	// deals keyed by the deal id property's value, as contacts are;
	// associated counts the PUTs of each contact id → deal id pair.
	deals       map[string]map[string]string
	dealIDs     map[string]string
	dealUpserts map[string]int
	associated  map[[2]string]int
}

// serveDeal answers the deals batch upsert and the default association
// PUT /crm/v4/objects/0-1/{contactId}/associations/default/0-3/{dealId}.
func (h *hubSpot) serveDeal(w http.ResponseWriter, r *http.Request, body []byte) {
	t := h.t
	if r.Header.Get("Authorization") != "Bearer "+h.token {
		w.WriteHeader(401)
		io.WriteString(w, `{"status":"error","message":"Authentication credentials not found.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"INVALID_AUTHENTICATION"}`)
		return
	}
	route := "deal"
	if r.Method == http.MethodPut {
		route = "associate"
	}
	fail := h.take(route)
	switch fail {
	case "503":
		w.WriteHeader(503)
		io.WriteString(w, `{"status":"error","message":"Service Unavailable","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"INTERNAL_ERROR"}`)
		return
	case "429":
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(429)
		io.WriteString(w, `{"status":"error","message":"You have reached your secondly limit.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"RATE_LIMITS"}`)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deals == nil {
		h.deals, h.dealIDs, h.dealUpserts, h.associated = map[string]map[string]string{}, map[string]string{}, map[string]int{}, map[[2]string]int{}
	}
	if route == "associate" {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/crm/v4/objects/0-1/"), "/") // {contactId} associations default 0-3 {dealId}
		if len(parts) != 5 || parts[1] != "associations" || parts[2] != "default" || parts[3] != "0-3" {
			t.Errorf("hubspot association %s: want /crm/v4/objects/0-1/{contactId}/associations/default/0-3/{dealId}", r.URL.Path)
			w.WriteHeader(400)
			return
		}
		known := func(ids map[string]string, id string) bool {
			for _, v := range ids {
				if v == id {
					return true
				}
			}
			return false
		}
		if !known(h.ids, parts[0]) || !known(h.dealIDs, parts[4]) {
			t.Errorf("hubspot association of contact %s and deal %s: one of them does not exist", parts[0], parts[4])
			w.WriteHeader(404)
			io.WriteString(w, `{"status":"error","message":"Object not found.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"OBJECT_NOT_FOUND"}`)
			return
		}
		h.associated[[2]string{parts[0], parts[4]}]++
		if fail == "drop" {
			w.Header().Set(dropHeader, "1")
			return
		}
		fmt.Fprintf(w, `{"status":"COMPLETE","results":[{"from":{"id":%q},"to":{"id":%q},"associationSpec":{"associationCategory":"HUBSPOT_DEFINED","associationTypeId":3}}],"startedAt":"2026-12-02T06:00:00Z","completedAt":"2026-12-02T06:00:00Z"}`, parts[0], parts[4])
		return
	}
	var req crm.UpsertRequest
	if !strict(t, body, &req) || len(req.Inputs) != 1 || req.Inputs[0].Properties[req.Inputs[0].IDProperty] != req.Inputs[0].ID {
		t.Errorf("hubspot deal upsert %s: want one input with idProperty, id and that property's value", body)
		w.WriteHeader(400)
		return
	}
	in := req.Inputs[0]
	for _, k := range []string{"dealname", "pipeline", "dealstage"} {
		if in.Properties[k] == "" {
			t.Errorf("hubspot deal upsert %s: no %s (a deal is created with its name, pipeline and stage)", body, k)
		}
	}
	h.dealUpserts[in.ID]++
	d, ok := h.deals[in.ID]
	if !ok {
		d = map[string]string{}
		h.deals[in.ID] = d
		h.dealIDs[in.ID] = strconv.Itoa(5000 + len(h.dealIDs))
	}
	for k, v := range in.Properties {
		d[k] = v
	}
	if fail == "drop" {
		w.Header().Set(dropHeader, "1")
		return
	}
	fmt.Fprintf(w, `{"status":"COMPLETE","results":[{"id":%q,"new":%v,"properties":{},"createdAt":"2026-12-02T06:00:00Z","updatedAt":"2026-12-02T06:00:00Z","archived":false}],"startedAt":"2026-12-02T06:00:00Z","completedAt":"2026-12-02T06:00:00Z"}`, h.dealIDs[in.ID], !ok)
}

// read answers GET /crm/v3/objects/contacts/{contactId}: the contact's
// properties asked for (?properties=), those it has.
func (h *hubSpot) read(w http.ResponseWriter, r *http.Request, contactID string) {
	if r.Header.Get("Authorization") != "Bearer "+h.token {
		w.WriteHeader(401)
		io.WriteString(w, `{"status":"error","message":"Authentication credentials not found.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"INVALID_AUTHENTICATION"}`)
		return
	}
	if fail := h.take("read"); fail == "503" {
		w.WriteHeader(503)
		io.WriteString(w, `{"status":"error","message":"Service Unavailable","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"INTERNAL_ERROR"}`)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	for key, id := range h.ids {
		if id != contactID {
			continue
		}
		props := map[string]string{"hs_object_id": id}
		for _, name := range strings.Split(r.URL.Query().Get("properties"), ",") {
			if v, ok := h.contacts[key][name]; ok {
				props[name] = v
			}
		}
		b, _ := json.Marshal(map[string]any{"id": id, "properties": props, "createdAt": "2026-12-02T06:00:00Z", "updatedAt": "2026-12-02T06:00:00Z", "archived": false})
		w.Write(b)
		return
	}
	w.WriteHeader(404)
	io.WriteString(w, `{"status":"error","message":"Object not found.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"OBJECT_NOT_FOUND"}`)
}

func newHubSpot(t *testing.T) *hubSpot {
	h := &hubSpot{t: t, token: "pat-test", contacts: map[string]map[string]string{}, ids: map[string]string{}, upserts: map[string]int{}}
	specs := hubSpotSpecs(t)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := specFor(specs, r)
		if s == nil {
			t.Errorf("hubspot got %s %s, which no published HubSpot operation is", r.Method, r.URL.Path)
			w.WriteHeader(404)
			return
		}
		s.validate(t, w, r, body, func(w http.ResponseWriter) { h.serve(w, r, body) })
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hubSpot) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	t := h.t
	w.Header().Set("Content-Type", "application/json") // every answer, errors too, is JSON
	if id, ok := strings.CutPrefix(r.URL.Path, crm.ContactPath); ok && r.Method == http.MethodGet && !strings.Contains(id, "/") {
		h.read(w, r, id)
		return
	}
	if r.URL.Path == crm.DealUpsertPath || strings.HasPrefix(r.URL.Path, "/crm/v4/objects/0-1/") {
		h.serveDeal(w, r, body)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != crm.UpsertPath {
		t.Errorf("hubspot got %s %s, want POST %s", r.Method, r.URL.Path, crm.UpsertPath)
		http.Error(w, `{"status":"error","message":"not found","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"OBJECT_NOT_FOUND"}`, 404)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+h.token || r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(401)
		io.WriteString(w, `{"status":"error","message":"Authentication credentials not found.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"INVALID_AUTHENTICATION"}`)
		return
	}
	var req struct {
		Inputs []struct {
			IDProperty         string            `json:"idProperty"`
			ID                 string            `json:"id"`
			Properties         map[string]string `json:"properties"`
			ObjectWriteTraceID string            `json:"objectWriteTraceId"`
		} `json:"inputs"`
	}
	if !strict(t, body, &req) || len(req.Inputs) != 1 || req.Inputs[0].IDProperty == "" || req.Inputs[0].ID == "" || req.Inputs[0].Properties[req.Inputs[0].IDProperty] != req.Inputs[0].ID {
		t.Errorf("hubspot upsert %s: want one input with idProperty, id and that property's value", body)
		w.WriteHeader(400)
		io.WriteString(w, `{"status":"error","message":"Invalid input JSON","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"VALIDATION_ERROR"}`)
		return
	}
	switch h.take("upsert") {
	case "400":
		w.WriteHeader(400)
		io.WriteString(w, `{"status":"error","message":"Property values were not valid: handoff_status is not a property of contacts","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"VALIDATION_ERROR"}`)
		return
	case "503":
		w.WriteHeader(503)
		io.WriteString(w, `{"status":"error","message":"Service Unavailable","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"INTERNAL_ERROR"}`)
		return
	case "429":
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(429)
		io.WriteString(w, `{"status":"error","message":"You have reached your secondly limit.","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"RATE_LIMITS"}`)
		return
	case "drop":
		h.apply(req.Inputs[0].ID, req.Inputs[0].Properties)
		w.Header().Set(dropHeader, "1") // validate cuts the connection
		return
	}
	in := req.Inputs[0]
	id, isNew := h.apply(in.ID, in.Properties)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"status":"COMPLETE","results":[{"id":%q,"new":%v,"properties":{},"createdAt":"2026-12-02T06:00:00Z","updatedAt":"2026-12-02T06:00:00Z","archived":false}],"startedAt":"2026-12-02T06:00:00Z","completedAt":"2026-12-02T06:00:00Z"}`, id, isNew)
}

// apply is the upsert: found by id, or created.
func (h *hubSpot) apply(id string, props map[string]string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.upserts[id]++
	c, ok := h.contacts[id]
	if !ok {
		c = map[string]string{}
		h.contacts[id] = c
		h.ids[id] = strconv.Itoa(1000 + len(h.ids))
	}
	for k, v := range props {
		c[k] = v
	}
	if h.statuses == nil {
		h.statuses = map[string][]string{}
	}
	h.statuses[id] = append(h.statuses[id], props["handoff_status"])
	if h.assign != nil && c[crm.PropOwner] == "" {
		if owner := h.assign(c); owner != "" {
			c[crm.PropOwner] = owner
		}
	}
	return h.ids[id], !ok
}

func (h *hubSpot) contact(id string) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for k, v := range h.contacts[id] {
		out[k] = v
	}
	return out
}

func (h *hubSpot) upsertsOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upserts[id]
}

func (h *hubSpot) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.contacts)
}

// pipedrive stands in for Pipedrive's persons (API v2: search, get,
// create, update) and leads (v1: list by person, create), each request
// checked against the documented shape, with a search index that lags:
// a person is found by the search only lag after it was written.
type pipedrive struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	lag   time.Duration
	failures
	mu      sync.Mutex
	persons map[int]*pdPerson
	leads   map[string]int // lead id → person id
	creates int            // persons created
	calls   []string
	// me is the API token's user: the owner of a person created without
	// one, as in Pipedrive. assign, when set, is the account's assignment
	// rule: the owner it gives a person created without one (0 none).
	me     int
	assign func(p crm.Person) int
}

type pdPerson struct {
	crm.Person
	indexedAt time.Time
}

func newPipedrive(t *testing.T, lag time.Duration) *pipedrive {
	p := &pipedrive{t: t, token: "pd-test", lag: lag, persons: map[int]*pdPerson{}, leads: map[string]int{}, me: 9000}
	specs := pipedriveSpecs(t)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := specFor(specs, r)
		if s == nil {
			t.Errorf("pipedrive got %s %s, which no published Pipedrive operation is", r.Method, r.URL.Path)
			p.answer(w, 404, nil)
			return
		}
		s.validate(t, w, r, body, func(w http.ResponseWriter) { p.serve(w, r, body) })
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pipedrive) answer(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status >= 300 {
		fmt.Fprintf(w, `{"success":false,"error":%q,"error_info":"Please check developers.pipedrive.com"}`, http.StatusText(status))
		return
	}
	b, _ := json.Marshal(map[string]any{"success": true, "data": data})
	w.Write(b)
}

func (p *pipedrive) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	t := p.t
	if r.Header.Get("x-api-token") != p.token {
		p.answer(w, 401, nil)
		return
	}
	route := r.Method + " " + r.URL.Path
	if strings.HasPrefix(r.URL.Path, crm.PipedrivePersons+"/") && r.URL.Path != crm.PipedriveSearch {
		route = r.Method + " " + crm.PipedrivePersons + "/{id}"
	}
	p.mu.Lock()
	p.calls = append(p.calls, route)
	p.mu.Unlock()
	fail := p.take(route)
	switch fail {
	case "503":
		p.answer(w, 503, nil)
		return
	case "429":
		w.Header().Set("Retry-After", "0")
		p.answer(w, 429, nil)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch route {
	case "GET " + crm.PipedriveSearch:
		q := r.URL.Query()
		if q.Get("fields") != "custom_fields" || q.Get("exact_match") != "true" || q.Get("term") == "" || len(q.Get("term")) > 30 {
			t.Errorf("pipedrive search %s: want term (≤30 characters for an exact match), fields=custom_fields, exact_match=true", r.URL.RawQuery)
		}
		items := []any{}
		for _, pr := range p.persons {
			if time.Since(pr.indexedAt) < p.lag {
				continue // not in the search index yet
			}
			for _, v := range pr.CustomFields {
				if v == q.Get("term") {
					items = append(items, map[string]any{"result_score": 1, "item": map[string]any{"id": pr.ID, "type": "person", "name": pr.Name, "custom_fields": []string{v}}})
					break
				}
			}
		}
		p.answer(w, 200, map[string]any{"items": items})
	case "GET " + crm.PipedrivePersons + "/{id}":
		id, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, crm.PipedrivePersons+"/"))
		pr, ok := p.persons[id]
		if !ok {
			p.answer(w, 404, nil)
			return
		}
		p.answer(w, 200, pr.Person)
	case "POST " + crm.PipedrivePersons, "PATCH " + crm.PipedrivePersons + "/{id}":
		var in crm.Person
		if !strict(t, body, &in) || in.ID != 0 {
			p.answer(w, 400, nil)
			return
		}
		var pr *pdPerson
		if r.Method == http.MethodPost {
			if in.Name == "" {
				t.Errorf("pipedrive create person %s without a name (required)", body)
				p.answer(w, 400, nil)
				return
			}
			p.creates++
			pr = &pdPerson{Person: crm.Person{ID: 100 + len(p.persons), CustomFields: map[string]string{}}, indexedAt: time.Now()}
			p.persons[pr.ID] = pr
		} else {
			id, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, crm.PipedrivePersons+"/"))
			if pr = p.persons[id]; pr == nil {
				p.answer(w, 404, nil)
				return
			}
		}
		if in.Name != "" {
			pr.Name = in.Name
		}
		if in.OwnerID != 0 {
			pr.OwnerID = in.OwnerID
		}
		if pr.OwnerID == 0 && r.Method == http.MethodPost {
			pr.OwnerID = p.me
			if p.assign != nil {
				if o := p.assign(in); o != 0 {
					pr.OwnerID = o
				}
			}
		}
		if in.Emails != nil {
			pr.Emails = in.Emails
		}
		if in.Phones != nil {
			pr.Phones = in.Phones
		}
		for k, v := range in.CustomFields {
			pr.CustomFields[k] = v
		}
		if fail == "drop" {
			w.Header().Set(dropHeader, "1") // validate cuts the connection
			return
		}
		p.answer(w, 200, pr.Person)
	case "GET " + crm.PipedriveMe:
		p.answer(w, 200, map[string]any{"id": p.me, "name": "API user", "email": "api@example.com", "is_you": true})
	case "GET " + crm.PipedriveLeads:
		person, err := strconv.Atoi(r.URL.Query().Get("person_id"))
		if err != nil {
			t.Errorf("pipedrive list leads %s: want person_id", r.URL.RawQuery)
		}
		out := []crm.Lead{}
		for id, pid := range p.leads {
			if pid == person {
				out = append(out, crm.Lead{ID: id, Title: "t", PersonID: pid})
			}
		}
		p.answer(w, 200, out)
	case "POST " + crm.PipedriveLeads:
		var in crm.Lead
		if !strict(t, body, &in) || in.Title == "" || p.persons[in.PersonID] == nil {
			t.Errorf("pipedrive create lead %s: want a title and an existing person_id", body)
			p.answer(w, 400, nil)
			return
		}
		in.ID = fmt.Sprintf("adf21080-0e10-11eb-879b-05d71fb%05d", len(p.leads))
		p.leads[in.ID] = in.PersonID
		if fail == "drop" {
			w.Header().Set(dropHeader, "1") // validate cuts the connection
			return
		}
		p.answer(w, 200, in)
	default:
		t.Errorf("pipedrive got %s, which no documented endpoint of ours is", route)
		p.answer(w, 404, nil)
	}
}

// byRef lists the persons holding ref in field.
func (p *pipedrive) byRef(field, ref string) []crm.Person {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []crm.Person
	for _, pr := range p.persons {
		if pr.CustomFields[field] == ref {
			out = append(out, pr.Person)
		}
	}
	return out
}

func (p *pipedrive) created() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creates
}

func (p *pipedrive) leadsOf(person int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pid := range p.leads {
		if pid == person {
			n++
		}
	}
	return n
}

// receiver stands in for an n8n-style webhook: it verifies the Standard
// Webhooks signature with the library handoff verifies its own with, and
// acts once per webhook-id.
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	v   *webhook.Verifier
	failures
	mu     sync.Mutex
	got    map[string]int // webhook-id → deliveries
	events map[string]crm.Event
}

func newReceiver(t *testing.T, secret string) *receiver {
	v, err := webhook.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, v: v, got: map[string]int{}, events: map[string]crm.Event{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := rc.v.Verify(r.Header, body, time.Now()); err != nil {
			t.Errorf("webhook signature: %v", err)
			w.WriteHeader(401)
			return
		}
		var ev crm.Event
		if !strict(t, body, &ev) || ev.Type != crm.EventType {
			w.WriteHeader(400)
			return
		}
		id := r.Header.Get("webhook-id")
		rc.mu.Lock()
		rc.got[id]++
		if _, dup := rc.events[id]; !dup {
			rc.events[id] = ev
		}
		rc.mu.Unlock()
		switch rc.take("post") {
		case "drop":
			drop(t, w)
			return
		case "503":
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}
