package crm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// apiSpec is one of the CRMs' published OpenAPI documents (crm/testdata/
// openapi, README.md there names each one's source and version): a
// stand-in checks every request handoff sends against it, the operation
// (method and path under the spec's server), its parameters, its body's
// schema and its security scheme, and every answer the stand-in gives
// against the operation's documented responses, so the stand-in answers as
// the CRM documents it does.
type apiSpec struct {
	file   string
	server *url.URL // the spec's server: requests are matched as sent to it
	router routers.Router
}

// erratum corrects one place where a published spec contradicts its own
// API's reference (each one named in testdata/openapi/README.md).
type erratum func(doc *openapi3.T) error

var (
	specsMu sync.Mutex
	specs   = map[string]*apiSpec{}
)

// loadSpec reads testdata/openapi/<file> once per test binary.
func loadSpec(t testing.TB, file string, errata ...erratum) *apiSpec {
	t.Helper()
	specsMu.Lock()
	defer specsMu.Unlock()
	if s, ok := specs[file]; ok {
		return s
	}
	doc, err := openapi3.NewLoader().LoadFromFile("testdata/openapi/" + file)
	if err != nil {
		t.Fatalf("spec %s: %v", file, err)
	}
	for _, fix := range errata {
		if err := fix(doc); err != nil {
			t.Fatalf("spec %s: erratum: %v", file, err)
		}
	}
	if len(doc.Servers) != 1 {
		t.Fatalf("spec %s: want one server, have %d", file, len(doc.Servers))
	}
	server, err := url.Parse(doc.Servers[0].URL)
	if err != nil {
		t.Fatalf("spec %s: server: %v", file, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("spec %s: router: %v", file, err)
	}
	s := &apiSpec{file: file, server: server, router: router}
	specs[file] = s
	return s
}

// route finds r's operation in the spec: r as sent to the spec's server
// (the stand-in listens on 127.0.0.1; the path is the API's).
func (s *apiSpec) route(r *http.Request, body []byte) (*http.Request, *routers.Route, map[string]string, error) {
	req := r.Clone(context.Background())
	u := *r.URL
	u.Scheme, u.Host = s.server.Scheme, s.server.Host
	req.URL, req.Host = &u, s.server.Host
	req.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := s.router.FindRoute(req)
	return req, route, params, err
}

// matches reports whether r is an operation of this spec.
func (s *apiSpec) matches(r *http.Request) bool {
	_, _, _, err := s.route(r, nil)
	return err == nil
}

// validate checks one request and the stand-in's answer to it against the
// spec. serve answers the request (into a recorder); the answer is then
// checked and copied to w. Every mismatch fails the test, in the spec's words.
func (s *apiSpec) validate(t reporter, w http.ResponseWriter, r *http.Request, body []byte, serve func(w http.ResponseWriter)) {
	t.Helper()
	req, route, params, err := s.route(r, body)
	if err != nil {
		t.Errorf("%s: %s %s is no operation of the published spec: %v", s.file, r.Method, r.URL.Path, err)
		serve(w)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: authenticate}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Errorf("%s: %s %s does not fit %s: %v\nbody: %s", s.file, r.Method, r.URL.RequestURI(), route.Operation.OperationID, err, body)
	}
	rec := httptest.NewRecorder()
	serve(rec)
	if rec.Header().Get(dropHeader) != "" {
		// The stand-in acted, then loses the answer: no answer to check.
		drop(t, w)
		return
	}
	if op := route.Operation; op.Responses.Status(rec.Code) != nil || op.Responses.Default() != nil {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{MultiError: true}}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s: the stand-in's %d answer to %s does not fit %s: %v\nbody: %s", s.file, rec.Code, r.URL.Path, route.Operation.OperationID, err, rec.Body.Bytes())
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// reporter is where validate reports a mismatch (a *testing.T; a
// recorder in the test that shows validate catches one).
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// dropHeader, set by a stand-in on its answer, makes validate cut the
// connection instead of answering (the write happened; its answer is lost).
const dropHeader = "X-Standin-Drop"

// authenticate passes a security requirement the request meets: an API key
// header present, a bearer token for OAuth 2 (a HubSpot private app's token
// is sent as one); the stand-in checks the value itself.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r, sc := in.RequestValidationInput.Request, in.SecurityScheme
	switch {
	case sc.Type == "apiKey" && sc.In == "header":
		if r.Header.Get(sc.Name) != "" {
			return nil
		}
	case sc.Type == "oauth2", sc.Type == "http" && strings.EqualFold(sc.Scheme, "bearer"):
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
			return nil
		}
	}
	return fmt.Errorf("no %s credential (%s %s)", in.SecuritySchemeName, sc.Type, sc.Name)
}

// requestSchema is the JSON body schema of the spec's method path.
func requestSchema(doc *openapi3.T, method, path string) (*openapi3.Schema, error) {
	item := doc.Paths.Find(path)
	if item == nil || item.GetOperation(method) == nil {
		return nil, fmt.Errorf("%s %s is not in the spec", method, path)
	}
	rb := item.GetOperation(method).RequestBody
	if rb == nil || rb.Value == nil || rb.Value.Content.Get("application/json") == nil {
		return nil, fmt.Errorf("%s %s has no JSON body", method, path)
	}
	return rb.Value.Content.Get("application/json").Schema.Value, nil
}

// Pipedrive's v2 "Add a new person" body schema lists "title" as required:
// its reference page (developers.pipedrive.com/docs/api/v1/Persons#addPerson)
// and the v1 schema require "name", and a person has no title.
func pipedrivePersonNameRequired(doc *openapi3.T) error {
	s, err := requestSchema(doc, http.MethodPost, "/persons")
	if err != nil {
		return err
	}
	if len(s.Required) != 1 || s.Required[0] != "title" {
		return errors.New("POST /persons no longer requires title: drop this erratum")
	}
	s.Required = []string{"name"}
	return nil
}

// Pipedrive's v1 document declares its API token as the query parameter
// api_token only; Pipedrive's authentication guide (pipedrive.readme.io/
// docs/core-api-concepts-authentication) takes it in the x-api-token header
// too, as the v2 document declares, and handoff sends it there so the
// token never sits in a URL (logged by proxies).
func pipedriveTokenHeader(doc *openapi3.T) error {
	sc := doc.Components.SecuritySchemes["api_key"]
	if sc == nil || sc.Value == nil || sc.Value.In != "query" || sc.Value.Name != "api_token" {
		return errors.New("api_key is no longer the api_token query parameter: drop this erratum")
	}
	sc.Value.In, sc.Value.Name = "header", "x-api-token"
	return nil
}

func hubSpotSpecs(t testing.TB) []*apiSpec {
	return []*apiSpec{
		loadSpec(t, "hubspot-contacts-v3.json"),
		loadSpec(t, "hubspot-deals-v3.json"),
		loadSpec(t, "hubspot-associations-v4.json"),
	}
}

func pipedriveSpecs(t testing.TB) []*apiSpec {
	return []*apiSpec{
		loadSpec(t, "pipedrive-v2.json", pipedrivePersonNameRequired),
		loadSpec(t, "pipedrive-v1.json", pipedriveTokenHeader),
	}
}

// specFor is the spec of specs that has r's operation, nil when none has.
func specFor(specs []*apiSpec, r *http.Request) *apiSpec {
	for _, s := range specs {
		if s.matches(r) {
			return s
		}
	}
	return nil
}

// caught records what validate reports.
type caught struct{ errs []string }

func (c *caught) Helper() {}
func (c *caught) Errorf(format string, args ...any) {
	if e := fmt.Sprintf(format, args...); !strings.Contains(e, "the stand-in's") { // the request's, not the canned answer's
		c.errs = append(c.errs, e)
	}
}

// TestSpecsCatchOffSpecRequests shows the specs are no formality: requests
// off the published shape are reported, the ones handoff sends are not.
func TestSpecsCatchOffSpecRequests(t *testing.T) {
	hs, pd := hubSpotSpecs(t), pipedriveSpecs(t)
	ok := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{}`)
	}
	for _, c := range []struct {
		name, method, target, auth, body string
		specs                            []*apiSpec
		bad                              bool
	}{
		{"hubspot upsert", "POST", "/crm/v3/objects/contacts/batch/upsert", "Bearer pat", `{"inputs":[{"idProperty":"k","id":"web:c1","properties":{"k":"web:c1"}}]}`, hs, false},
		{"hubspot upsert, a number property", "POST", "/crm/v3/objects/contacts/batch/upsert", "Bearer pat", `{"inputs":[{"idProperty":"k","id":"web:c1","properties":{"k":1}}]}`, hs, true},
		{"hubspot upsert, no id", "POST", "/crm/v3/objects/contacts/batch/upsert", "Bearer pat", `{"inputs":[{"idProperty":"k","properties":{}}]}`, hs, true},
		{"hubspot upsert, no token", "POST", "/crm/v3/objects/contacts/batch/upsert", "", `{"inputs":[]}`, hs, true},
		{"pipedrive search", "GET", "/api/v2/persons/search?term=ho_x&fields=custom_fields&exact_match=true&limit=2", "x", "", pd, false},
		{"pipedrive search, no term", "GET", "/api/v2/persons/search?fields=custom_fields", "x", "", pd, true},
		{"pipedrive search, a field it has not", "GET", "/api/v2/persons/search?term=ho_x&fields=reference", "x", "", pd, true},
		{"pipedrive person, no name", "POST", "/api/v2/persons", "x", `{"owner_id":7}`, pd, true},
		{"pipedrive person, owner as text", "POST", "/api/v2/persons", "x", `{"name":"Ada","owner_id":"7"}`, pd, true},
		{"pipedrive lead", "POST", "/v1/leads", "x", `{"title":"Ada (handoff)","person_id":100}`, pd, false},
		{"pipedrive lead, no title", "POST", "/v1/leads", "x", `{"person_id":100}`, pd, true},
		{"pipedrive lead, no token", "POST", "/v1/leads", "", `{"title":"Ada","person_id":100}`, pd, true},
	} {
		r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		if c.body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		if strings.HasPrefix(c.auth, "Bearer") {
			r.Header.Set("Authorization", c.auth)
		} else if c.auth != "" {
			r.Header.Set("x-api-token", c.auth)
		}
		s := specFor(c.specs, r)
		if s == nil {
			t.Errorf("%s: no spec has %s %s", c.name, c.method, c.target)
			continue
		}
		var got caught
		s.validate(&got, httptest.NewRecorder(), r, []byte(c.body), ok)
		if reported := len(got.errs) > 0; reported != c.bad {
			t.Errorf("%s: reported %v, want %v: %q", c.name, reported, c.bad, got.errs)
		}
	}
}
