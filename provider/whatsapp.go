package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/handoff/handoff/provider/kinds"
)

func init() { register(kinds.WhatsApp, newWhatsApp) }

// whatsappAPI is the Graph API the Cloud API lives on.
const whatsappAPI = "https://graph.facebook.com"

// whatsappVersion is the Graph API version this kind was written against.
const whatsappVersion = "v21.0"

// WhatsApp sends a text message (or an approved template, Message.Template)
// through the Cloud API: a bearer token,
// {"messaging_product":"whatsapp","to":…,"type":"text","text":{"body":…}},
// our reference in biz_opaque_callback_data (echoed on every status
// webhook), the id at messages[0].id.
type WhatsApp struct {
	apiKind
	cfg  kinds.Provider
	url  string
	auth string // never formatted
}

func newWhatsApp(cfg kinds.Provider, d Deps) (Provider, error) {
	if cfg.PhoneNumberID == "" || cfg.Token == "" {
		return nil, errors.New("whatsapp: phone_number_id and token_env are required")
	}
	return &WhatsApp{
		apiKind: newAPIKind(cfg, d),
		cfg:     cfg,
		url:     base(cfg, whatsappAPI) + "/" + whatsappVersion + "/" + url.PathEscape(cfg.PhoneNumberID) + "/messages",
		auth:    "Bearer " + cfg.Token,
	}, nil
}

// Capabilities: receipts, which carry our reference.
func (w *WhatsApp) Capabilities() Capabilities { return w.caps(true) }

// whatsappLater are Cloud API error codes that mean "not accepted, send
// later": 4 and 80007 (application/account rate limits), 130429
// (throughput reached), 131048 (spam rate limit), 131056 (pair rate limit).
var whatsappLater = map[int]bool{4: true, 80007: true, 130429: true, 131048: true, 131056: true}

// whatsappUnknown are codes of a failure on Meta's side, where the
// message may have gone: 1 and 2 (unknown/temporary), 131000 (something
// went wrong), 131016 (service unavailable).
var whatsappUnknown = map[int]bool{1: true, 2: true, 131000: true, 131016: true}

var whatsappCodes = graphCodes{later: whatsappLater, unknown: whatsappUnknown, explain: whatsappExplain}

// whatsappExplain says what 131047 means to a person: the reply went past
// the 24-hour customer service window (the kind refuses such a reply
// unsent when it knows the customer's last message; Meta says it when not).
func whatsappExplain(e graphError) string {
	if e.Code == 131047 {
		return "code 131047: more than 24 hours have passed since the customer last wrote, so WhatsApp takes no free-form reply; send one of the approved templates or reply on another channel of the lead"
	}
	return ""
}

type whatsappText struct {
	MessagingProduct string            `json:"messaging_product"`
	RecipientType    string            `json:"recipient_type"`
	To               string            `json:"to"`
	Type             string            `json:"type"`
	Text             *whatsappBody     `json:"text,omitempty"`
	Template         *whatsappTemplate `json:"template,omitempty"`
	// BizOpaqueCallbackData is echoed on the status webhooks of text and
	// template messages alike.
	BizOpaqueCallbackData string `json:"biz_opaque_callback_data,omitempty"`
}

type whatsappBody struct {
	PreviewURL bool   `json:"preview_url"`
	Body       string `json:"body"`
}

// whatsappTemplate is a template message's template object: its name, its
// language ({"code":…}) and the body component's text parameters.
type whatsappTemplate struct {
	Name     string `json:"name"`
	Language struct {
		Code string `json:"code"`
	} `json:"language"`
	Components []whatsappComponent `json:"components,omitempty"`
}

type whatsappComponent struct {
	Type       string          `json:"type"`
	Parameters []whatsappParam `json:"parameters"`
}

type whatsappParam struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Send posts one text message, or the template m names: a free-form text
// past the 24-hour customer service window is refused unsent (Meta would
// answer 131047), a template goes at any time.
func (w *WhatsApp) Send(ctx context.Context, m Message) (string, error) {
	if err := windowShut(kinds.WhatsApp, w.cfg, m, w.window()); err != nil {
		return "", err
	}
	msg := whatsappText{MessagingProduct: "whatsapp", RecipientType: "individual", To: m.To, Type: "text", BizOpaqueCallbackData: m.Ref}
	if t := m.Template; t != nil {
		msg.Type, msg.Template = "template", &whatsappTemplate{Name: t.Name}
		msg.Template.Language.Code = t.Language
		if len(t.Params) > 0 {
			body := whatsappComponent{Type: "body", Parameters: make([]whatsappParam, len(t.Params))}
			for i, p := range t.Params {
				body.Parameters[i] = whatsappParam{Type: "text", Text: p}
			}
			msg.Template.Components = []whatsappComponent{body}
		}
	} else {
		msg.Text = &whatsappBody{Body: m.Text}
	}
	a, err := w.w.postJSON(ctx, w.name, w.url, w.auth, msg)
	if err != nil {
		return "", err
	}
	var ans struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
		Error graphError `json:"error"`
	}
	_ = json.Unmarshal(a.Body, &ans)
	if a.Status == http.StatusOK {
		if len(ans.Messages) == 0 || ans.Messages[0].ID == "" {
			// Accepted, but the id was lost: the status webhook will
			// bring it, with our reference.
			return "", w.w.lostID(a, "messages[0].id")
		}
		return ans.Messages[0].ID, nil
	}
	// 400 (131026 undeliverable, 131047 outside the 24h window, 100 bad
	// parameter), 401 (190 expired token), 403 (10, 200 permission) are
	// permanent.
	return "", w.w.graphRefused(a, ans.Error, whatsappCodes)
}
