package review

import (
	"context"
	"fmt"
	"strings"

	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/store"
)

// Once a lead's reply window closed (window.go), the way out its provider
// documents is an approved message template: a person answers the waiting
// draft with one of the channel's provider's templates (config: a whatsapp
// provider's templates) instead of its text. It is the draft's answer, as
// an approval is: the same outbox row id ("<conversation id>:<draft id>"),
// the same turn ended, the same undo hold, so a draft is answered once,
// by its text or by a template, never both.

// TemplateChoice is the template a person chose for a draft, by name;
// Params, when given, fill its body's parameters instead of the ones the
// config names (as many as it has).
type TemplateChoice struct {
	Name   string
	Params []string
}

// TemplateError refuses a template the draft's provider does not have, or
// parameters that do not fit it.
type TemplateError struct {
	Draft    string
	Provider string
	Name     string
	Why      string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("template %q cannot answer draft %s through provider %s: %s", e.Name, e.Draft, e.Provider, e.Why)
}

// SendTemplateTx answers draft id with the template choice names, of its
// channel's provider, inside tx: ApproveTx with the template sent instead
// of the draft's text, whatever the window. A draft already approved is
// answered as ApproveTx answers it (nothing is written); a template the
// provider does not have is a *TemplateError.
func (r *Review) SendTemplateTx(tx *store.Tx, id string, choice TemplateChoice, dec store.Decision, jobID string) (Approved, error) {
	return r.approveTx(tx, id, dec, jobID, r.cfg.UndoWindow, &choice)
}

// SendTemplate is SendTemplateTx in a transaction of its own, with a
// fresh job id.
func (r *Review) SendTemplate(ctx context.Context, id string, choice TemplateChoice, dec store.Decision) (Approved, error) {
	var out Approved
	jobID := r.newID()
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = r.SendTemplateTx(tx, id, choice, dec, jobID)
		return err
	})
	if err != nil {
		return Approved{}, fmt.Errorf("review: answer draft %s with template %q: %w", id, choice.Name, err)
	}
	return out, nil
}

// Templates lists the names of the templates a draft on channel may be
// answered with (none: its provider has none).
func (r *Review) Templates(channel string) []string {
	_, p, ok := r.kindOf(channel)
	if !ok {
		return nil
	}
	out := make([]string, len(p.Templates))
	for i, t := range p.Templates {
		out[i] = t.Name
	}
	return out
}

// template is the template choice names for draft d (event ev of lead h)
// through provider prov, its parameters filled in.
func (r *Review) template(d store.Draft, ev store.Event, h store.Handoff, prov string, choice TemplateChoice) (*store.OutboxTemplate, error) {
	refuse := func(why string) error {
		return &TemplateError{Draft: d.ID, Provider: prov, Name: choice.Name, Why: why}
	}
	p, ok := r.cfg.Provider(prov)
	if !ok || len(p.Templates) == 0 {
		return nil, refuse("the provider has no templates configured; reply on another channel of the lead")
	}
	t, ok := p.Template(choice.Name)
	if !ok {
		return nil, refuse("it is not one of its templates (" + strings.Join(r.Templates(d.Channel), ", ") + ")")
	}
	params := choice.Params
	if len(params) == 0 {
		params = make([]string, len(t.Parameters))
		for i, s := range t.Parameters {
			if s == kinds.NameParameter {
				s = templateName(ev, h)
			}
			params[i] = s
		}
	}
	if len(params) != len(t.Parameters) {
		return nil, refuse(fmt.Sprintf("it takes %d parameters, and %d were given", len(t.Parameters), len(params)))
	}
	for i, s := range params {
		if why := kinds.TemplateParameterProblem(s); why != "" {
			return nil, refuse(fmt.Sprintf("parameter %d: %s", i+1, why))
		}
	}
	return &store.OutboxTemplate{Name: t.Name, Language: t.Language, Params: params}, nil
}

// templateName is the lead's name as a template's {name} gets it: the
// message's, else the lead's, else "there" (the name a parameter cannot
// leave empty).
func templateName(ev store.Event, h store.Handoff) string {
	for _, s := range []string{ev.Name, h.Name} {
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			return s
		}
	}
	return "there"
}

// TemplateText is how a template answer reads where a reply's text is
// shown (the draft's decision, the outbox row): "template follow_up
// (en_US): Ada, our spring offer".
func TemplateText(t store.OutboxTemplate) string {
	out := "template " + t.Name + " (" + t.Language + ")"
	if len(t.Params) > 0 {
		out += ": " + strings.Join(t.Params, ", ")
	}
	return out
}
