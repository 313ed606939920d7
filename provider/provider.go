// Package provider delivers approved replies: the built-in sandbox, the
// outbound HTTP call of the spec, and the APIs agencies use (Twilio,
// WhatsApp Cloud API, Telegram, Slack, SMTP). Each kind is declared in
// provider/kinds (its config keys, its inbound preset, what it can prove
// after an unknown outcome); its code lives here in its own file, which
// registers the kind's builder and sorts its provider's documented answers
// into sent, refused for good (Permanent), refused for now (NotSent with
// RetryAfter) and unknown (Ambiguous).
package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/handoff/handoff/provider/kinds"
)

// Message is one reply to deliver. Ref is the outbox id: the provider's
// idempotency key and our client reference.
type Message struct {
	Ref            string `json:"client_ref"`
	ConversationID string `json:"conversation_id"`
	To             string `json:"to"`
	Text           string `json:"text"`
	CorrelationID  string `json:"correlation_id"`
	// Subject is the inbound subject an email reply answers ("Re: " is
	// added), InReplyTo its Message-ID; only the smtp kind reads them.
	Subject   string `json:"-"`
	InReplyTo string `json:"-"`
	// ReplyAddress, when set, is the mail's Reply-To and Subject its
	// subject as it is (no "Re: "): a message of handoff's own to the
	// team (an approval mail, approvals/mail.go); only smtp reads it.
	ReplyAddress string `json:"-"`
	// ReplyTo is where in the channel the inbound message sits (the
	// event's reply_to): the telegram kind answers in its chat as a reply
	// to it, the slack kind in its channel's thread. Zero: To's own chat.
	ReplyTo ReplyTo `json:"-"`
	// LastInbound is when the customer last wrote (the reply's event was
	// received), for the kinds with a reply window (kinds.Kind.Window):
	// past it they refuse a free-form reply without sending it, and the
	// meta kind tags one past 24 hours HUMAN_AGENT. Zero: unknown, sent as
	// it comes (the kind's own answer then says).
	LastInbound time.Time `json:"-"`
	// WindowUnknown says the customer's last message could not be read
	// (leads.ErrInboundUnknown): the window kinds then refuse a free-form
	// reply unsent, as past a closed window, rather than guess it open.
	WindowUnknown bool `json:"-"`
	// Template, when set, is sent instead of Text: one of the account's
	// approved templates, which goes out whatever the window (whatsapp).
	Template *Template `json:"-"`
}

// Template is an approved message template with its body's parameters
// filled in, in order.
type Template struct {
	Name     string
	Language string
	Params   []string
}

// windowShut is the refusal of a free-form reply that kind k's window, as
// provider cfg has it, no longer takes at now: the provider's documented
// rule would refuse it, so it is not sent. nil: within it, no window, or
// the customer's last message is not known.
func windowShut(k kinds.Kind, cfg kinds.Provider, m Message, now time.Time) error {
	w := k.ReplyWindow(cfg)
	if w > 0 && m.WindowUnknown && m.Template == nil {
		return &Permanent{Err: fmt.Errorf("not sent: the customer's last message cannot be read, so the %s reply window cannot be judged and counts as closed; send one of the approved templates or reply on another channel of the lead", k.Name)}
	}
	if w == 0 || m.LastInbound.IsZero() || m.Template != nil || now.Sub(m.LastInbound) < w {
		return nil
	}
	return &Permanent{Err: fmt.Errorf("not sent: the %s reply window closed at %s, %s after the customer's last message; send one of the approved templates or reply on another channel of the lead",
		k.Name, m.LastInbound.Add(w).UTC().Format("15:04 UTC, 2 Jan"), w)}
}

// ReplyTo is where an inbound message sits in its channel; each is optional.
type ReplyTo struct {
	Chat      string // the chat or channel it was written in
	MessageID string // the message itself (a Telegram message_id)
	Thread    string // its thread (a Slack thread_ts)
}

// Capabilities say what a provider lets us do after an ambiguous outcome.
type Capabilities struct {
	// IdempotencyKey: resending with the same key cannot deliver twice.
	IdempotencyKey bool
	// Lookup: a send can be found by our reference.
	Lookup bool
	// Timeout is the longest one send can be in flight: a send whose
	// process died is taken to have reached the provider up to this long
	// after it was claimed.
	Timeout time.Duration
	// LookupSettle is how long after a send that may have reached the
	// provider ended a lookup's "not found" starts to mean "not sent";
	// before that the provider may still be storing what it accepted.
	LookupSettle time.Duration
	// Receipts: the provider reports delivery on a status webhook, which
	// can settle an unknown outcome without a person.
	Receipts bool
	// Threads: the provider's messages answer the inbound one by subject
	// and Message-ID (email), so the delivery job fills Message.Subject
	// and Message.InReplyTo from the lead's event.
	Threads bool
	// Rate is the sends per second this provider is held to (0: no
	// limit), Burst how many may go at once.
	Rate  float64
	Burst int
}

// Provider delivers messages. Send returns the provider's id for the
// message, or a *Permanent or *Ambiguous error (any other error is treated
// as ambiguous: we cannot know whether the provider acted).
type Provider interface {
	Send(ctx context.Context, m Message) (providerID string, err error)
	// Lookup finds a send by our reference; ErrNoLookup when unsupported.
	// correlationID goes out as X-Correlation-ID, as on every outbound call.
	Lookup(ctx context.Context, ref, correlationID string) (providerID string, found bool, err error)
	Capabilities() Capabilities
}

// ErrNoLookup is returned by Lookup on a provider that cannot look sends up.
var ErrNoLookup = errors.New("provider: this provider cannot look a message up")

// Permanent is a refusal that resending cannot change (a 4xx other than 408,
// 409 and 429): the message was not delivered and will not be.
type Permanent struct {
	Status int
	Err    error
}

func (e *Permanent) Error() string { return fmt.Sprintf("permanent failure (%d): %v", e.Status, e.Err) }
func (e *Permanent) Unwrap() error { return e.Err }

// Ambiguous is an outcome that cannot be known: a timeout, a broken
// connection, 408, 409, 429 or 5xx. The provider may have delivered.
type Ambiguous struct {
	Status     int // 0 when there was no answer
	Err        error
	RetryAfter time.Duration // from a Retry-After header, if any
}

func (e *Ambiguous) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("outcome unknown (no answer): %v", e.Err)
	}
	return fmt.Sprintf("outcome unknown (%d): %v", e.Status, e.Err)
}
func (e *Ambiguous) Unwrap() error { return e.Err }

// NotSent is a send that provably never reached the provider: the
// connection could not be made, or it broke before the whole request was
// written, so no server can have acted on it. Sending again is safe.
type NotSent struct {
	Err error
	// RetryAfter is the provider's advice when it refused for now (a rate
	// limit that means "not accepted"); 0 leaves the queue's backoff.
	RetryAfter time.Duration
}

func (e *NotSent) Error() string { return fmt.Sprintf("not sent: %v", e.Err) }
func (e *NotSent) Unwrap() error { return e.Err }

// Declared is what a kind can prove, as the README's table publishes it.
type Declared struct {
	Kind string
	kinds.Row
}

// Declarations lists every kind's declaration (provider/kinds), by kind.
func Declarations() []Declared {
	out := make([]Declared, 0, len(kinds.All()))
	for _, k := range kinds.All() {
		out = append(out, Declared{Kind: k.Name, Row: k.Row})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// Deps are what provider kinds may need from the process.
type Deps struct {
	// Sandbox is the sandbox's storage; only the sandbox kind uses it.
	Sandbox SandboxStore
	Now     func() time.Time
	// Window is the clock a reply window is judged on (whatsapp, meta):
	// the app's injected clock, which the approval and the queue read, so
	// the three agree; nil: Now. The wire's rate pauses keep Now.
	Window func() time.Time
}

// factory builds one configured provider.
type factory func(cfg kinds.Provider, d Deps) (Provider, error)

// factories is filled by each kind's init and never changed after.
var factories = map[string]factory{}

// register makes k's declaration buildable with f.
func register(k kinds.Kind, f factory) { factories[k.Name] = f }

// Kinds lists the provider kinds this binary knows.
func Kinds() []string {
	out := make([]string, 0, len(factories))
	for k := range factories {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Open builds every configured provider plus the built-in "sandbox".
func Open(cfgs []kinds.Provider, d Deps) (map[string]Provider, error) {
	out := map[string]Provider{}
	all := append([]kinds.Provider{{Name: "sandbox", Kind: "sandbox"}}, cfgs...)
	for _, c := range all {
		f, ok := factories[c.Kind]
		if !ok {
			return nil, fmt.Errorf("provider %s: unknown kind %q (known: %v)", c.Name, c.Kind, Kinds())
		}
		p, err := f(c, d)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", c.Name, err)
		}
		out[c.Name] = p
	}
	return out, nil
}
