package crm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// Pipedrive's endpoints: persons in API v2, leads in v1 (they have no v2).
const (
	PipedriveSearch  = "/api/v2/persons/search"
	PipedrivePersons = "/api/v2/persons"
	PipedriveLeads   = "/v1/leads"
	PipedriveMe      = "/v1/users/me"
)

// Person is the part of a Pipedrive person a write sets or reads (API v2).
type Person struct {
	ID           int               `json:"id,omitempty"`
	Name         string            `json:"name,omitempty"`
	OwnerID      int               `json:"owner_id,omitempty"`
	Emails       []Contact         `json:"emails,omitempty"`
	Phones       []Contact         `json:"phones,omitempty"`
	CustomFields map[string]string `json:"custom_fields,omitempty"`
}

// Contact is one of a person's emails or phones.
type Contact struct {
	Value   string `json:"value"`
	Primary bool   `json:"primary"`
	Label   string `json:"label,omitempty"`
}

// Lead is the part of a Pipedrive lead a write sets or reads (API v1).
type Lead struct {
	ID       string `json:"id,omitempty"`
	Title    string `json:"title"`
	PersonID int    `json:"person_id"`
	OwnerID  int    `json:"owner_id,omitempty"`
}

type pipedrive struct {
	name, base, token, refField, statusField string
	settle                                   time.Duration
	call                                     *provider.Caller
	st                                       *store.Store
	// me is the API token's own user, read once (GET /v1/users/me): the
	// owner Pipedrive gives what the token creates without one, so it is
	// no owner the CRM chose.
	meMu sync.Mutex
	me   int
}

func newPipedrive(m config.CRM, st *store.Store) *pipedrive {
	return &pipedrive{name: m.ProviderName(), base: m.APIBase, token: m.Token, refField: m.ReferenceField, statusField: m.StatusField,
		settle: m.LookupSettle, call: provider.NewCaller(m.ProviderName(), m.Timeout), st: st}
}

// caps: Pipedrive has no idempotency key and a create is not an upsert, so
// a write whose outcome is unknown is looked up (by the person a previous
// write found, else by our reference in the search, which counts only
// lookup_settle after the write: the search index lags), never resent blind.
func (p *pipedrive) caps() provider.Capabilities {
	return provider.Capabilities{Lookup: true, Timeout: p.call.Timeout(), LookupSettle: p.settle}
}

// send finds the person (search before create), updates or creates it, and
// gives it a lead if it has none. Until the first write every failure is
// *provider.NotSent: nothing was changed.
func (p *pipedrive) send(ctx context.Context, rowID string, r Record) (string, error) {
	person, err := p.find(ctx, rowID, r)
	if err != nil {
		return "", notSent(err)
	}
	body := p.person(r, person == nil)
	var got Person
	if person == nil {
		err = p.do(ctx, http.MethodPost, PipedrivePersons, body, &got)
	} else {
		err = p.do(ctx, http.MethodPatch, PipedrivePersons+"/"+strconv.Itoa(person.ID), body, &got)
	}
	if err != nil {
		return "", err
	}
	if got.ID == 0 {
		return "", &provider.Ambiguous{Err: fmt.Errorf("%s: the person was written but its id is not in the answer", p.name)}
	}
	lead, err := p.lead(ctx, got.ID)
	if err != nil {
		return "", written(err)
	}
	if lead == "" {
		var l Lead
		title := r.Name
		if title == "" {
			title = r.Lead
		}
		if err := p.do(ctx, http.MethodPost, PipedriveLeads, Lead{Title: title + " (handoff)", PersonID: got.ID, OwnerID: atoi(r.OwnerID)}, &l); err != nil {
			return "", written(err)
		}
		if lead = l.ID; lead == "" {
			return "", &provider.Ambiguous{Err: fmt.Errorf("%s: the lead was written but its id is not in the answer", p.name)}
		}
	}
	return fmt.Sprintf("person %d lead %s", got.ID, lead), nil
}

// owner reads the person's owner back after a write: its owner_id when
// it is a user other than the API token's own (whom Pipedrive makes the
// owner of a person created without one), so an owner set in Pipedrive by
// a person, an automation or an assignment rule; "" otherwise. Reads only.
func (p *pipedrive) owner(ctx context.Context, providerID string, _ Record) (string, error) {
	id := personOf(providerID)
	if id == 0 {
		return "", nil
	}
	var got Person
	if err := p.do(ctx, http.MethodGet, PipedrivePersons+"/"+strconv.Itoa(id), nil, &got); err != nil {
		return "", err
	}
	if got.OwnerID == 0 {
		return "", nil
	}
	me, err := p.self(ctx)
	if err != nil || got.OwnerID == me {
		return "", err
	}
	return strconv.Itoa(got.OwnerID), nil
}

// self is the API token's user id, asked once.
func (p *pipedrive) self(ctx context.Context) (int, error) {
	p.meMu.Lock()
	defer p.meMu.Unlock()
	if p.me != 0 {
		return p.me, nil
	}
	var u struct {
		ID int `json:"id"`
	}
	if err := p.do(ctx, http.MethodGet, PipedriveMe, nil, &u); err != nil {
		return 0, err
	}
	if u.ID == 0 {
		return 0, fmt.Errorf("%s: %s answered no user id", p.name, PipedriveMe)
	}
	p.me = u.ID
	return u.ID, nil
}

// lookup reports whether the record holds r's write: the person found by
// our reference has r's status and a lead.
func (p *pipedrive) lookup(ctx context.Context, rowID string, r Record) (string, bool, error) {
	person, err := p.find(ctx, rowID, r)
	if err != nil || person == nil {
		return "", false, err
	}
	if person.CustomFields[p.statusField] != StatusValue(r) {
		return "", false, nil
	}
	lead, err := p.lead(ctx, person.ID)
	if err != nil || lead == "" {
		return "", false, err
	}
	return fmt.Sprintf("person %d lead %s", person.ID, lead), true, nil
}

// find is the person of r's lead, nil when Pipedrive has none: the one an
// earlier write of the lead found or created (read by id: no index lag),
// else the one the search finds by our reference.
func (p *pipedrive) find(ctx context.Context, rowID string, r Record) (*Person, error) {
	if id := personOf(earlierSent(p.st, rowID)); id > 0 {
		var got Person
		err := p.do(ctx, http.MethodGet, PipedrivePersons+"/"+strconv.Itoa(id), nil, &got)
		var perm *provider.Permanent
		switch {
		case err == nil && got.CustomFields[p.refField] == r.Ref:
			return &got, nil
		case err == nil, errors.As(err, &perm) && perm.Status == http.StatusNotFound:
			// Deleted in Pipedrive, or its reference changed: search.
		default:
			return nil, err
		}
	}
	q := url.Values{"term": {r.Ref}, "fields": {"custom_fields"}, "exact_match": {"true"}, "limit": {"2"}}
	var found struct {
		Items []struct {
			Item struct {
				ID int `json:"id"`
			} `json:"item"`
		} `json:"items"`
	}
	if err := p.do(ctx, http.MethodGet, PipedriveSearch+"?"+q.Encode(), nil, &found); err != nil {
		return nil, err
	}
	if len(found.Items) == 0 {
		// "Not found" proves nothing while an earlier write of the lead
		// whose outcome is unknown may still be on its way into the index.
		if wait := p.unsettled(rowID); wait > 0 {
			return nil, &provider.NotSent{Err: fmt.Errorf("%s: the search has no person for lead %s yet, which proves nothing until an earlier write's outcome settles", p.name, r.Lead), RetryAfter: wait}
		}
		return nil, nil
	}
	// The search names the person; its fields are read by id.
	var got Person
	if err := p.do(ctx, http.MethodGet, PipedrivePersons+"/"+strconv.Itoa(found.Items[0].Item.ID), nil, &got); err != nil {
		return nil, err
	}
	if got.CustomFields[p.refField] != r.Ref {
		return nil, nil // the search matched another field's words
	}
	return &got, nil
}

// unsettled is how long until the search's "not found" counts for rowID's
// lead: lookup_settle (after the call's timeout) from the last attempt of
// an earlier write of the lead whose outcome was unknown, 0 when none is
// that recent. A later write must not create a second person because the
// first one's may not be searchable yet.
func (p *pipedrive) unsettled(rowID string) time.Duration {
	var last time.Time
	for _, id := range around(p.st, rowID, true) {
		o, err := p.st.OutboxRow(id)
		if err != nil || o.Status == store.OutboxSent {
			continue
		}
		for _, a := range o.Attempts {
			if a.Outcome == "ambiguous" && a.At.After(last) {
				last = a.At
			}
		}
	}
	if last.IsZero() {
		return 0
	}
	return time.Until(last.Add(p.call.Timeout() + p.settle))
}

// lead is the id of a lead of person, "" when it has none.
func (p *pipedrive) lead(ctx context.Context, person int) (string, error) {
	var ls []Lead
	if err := p.do(ctx, http.MethodGet, PipedriveLeads+"?person_id="+strconv.Itoa(person)+"&limit=1", nil, &ls); err != nil {
		return "", err
	}
	if len(ls) == 0 {
		return "", nil
	}
	return ls[0].ID, nil
}

// person is r as the person's fields; a new person needs a name.
func (p *pipedrive) person(r Record, create bool) Person {
	out := Person{Name: r.Name, OwnerID: atoi(r.OwnerID), CustomFields: map[string]string{p.refField: r.Ref, p.statusField: StatusValue(r)}}
	if out.Name == "" && create {
		out.Name = r.Lead
	}
	if r.Email != "" {
		out.Emails = []Contact{{Value: r.Email, Primary: true}}
	}
	if r.Phone != "" {
		out.Phones = []Contact{{Value: r.Phone, Primary: true}}
	}
	return out
}

// do makes one call and decodes its data into into; a refusal is sorted
// by Judge, a 2xx whose body cannot be read is ambiguous.
func (p *pipedrive) do(ctx context.Context, method, path string, body, into any) error {
	var b []byte
	hdr := http.Header{}
	hdr.Set("x-api-token", p.token)
	hdr.Set("Accept", "application/json")
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return &provider.Permanent{Err: err}
		}
		hdr.Set("Content-Type", "application/json")
	}
	a, err := p.call.Do(ctx, method, p.base+path, hdr, b)
	if err != nil {
		return err
	}
	var ans struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
		Error   string          `json:"error"`
	}
	derr := json.Unmarshal(a.Body, &ans)
	if err := Judge(p.name+" "+method+" "+strings.SplitN(path, "?", 2)[0], p.call, a, func(provider.Answer) string { return ans.Error }); err != nil {
		return err
	}
	if a.ReadErr != nil || derr != nil || !ans.Success {
		return &provider.Ambiguous{Status: a.Status, Err: fmt.Errorf("%s: %s answered %d without a readable result: %s", p.name, method, a.Status, provider.Excerpt(a.Body))}
	}
	if string(ans.Data) == "null" {
		return nil
	}
	if err := json.Unmarshal(ans.Data, into); err != nil {
		return &provider.Ambiguous{Status: a.Status, Err: fmt.Errorf("%s: %s: unexpected data: %w", p.name, method, err)}
	}
	return nil
}

// notSent is a failure before anything was written: reads change nothing,
// so whatever the read's own outcome, the write was not made (a refusal
// such as a bad token stays permanent).
func notSent(err error) error {
	var ns *provider.NotSent
	var perm *provider.Permanent
	if errors.As(err, &ns) || errors.As(err, &perm) {
		return err // a refusal that a resend will not change stays one
	}
	return &provider.NotSent{Err: err}
}

// written is a failure after the person was written: the record holds part
// of the write, so the outcome is unknown (the job looks it up).
func written(err error) error {
	var ns *provider.NotSent
	var perm *provider.Permanent
	if errors.As(err, &ns) || errors.As(err, &perm) {
		return &provider.Ambiguous{Err: fmt.Errorf("the person was written, then: %w", err)}
	}
	return err
}

// personOf reads the person's id from a write's answer ("person 12 lead …").
func personOf(providerID string) int {
	rest, ok := strings.CutPrefix(providerID, "person ")
	if !ok {
		return 0
	}
	id, _, _ := strings.Cut(rest, " ")
	return atoi(id)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
