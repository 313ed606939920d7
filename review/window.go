package review

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/store"
)

// The channel's reply window, per lead and channel. A provider kind
// declares how long after the customer's last message it takes a
// free-form reply (kinds.Kind.Window: WhatsApp 24 hours; meta 24 hours, 7
// days with human_agent); leads are per channel, so a lead's window opens
// at its latest event (Handoff.LastEventKey, every event being an inbound
// message) and closes that long after it. This file is the one place that
// reads it: the approval refuses a reply the window no longer takes
// (ApproveTx, *WindowClosedError), the queue shows and sorts by the time
// left, the digest warns before it closes, and the provider kinds refuse
// a send after it (provider/whatsapp.go, provider/meta.go).
//
// The window is measured from the provider's own time of the message where
// the channel's preset reads one (WhatsApp's, Messenger's and Instagram's
// timestamp: store.Event.Wrote), else from when handoff received it, which
// is no earlier than when the customer wrote it. When the latest message
// cannot be read the window is Unknown and counts as closed. The approval
// also wants the reply's undo hold inside the window.

// WindowWarning is how long before a window closes the queue marks its
// card, a digest lists its draft as closing soon and the approval surfaces
// announce it: review.window_warning (config.Review), default 2 hours.
func WindowWarning(cfg *config.Config) time.Duration { return cfg.Review.WindowWarningOr() }

// Window is a lead's reply window.
type Window struct {
	// Has says the channel's provider kind declares a window; false:
	// replies go at any time and the rest is zero.
	Has bool
	// Last is when the customer last wrote; Closes is when the window
	// closes (Last plus the kind's window).
	Last, Closes time.Time
	// Templates says the channel's provider has templates configured,
	// which go out whatever the window (a way out once it closed).
	Templates bool
	// Unknown says when the customer last wrote cannot be read (Why says
	// why, leads.ErrInboundUnknown): the window counts as closed, never as
	// open, and Last and Closes are zero.
	Unknown bool
	Why     string
}

// Left is the time left in w at now; 0 once it closed (and for no window).
func (w Window) Left(now time.Time) time.Duration {
	if !w.Has || w.Unknown {
		return 0
	}
	return max(w.Closes.Sub(now), 0)
}

// Closed reports whether w has closed at now (an unknown window has).
func (w Window) Closed(now time.Time) bool { return w.Has && (w.Unknown || !now.Before(w.Closes)) }

// kindOf is the kind and entry of channel's provider; false for a channel
// or provider that is not configured (the built-in sandbox declares no
// window).
func (r *Review) kindOf(channel string) (kinds.Kind, kinds.Provider, bool) {
	prov, ok := r.provider(channel)
	if !ok {
		return kinds.Kind{}, kinds.Provider{}, false
	}
	p, ok := r.cfg.Provider(prov)
	if !ok {
		return kinds.Kind{}, kinds.Provider{}, false
	}
	k, ok := kinds.Lookup(p.Kind)
	return k, *p, ok
}

// WindowOf is the window of a lead on channel whose customer last wrote
// at last (zero Has when the channel's provider declares none).
func (r *Review) WindowOf(channel string, last time.Time) Window {
	k, p, ok := r.kindOf(channel)
	if !ok {
		return Window{}
	}
	d := k.ReplyWindow(p)
	if d == 0 {
		return Window{}
	}
	return Window{Has: true, Last: last, Closes: last.Add(d), Templates: len(p.Templates) > 0}
}

// WindowTx is the window of lead h, read inside tx: from when the
// customer wrote its latest message (leads.LastInboundTx); a latest
// message that cannot be read gives an Unknown window, closed.
func (r *Review) WindowTx(tx *store.Tx, h store.Handoff) (Window, error) {
	if _, _, ok := r.kindOf(h.Channel); !ok {
		return Window{}, nil
	}
	if w := r.WindowOf(h.Channel, time.Time{}); !w.Has {
		return w, nil
	}
	last, err := leads.LastInboundTx(tx, h)
	if errors.Is(err, leads.ErrInboundUnknown) {
		w := r.WindowOf(h.Channel, time.Time{})
		return Window{Has: true, Unknown: true, Why: err.Error(), Templates: w.Templates}, nil
	}
	if err != nil {
		return Window{}, err
	}
	return r.WindowOf(h.Channel, last), nil
}

// WindowIn is the window of lead h under cfg's channels, read inside tx:
// WindowTx for a reader that holds no Review (the digest).
func WindowIn(tx *store.Tx, cfg *config.Config, h store.Handoff) (Window, error) {
	return (&Review{cfg: cfg}).WindowTx(tx, h)
}

// WindowLength is how long the window of a lead on channel lasts after
// the customer's last message under cfg; 0: the channel has none.
func WindowLength(cfg *config.Config, channel string) time.Duration {
	w := (&Review{cfg: cfg}).WindowOf(channel, time.Time{})
	return w.Closes.Sub(w.Last)
}

// WindowLeftTx is the time left at now in the window of lead h, and
// whether its channel has one.
func (r *Review) WindowLeftTx(tx *store.Tx, h store.Handoff, now time.Time) (left time.Duration, has bool, err error) {
	w, err := r.WindowTx(tx, h)
	return w.Left(now), w.Has, err
}

// WindowClosedError refuses the approval of a reply its channel's window
// no longer takes: the provider would refuse it (WhatsApp's 24-hour
// customer service window, Messenger's and Instagram's standard one).
type WindowClosedError struct {
	Draft    string
	Provider string
	Kind     string
	Last     time.Time // the customer's last message
	Closes   time.Time // when the window closed (or closes before the reply's hold ends)
	// Templates names the provider's templates a person can send instead.
	Templates []string
	// Unknown: when the customer last wrote cannot be read (Why), so the
	// window counts as closed.
	Unknown bool
	Why     string
}

func (e *WindowClosedError) Error() string {
	out := "send one of the channel's approved templates (" + strings.Join(e.Templates, ", ") + ") or reply on another channel of the lead"
	if len(e.Templates) == 0 {
		out = "reply on another channel of the lead (provider " + e.Provider + " has no templates configured)"
	}
	if e.Unknown {
		return fmt.Sprintf("the %s reply window of draft %s cannot be judged (%s), so it counts as closed and provider %s may refuse a free-form reply: %s",
			e.Kind, e.Draft, e.Why, e.Provider, out)
	}
	return fmt.Sprintf("the %s reply window of draft %s closed at %s, %s after the customer's last message, so provider %s would refuse a free-form reply: %s",
		e.Kind, e.Draft, e.Closes.UTC().Format("15:04 UTC, 2 Jan"), e.Closes.Sub(e.Last).Round(time.Hour), e.Provider, out)
}

// open refuses the approval of d, on lead h, at at with its send held for
// hold, with a *WindowClosedError when the channel's window closes before
// the reply goes out.
func (r *Review) open(tx *store.Tx, d store.Draft, h store.Handoff, at time.Time, hold time.Duration) error {
	w, err := r.WindowTx(tx, h)
	if err != nil || !w.Has || !w.Unknown && at.Add(hold).Before(w.Closes) {
		return err
	}
	k, p, _ := r.kindOf(d.Channel)
	return &WindowClosedError{Draft: d.ID, Provider: p.Name, Kind: k.Name, Last: w.Last, Closes: w.Closes, Templates: r.Templates(d.Channel), Unknown: w.Unknown, Why: w.Why}
}
