// Package approvals lets a person decide a draft where they already are:
// Slack, Telegram (this branch), an email reply and a push (email*.go,
// ntfy*.go). Every surface decides through review exactly as the
// dashboard does — ApproveTx, RejectTx, UndoTx, in one write transaction
// that also checks the person's client scope — so an approval on any
// surface is the draft's one approval: the same outbox id, one reply
// however many surfaces are clicked.
//
//	draft saved (pending) ──sweep──▶ card placeholder + announce job ──▶ Surface.Post ──▶ card ref stored
//	decision (any surface, dashboard, a newer message) ──▶ follow job (enqueued by Decide, or by the sweep
//	                                                        when a card's Shown differs) ──▶ Updater.Update
//	draft waiting past remind_after / escalate_after / its window's warning ──sweep──▶ reminder record +
//	                                                        remind job per surface (one tx) ──▶ Reminder.Remind
//	lead erased ──▶ card marked erased ──sweep──▶ follow job ──▶ Deleter.Delete, the card deleted
//
// A surface is a Surface (it posts a card for a draft) and, when its
// cards can change, an Updater; when it can post reminders, a Reminder;
// when it can find a card whose post had no answer, a Finder (Slack; a
// PostsOnce surface without one marks such a card uncertain); when it takes requests (a button's
// callback, a webhook), an Inbound, which web mounts at POST
// /surfaces/{name}[/…]. A surface resolves the person (Person), then calls
// Decide; refusals are *Refusal, whose Sentence every surface shows as is.
package approvals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// The surfaces' names: a Decision's Via, a card's Surface, a job's key.
const (
	ViaSlack    = "slack"
	ViaTelegram = "telegram"
	ViaEmail    = "email"
	ViaNtfy     = "ntfy"
)

// Surface is where drafts are announced: it posts a draft's card.
type Surface interface {
	// Name is the surface's Via.
	Name() string
	// Chat is where the drafts of client are announced; false: they are
	// not announced on this surface.
	Chat(client string) (string, bool)
	// Post posts the card v in chat and returns the reference of the
	// posted message (a Slack ts, a Telegram message_id; "" when the
	// surface cannot change a message once sent).
	Post(ctx context.Context, chat string, v View) (ref string, err error)
}

// Updater is a Surface whose posted cards can be changed after a decision.
type Updater interface {
	Update(ctx context.Context, card store.Card, v View) error
}

// Inbound is a Surface that takes requests at POST /surfaces/{name}[/…]
// (Slack's interactions, Telegram's webhook). It verifies the request
// itself and answers within the provider's deadline; web only reads the
// body (bounded) and writes the answer.
type Inbound interface {
	Receive(ctx context.Context, r *Request) Answer
}

// Request is one inbound request to a surface.
type Request struct {
	Path     string // what follows /surfaces/{name}/, "" for /surfaces/{name}
	Header   http.Header
	Query    map[string][]string
	Body     []byte
	RemoteIP string
	Now      time.Time
}

// Answer is a surface's answer to a Request.
type Answer struct {
	Status      int
	ContentType string // default text/plain; charset=utf-8
	Body        []byte
}

// opener builds a configured surface; ok false: cfg does not configure it.
type opener func(a *Approvals) (s Surface, ok bool, err error)

// openers are the surfaces by name, each registered by its file's init.
var openers = map[string]opener{}

// register adds a surface's opener (from an init, once per name).
func register(name string, o opener) {
	if _, dup := openers[name]; dup {
		panic("approvals: surface " + name + " registered twice")
	}
	openers[name] = o
}

// Options are what the surfaces need from the process.
type Options struct {
	Now  func() time.Time // nil: time.Now
	HTTP *http.Client     // the surfaces' API calls; nil: a client with a 15 s timeout
	Log  *slog.Logger     // nil: discarded
	// Providers are the configured providers (provider.Open): the email
	// surface sends its mails through its smtp provider among them.
	Providers map[string]provider.Provider
}

// Approvals is the surfaces configured and the one way they decide.
type Approvals struct {
	st       *store.Store
	cfg      *config.Config
	review   *review.Review
	now      func() time.Time
	http     *http.Client
	log      *slog.Logger
	provs    map[string]provider.Provider
	surfaces []Surface        // by name
	wire     *provider.Caller // the surfaces' API calls that must tell "not sent" from "unknown" (http.go)
	newID    func() string
	// Wake, when set, wakes the job runner after a decision or an enqueue
	// (app sets it to the runner's, which exists after the job kinds).
	Wake func()
	// Decided, when set, hears the id of each draft a surface decided
	// (approved, written over or rejected; not an undo): the dashboard
	// ends its soft claim, so "… is looking at this draft" does not
	// outlive a decision made on Slack or Telegram (web sets it).
	Decided func(draftID string)
	bg      sync.WaitGroup // the answers sent after a request's own (Slack's response_url)
}

// New opens every surface cfg configures.
func New(st *store.Store, cfg *config.Config, o Options) (*Approvals, error) {
	a := &Approvals{st: st, cfg: cfg, review: review.New(st, cfg), now: o.Now, http: o.HTTP, log: o.Log, provs: o.Providers,
		newID: func() string { return ulid.Make().String() }, wire: provider.NewCaller("approvals", 15*time.Second)}
	if a.now == nil {
		a.now = time.Now
	}
	if a.http == nil {
		a.http = &http.Client{Timeout: 15 * time.Second}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	names := make([]string, 0, len(openers))
	for name := range openers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s, ok, err := openers[name](a)
		if err != nil {
			return nil, fmt.Errorf("approvals: %s: %w", name, err)
		}
		if ok {
			a.surfaces = append(a.surfaces, s)
		}
	}
	return a, nil
}

// Config is the config the surfaces were opened with.
func (a *Approvals) Config() *config.Config { return a.cfg }

// Store is the store the surfaces decide in.
func (a *Approvals) Store() *store.Store { return a.st }

// Now is the surfaces' clock.
func (a *Approvals) Now() time.Time { return a.now().UTC() }

// HTTP is the client of the surfaces' API calls.
func (a *Approvals) HTTP() *http.Client { return a.http }

// Log is the surfaces' log.
func (a *Approvals) Log() *slog.Logger { return a.log }

// Surfaces are the configured surfaces, by name.
func (a *Approvals) Surfaces() []Surface { return slices.Clone(a.surfaces) }

// Surface is the configured surface name.
func (a *Approvals) Surface(name string) (Surface, bool) {
	for _, s := range a.surfaces {
		if s.Name() == name {
			return s, true
		}
	}
	return nil, false
}

// Later runs fn after the request's own answer (Slack's response_url, an
// ephemeral refusal), bounded by timeout; Wait waits for every one.
func (a *Approvals) Later(timeout time.Duration, fn func(ctx context.Context) error) {
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := fn(ctx); err != nil {
			a.log.Warn("approvals: an answer after the request failed", slog.Any("err", err))
		}
	}()
}

// Wait waits for the answers Later started (Stop, tests).
func (a *Approvals) Wait() { a.bg.Wait() }

func (a *Approvals) wake() {
	if a.Wake != nil {
		a.Wake()
	}
}

// Refusal is a request a surface answers with one sentence: the person is
// not linked, not allowed on the draft's client, or the draft cannot be
// decided so (already decided, superseded, closed, too long, too late to
// undo). Sentence is shown as it is.
type Refusal struct {
	Sentence string
	Err      error // the cause, when a store or review error
}

func (r *Refusal) Error() string { return r.Sentence }
func (r *Refusal) Unwrap() error { return r.Err }

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Sentence: fmt.Sprintf(format, args...)}
}

// Sentence is the one sentence every surface shows for err: a refusal's
// own; a review or store refusal's, as the dashboard words it (web's
// answerFor); anything else, that nothing was decided.
func Sentence(err error) string {
	if s, ok := refusalSentence(err); ok {
		return s
	}
	return "Something went wrong on handoff's side; nothing was decided. Try again, or decide in the dashboard."
}

// refusalSentence is the sentence of err when err refuses the person's
// request (the rules of review, delivery and the store said no); false
// for anything else (a store failure).
func refusalSentence(err error) (string, bool) {
	var (
		refusal    *Refusal
		conflict   *store.ConflictError
		superseded *store.SupersededError
		state      *store.StateError
		undo       *delivery.UndoError
		tooLong    *review.TooLongError
		closed     *review.WindowClosedError
	)
	switch {
	case errors.As(err, &refusal):
		return refusal.Sentence, true
	case errors.As(err, &superseded):
		return sentence(superseded.Error()), true
	case errors.As(err, &conflict):
		return sentence(conflict.Error() + "; that decision stands"), true
	case errors.As(err, &state):
		return sentence(state.Error()), true
	case errors.As(err, &undo):
		return sentence(undo.Error()), true
	case errors.As(err, &tooLong):
		return sentence(tooLong.Error()), true
	case errors.As(err, &closed):
		return sentence(closed.Error()), true
	case errors.Is(err, store.ErrNotFound):
		return "There is no such draft.", true
	}
	return "", false
}

// sentence capitalises s and ends it with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	s = string(r)
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// refusalOf is err as a *Refusal with its sentence (the cause kept), or
// err itself when it is no refusal of the person's request (a store
// failure: the surface says nothing was decided, and it is logged).
func refusalOf(err error) error {
	var refusal *Refusal
	if errors.As(err, &refusal) {
		return refusal
	}
	if s, ok := refusalSentence(err); ok {
		return &Refusal{Sentence: s, Err: err}
	}
	return err
}

// Person is the handoff user a surface's member id is: the name ids maps
// it to (the surface's users config), else the active user whose Email is
// email (case-insensitive; "" skips it). Anyone else is a *Refusal.
func (a *Approvals) Person(via string, ids map[string]string, id, email string) (store.User, error) {
	label := surfaceLabel(via)
	if name, ok := ids[id]; ok {
		u, err := a.st.ActiveUser(name)
		if err != nil {
			return store.User{}, refuse("Your %s account (%s) is mapped to handoff user %q, who does not exist or is disabled; ask an admin.", label, id, name)
		}
		return u, nil
	}
	if email = strings.TrimSpace(email); email != "" {
		us, err := a.st.Users()
		if err != nil {
			return store.User{}, err
		}
		for _, u := range us {
			if u.Email != "" && strings.EqualFold(u.Email, email) && !u.Disabled {
				return u, nil
			}
		}
	}
	return store.User{}, refuse("Your %s account (%s) is not linked to a handoff user: ask an admin to set your email on your handoff account, or to map your id under approvals.%s.users.", label, id, via)
}

func surfaceLabel(via string) string {
	switch via {
	case ViaSlack:
		return "Slack"
	case ViaTelegram:
		return "Telegram"
	case ViaNtfy:
		return "ntfy"
	}
	return via
}

// Action is what a person asks of a draft.
type Action string

// The actions.
const (
	Approve Action = "approve" // Text empty: as written; else the edited reply
	Reject  Action = "reject"
	Undo    Action = "undo"
	// Write sends Text as the person's own reply (review.WriteTx, as the
	// dashboard's "Send my reply"): a new version of the turn's draft,
	// approved by them.
	Write Action = "write"
)

// Ask is one person's request on one surface.
type Ask struct {
	Via    string // the surface
	Draft  string
	Action Action
	Text   string // Approve: the edited reply ("" approves as written)
	Reason string // Reject: why (optional)
	Person store.User
	// From is who on the surface, for the audit's From: "slack U0123".
	From string
	// Spend, when set, runs first in the deciding transaction: a one-time
	// token is spent with the decision it allows, or not at all (ntfy).
	Spend func(tx *store.Tx) error
}

// Outcome is what a decision did.
type Outcome struct {
	Draft store.Draft // as it now stands
	// Decided: this request made the decision; false: an earlier one of
	// the same kind stands (Sentence says whose).
	Decided   bool
	Sentence  string
	UndoUntil time.Time // an approval held for undo_window: Undo works until then
}

// MaxReply is the longest edited reply a surface takes (as the dashboard).
const MaxReply = 4000

// Decide makes ask's decision through review, as the dashboard does, in
// one write transaction that first checks the person may decide drafts of
// the draft's client, and enqueues a follow job for every card of the
// draft, so that each surface's card shows the decision. Refusals are
// *Refusal.
func (a *Approvals) Decide(ctx context.Context, ask Ask) (Outcome, error) {
	text := strings.TrimSpace(ask.Text)
	if (ask.Action == Approve && ask.Text != "") || ask.Action == Write {
		if text == "" {
			return Outcome{}, refuse("The edited reply is empty; approve the draft as written, or write a reply.")
		}
		if len(text) > MaxReply {
			return Outcome{}, refuse("The reply is %d bytes; a reply may be at most %d.", len(text), MaxReply)
		}
	}
	if len(ask.Reason) > 1000 {
		return Outcome{}, refuse("The reason is %d bytes; keep it under 1000.", len(ask.Reason))
	}
	now := a.Now()
	dec := store.Decision{By: ask.Person.Name, At: now, From: ask.From, Via: ask.Via, Text: text, Reason: strings.TrimSpace(ask.Reason)}
	jobID := a.newID()
	var out Outcome
	wake := false
	err := a.st.Update(ctx, func(tx *store.Tx) error {
		out, wake = Outcome{}, false
		if ask.Spend != nil {
			if err := ask.Spend(tx); err != nil {
				return err
			}
		}
		d, err := tx.Draft(ask.Draft)
		if err != nil {
			return err
		}
		if err := a.allowedTx(tx, ask.Person.Name, d); err != nil {
			return err
		}
		switch ask.Action {
		case Approve:
			res, err := a.review.ApproveTx(tx, d.ID, dec, jobID)
			if err != nil {
				return err
			}
			out.Draft, out.Decided, out.UndoUntil = res.Draft, res.Created, res.Outbox.UndoUntil
			wake = res.Created
		case Write:
			// A draft no longer waiting answers as an approval would
			// (whose decision stands, superseded, closed); a waiting one
			// is replaced by the person's text, approved.
			var res review.Approved
			if d.Status == store.DraftPending {
				res, err = a.review.WriteTx(tx, d.EventKey, text, dec, jobID)
			} else {
				res, err = a.review.ApproveTx(tx, d.ID, store.Decision{By: dec.By, At: dec.At, From: dec.From, Via: dec.Via}, jobID)
			}
			if err != nil {
				return err
			}
			out.Draft, out.Decided, out.UndoUntil = res.Draft, res.Created, res.Outbox.UndoUntil
			wake = res.Created
		case Reject:
			res, err := review.RejectTx(tx, d.ID, dec)
			if err != nil {
				return err
			}
			out.Draft, out.Decided = res.Draft, res.Decided
		case Undo:
			res, err := review.UndoTx(tx, d.ID, dec)
			if err != nil {
				return err
			}
			out.Draft, out.Decided = res.Draft, true
		default:
			return refuse("%q is not an action on a draft (approve, reject or undo).", ask.Action)
		}
		n, err := a.followTx(tx, d.ID, now)
		wake = wake || n > 0
		return err
	})
	if err != nil {
		return Outcome{}, refusalOf(fmt.Errorf("approvals: %s draft %s via %s: %w", ask.Action, ask.Draft, ask.Via, err))
	}
	if wake {
		a.wake()
	}
	if a.Decided != nil && ask.Action != Undo {
		a.Decided(ask.Draft)
	}
	out.Sentence = outcomeSentence(ask.Action, out, now)
	return out, nil
}

// allowedTx refuses name, unless they are an active user allowed on the
// client of d's channel (an admin, or a person not limited to clients, is
// allowed on every client), read in the deciding transaction.
func (a *Approvals) allowedTx(tx *store.Tx, name string, d store.Draft) error {
	u, err := tx.User(name)
	if err != nil || u.Disabled {
		return refuse("Handoff user %q does not exist or is disabled; nothing was decided.", name)
	}
	if Allowed(a.cfg, u, d.Channel) {
		return nil
	}
	return refuse("You (%s) are not an approver of this client's drafts; nothing was decided.", name)
}

// Allowed reports whether u may decide the drafts of channel: an admin or a
// person not limited to clients may; a limited person only on their
// clients' channels (config.ClientOf).
func Allowed(cfg *config.Config, u store.User, channel string) bool {
	if u.Role == store.RoleAdmin || len(u.Clients) == 0 {
		return true
	}
	return slices.Contains(u.Clients, cfg.ClientOf(channel))
}

// outcomeSentence says what a decision did, or whose decision stands.
func outcomeSentence(act Action, out Outcome, now time.Time) string {
	d := out.Draft
	dec := d.Decision
	switch {
	case act == Undo:
		return "Undone: the reply was not sent, and the draft waits for approval again."
	case !out.Decided && dec != nil:
		return sentence((&store.ConflictError{Draft: d}).Error() + "; that decision stands")
	case dec == nil:
		return "Decided."
	}
	what := "Approved"
	if act == Reject {
		what = "Rejected"
	} else if dec.Edited {
		what = "Approved with an edit"
	}
	s := fmt.Sprintf("%s by %s at %s", what, dec.By, hhmm(dec.At))
	if !out.UndoUntil.IsZero() && out.UndoUntil.After(now) {
		s += fmt.Sprintf("; it is sent at %s unless undone", out.UndoUntil.UTC().Format("15:04:05 UTC"))
	}
	return s + "."
}

func hhmm(t time.Time) string { return t.UTC().Format("15:04 UTC") }
