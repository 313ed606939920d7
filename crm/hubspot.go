package crm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// UpsertPath is HubSpot's CRM v3 contacts batch upsert, ContactPath one
// contact (GET /crm/v3/objects/contacts/{contactId}: the owner read back).
const (
	UpsertPath  = "/crm/v3/objects/contacts/batch/upsert"
	ContactPath = "/crm/v3/objects/contacts/"
)

// PropOwner is HubSpot's contact owner property.
const PropOwner = "hubspot_owner_id"

// The contact properties a write sets besides HubSpot's own (phone, email,
// firstname, lastname, hubspot_owner_id), the id and status properties
// being crm[].id_property and crm[].status_property. The portal defines
// them (single-line text; id_property with unique values).
const (
	PropLastMessage = "handoff_last_message"
	PropLink        = "handoff_link"
)

// UpsertRequest is the batch upsert's body (one input: one lead).
type UpsertRequest struct {
	Inputs []UpsertInput `json:"inputs"`
}

// UpsertInput is one record: found by IDProperty = ID, or created with it.
type UpsertInput struct {
	IDProperty string            `json:"idProperty"`
	ID         string            `json:"id"`
	Properties map[string]string `json:"properties"`
}

// UpsertAnswer is what HubSpot answers: 200 with results (COMPLETE), or
// 207 with results and errors.
type UpsertAnswer struct {
	Status  string `json:"status"`
	Results []struct {
		ID  string `json:"id"`
		New bool   `json:"new"`
	} `json:"results"`
	Errors []struct {
		Status   string `json:"status"`
		Category string `json:"category"`
		Message  string `json:"message"`
	} `json:"errors"`
	// Message and Category are an error answer's (4xx, 5xx).
	Message  string `json:"message"`
	Category string `json:"category"`
}

type hubspot struct {
	name, base, url, token, idProp, statusProp string
	// dealProp, pipeline, stage: crm[].deal_id_property and its deal's
	// pipeline and stage; dealProp "" gives no deal.
	dealProp, pipeline, stage string
	call                      *provider.Caller
	st                        *store.Store
}

func newHubSpot(m config.CRM, st *store.Store) *hubspot {
	return &hubspot{name: m.ProviderName(), base: m.APIBase, url: m.APIBase + UpsertPath, token: m.Token, idProp: m.IDProperty, statusProp: m.StatusProperty,
		dealProp: m.DealIDProperty, pipeline: m.DealPipeline, stage: m.DealStage, call: provider.NewCaller(m.ProviderName(), m.Timeout), st: st}
}

// The deal's calls (crm[].deal_id_property): the deals batch upsert and
// the default contact-to-deal association, deals and contacts named by
// their object type ids as HubSpot's published documents name them.
const (
	DealUpsertPath = "/crm/v3/objects/0-3/batch/upsert"
	AssociatePath  = "/crm/v4/objects/0-1/%s/associations/default/0-3/%s"
)

// DealInput is lead r's deal as one upsert input, keyed by the lead key in
// the deal's own unique property: its name, pipeline and stage, and its
// owner when the write names one.
func (h *hubspot) DealInput(r Record) UpsertInput {
	name := strings.TrimSpace(r.Name)
	if name == "" {
		name = r.Lead
	}
	p := map[string]string{h.dealProp: r.Lead, "dealname": name + " (handoff)", "pipeline": h.pipeline, "dealstage": h.stage}
	if r.OwnerID != "" {
		p[PropOwner] = r.OwnerID
	}
	return UpsertInput{IDProperty: h.dealProp, ID: r.Lead, Properties: p}
}

// deal upserts lead r's deal and associates it with contact: once per
// lead, by the lead's first write to reach the record (no earlier write of
// the lead is sent: later writes leave the deal, and the stage a person
// moved it to, alone). Both calls are safe to resend: the upsert finds the
// deal by our property, the default association is the same pair.
func (h *hubspot) deal(ctx context.Context, rowID, contact string, r Record) (string, error) {
	if h.dealProp == "" || earlierSent(h.st, rowID) != "" {
		return "", nil
	}
	id, err := h.upsert(ctx, h.base+DealUpsertPath, h.DealInput(r), "deal")
	if err != nil {
		return "", err
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+h.token)
	hdr.Set("Accept", "application/json")
	a, err := h.call.Do(ctx, http.MethodPut, h.base+fmt.Sprintf(AssociatePath, url.PathEscape(contact), url.PathEscape(id)), hdr, nil)
	if err != nil {
		return "", err
	}
	if err := Judge(h.name+" associate the deal", h.call, a, nil); err != nil {
		return "", err
	}
	return id, nil
}

// Input is r as one upsert input: what is unknown is left out rather than
// blanked, so a later write never erases what an earlier one (or a person
// in HubSpot) put there.
func (h *hubspot) Input(r Record) UpsertInput {
	p := map[string]string{h.idProp: r.Lead, h.statusProp: StatusValue(r)}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	first, last, _ := strings.Cut(strings.TrimSpace(r.Name), " ")
	set("firstname", first)
	set("lastname", strings.TrimSpace(last))
	set("phone", r.Phone)
	set("email", r.Email)
	set(PropOwner, r.OwnerID)
	set(PropLastMessage, r.LastMessage)
	set(PropLink, r.Link)
	return UpsertInput{IDProperty: h.idProp, ID: r.Lead, Properties: p}
}

func (h *hubspot) send(ctx context.Context, rowID string, r Record) (string, error) {
	contact, err := h.upsert(ctx, h.url, h.Input(r), "contact")
	if err != nil {
		return "", err
	}
	deal, err := h.deal(ctx, rowID, contact, r)
	if err != nil {
		// The contact is written, the deal not known to be: the job
		// resends the whole write, every call of it the same again.
		return "", err
	}
	if deal != "" {
		return "contact " + contact + " deal " + deal, nil
	}
	return "contact " + contact, nil
}

// upsert sends one batch upsert input to url and returns the object's id.
func (h *hubspot) upsert(ctx context.Context, url string, in UpsertInput, what string) (string, error) {
	body, err := json.Marshal(UpsertRequest{Inputs: []UpsertInput{in}})
	if err != nil {
		return "", &provider.Permanent{Err: err}
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Authorization", "Bearer "+h.token)
	a, err := h.call.Do(ctx, http.MethodPost, url, hdr, body)
	if err != nil {
		return "", err
	}
	var ans UpsertAnswer
	decodeErr := json.Unmarshal(a.Body, &ans)
	if err := Judge(h.name+" "+what, h.call, a, func(provider.Answer) string {
		if ans.Message != "" {
			return strings.TrimSpace(ans.Category + " " + ans.Message)
		}
		return ""
	}); err != nil {
		return "", err
	}
	if len(ans.Errors) > 0 {
		// 207: this one input was refused (a property the portal lacks, a
		// value it will not take); resending the same will not help.
		e := ans.Errors[0]
		return "", &provider.Permanent{Status: a.Status, Err: fmt.Errorf("%s: the %s upsert was refused: %s %s", h.name, what, e.Category, e.Message)}
	}
	if a.ReadErr != nil || decodeErr != nil || len(ans.Results) == 0 || ans.Results[0].ID == "" {
		// Accepted, but the answer is lost: the object is likely written;
		// resending is the same upsert, so the job resends.
		return "", &provider.Ambiguous{Status: a.Status, Err: fmt.Errorf("%s: answered %d without a readable %s id: %s", h.name, a.Status, what, provider.Excerpt(a.Body))}
	}
	return ans.Results[0].ID, nil
}

// owner reads the contact's hubspot_owner_id back after a write (a
// workflow or HubSpot's own assignment may have set it): "" when it has
// none. A read: it changes nothing, so any failure only means "not known".
func (h *hubspot) owner(ctx context.Context, providerID string, _ Record) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "contact ")
	id, _, _ := strings.Cut(rest, " ") // "contact <id>[ deal <id>]"
	if !ok || id == "" {
		return "", nil
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+h.token)
	hdr.Set("Accept", "application/json")
	a, err := h.call.Do(ctx, http.MethodGet, h.base+ContactPath+url.PathEscape(id)+"?properties="+PropOwner, hdr, nil)
	if err != nil {
		return "", err
	}
	if err := Judge(h.name+" read owner", h.call, a, nil); err != nil {
		return "", err
	}
	var c struct {
		Properties map[string]*string `json:"properties"`
	}
	if err := json.Unmarshal(a.Body, &c); err != nil || a.ReadErr != nil {
		return "", fmt.Errorf("%s: read owner: unreadable answer: %s", h.name, provider.Excerpt(a.Body))
	}
	if v := c.Properties[PropOwner]; v != nil {
		return strings.TrimSpace(*v), nil
	}
	return "", nil
}

// lookup: never needed (a resend is safe), so not offered.
func (h *hubspot) lookup(context.Context, string, Record) (string, bool, error) {
	return "", false, nil
}

// caps: an upsert by our unique property is the same write every time.
func (h *hubspot) caps() provider.Capabilities {
	return provider.Capabilities{IdempotencyKey: true, Timeout: h.call.Timeout()}
}
