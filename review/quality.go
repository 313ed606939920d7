package review

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/handoff/handoff/quality"
	"github.com/handoff/handoff/store"
)

// GuardInput is what a draft's guards compare its reply with: the
// client's facts the draft was written from (the text of its facts
// version), the customer's messages of the turn, the earlier conversation
// (messages and the replies sent), and the contact.
type GuardInput struct {
	Channel      string
	Facts        string
	Customer     string
	Conversation []string
	Contact      string
}

// Guard checks reply before a person sees it: its language against the
// customer's (flagged only when both are long enough and detected
// reliably), and its figures against the facts version the draft was
// written from and the conversation (quality.Unsupported). The result is stored on the draft;
// a flagged draft is never auto-approved (AutoApproveTx).
func (r *Review) Guard(reply string, in GuardInput) *store.Guards {
	lang := quality.CompareLanguages(in.Customer, reply)
	g := &store.Guards{CustomerLanguage: lang.Customer, ReplyLanguage: lang.Reply, LanguageDiffers: lang.Differs}
	sources := append([]string{in.Facts, in.Customer, in.Contact}, in.Conversation...)
	for _, f := range quality.Unsupported(reply, sources...) {
		g.Figures = append(g.Figures, store.GuardFigure{Kind: f.Kind, Text: f.Text})
	}
	return g
}

// GuardWords is the guards' finding in one sentence; "" when nothing is flagged.
func GuardWords(g *store.Guards) string {
	if !g.Flagged() {
		return ""
	}
	var parts []string
	if g.LanguageDiffers {
		parts = append(parts, fmt.Sprintf("the customer wrote in %s and the reply is in %s", quality.LanguageName(g.CustomerLanguage), quality.LanguageName(g.ReplyLanguage)))
	}
	if len(g.Figures) > 0 {
		figs := make([]string, len(g.Figures))
		for i, f := range g.Figures {
			figs[i] = fmt.Sprintf("%q (%s)", f.Text, f.Kind)
		}
		parts = append(parts, "the reply states "+strings.Join(figs, ", ")+", found neither in the client's facts nor in the conversation")
	}
	return strings.Join(parts, "; ")
}

// holdFlagged leaves d, flagged by its guards on a channel that approves
// its drafts itself, for a person, and says so once: on the draft (its
// guards and notes, which the card and the API show) and in the audit.
func holdFlagged(tx *store.Tx, d store.Draft, now time.Time) (store.Draft, error) {
	if d.Guards.AutoApproveHeld {
		return d, nil
	}
	old := d
	g := *d.Guards
	g.AutoApproveHeld = true
	d.Guards = &g
	note := "auto_approve left this draft for a person: " + GuardWords(d.Guards)
	d.Notes = append(slices.Clip(d.Notes), note)
	if err := tx.PutDraft(&old, &d); err != nil {
		return store.Draft{}, err
	}
	if err := tx.Audit(store.AuditEntry{At: now, Who: "auto-approve", From: "channel " + d.Channel, Action: "hold draft", Target: d.ID, Detail: note}); err != nil {
		return store.Draft{}, err
	}
	return d, nil
}

// ReasonError refuses a reason code that is not one of store.ReasonCodes.
type ReasonError struct{ Code string }

func (e *ReasonError) Error() string {
	return fmt.Sprintf("the reason code %q is not one of %s", e.Code, strings.Join(store.ReasonCodes, ", "))
}

// CheckReasonCode accepts "" (no reason given) and the codes of
// store.ReasonCodes; anything else is a *ReasonError.
func CheckReasonCode(code string) error {
	if code == "" || slices.Contains(store.ReasonCodes, code) {
		return nil
	}
	return &ReasonError{Code: code}
}

// measure sets dec's distance from the draft's text to the text approved.
func measure(d store.Draft, dec *store.Decision) {
	dist, approx := quality.Distance(d.Text, dec.Text)
	dec.Distance, dec.DistanceApprox = &dist, approx
	if !dec.Edited {
		// A reason is for an edit: one given with the draft as written
		// explains nothing.
		dec.ReasonCode, dec.Reason = "", ""
	}
}
