package views

import (
	"fmt"
	"net/url"
	"time"
)

// UndoStack is what the person logged in can still take back, newest
// first: each approval whose reply is held (its outbox row's undo_until),
// each rejection and close inside the undo window. Every dashboard page
// shows it at the top (the slot in Page), read from the server on each
// page and polled while any entry is live, so it survives j, a reload and
// another page; u undoes the newest.
type UndoStack struct {
	Entries []UndoEntry
	// Notice is what the person's last action did, in words (an undo, a
	// reply written, a lead closed), or why an undo was refused.
	Notice *Notice
	CSRF   string
	// Queue is set on the approval queue, with its view: an undo there
	// brings the draft back as the card.
	Queue  bool
	Filter QueueFilter
	// OOB swaps the stack in beside an htmx answer (a decision on the queue).
	OOB bool
}

// UndoEntry is one decision the stack offers to take back.
type UndoEntry struct {
	What string        // approval, rejection, close
	Name string        // the customer's name (LeadName)
	Left time.Duration // what is left of its window when the page was made
	// Action is where the Undo button posts: /drafts/{id}/undo, or
	// /handoffs/{lead}/reopen for a close.
	Action string
	Open   string // the draft's (or the lead's) page
}

// Live reports whether any entry's window is still open, so the stack is
// polled (its seconds counted down, its ended entries dropped).
func (u *UndoStack) Live() bool { return u != nil && len(u.Entries) > 0 }

// poll is the stack's own URL, with the queue's view when on the queue.
func (u *UndoStack) poll() string {
	if !u.Queue {
		return "/undo"
	}
	q := url.Values{"queue": {"1"}}
	if u.Filter.Owner != "" {
		q.Set("owner", u.Filter.Owner)
	}
	if u.Filter.Channel != "" {
		q.Set("channel", u.Filter.Channel)
	}
	if u.Filter.Cursor != "" {
		q.Set("cursor", u.Filter.Cursor)
	}
	return "/undo?" + q.Encode()
}

// target is what an undo's answer replaces: the card on the queue (the
// draft comes back to it), else the stack itself.
func (u *UndoStack) target() string {
	if u.Queue {
		return "#card"
	}
	return "#undo-stack"
}

// Text is the entry's sentence before its seconds: "Sending to Zoë Müller".
func (e UndoEntry) Text() string {
	switch e.What {
	case "rejection":
		return "Rejected the draft for " + e.Name
	case "close":
		return "Closed " + e.Name + " without a reply"
	}
	return "Sending to " + e.Name
}

// seconds is what is left of the window, whole seconds rounded up.
func (e UndoEntry) seconds() string {
	return fmt.Sprint(int((e.Left + time.Second - 1) / time.Second))
}

// when says the seconds in the entry's words: "in 7 s" for a reply on its
// way, "7 s left to undo" for the others.
func (e UndoEntry) when() string {
	if e.What == "approval" {
		return "in " + e.seconds() + " s"
	}
	return e.seconds() + " s left"
}

// buttonID gives the newest entry the id the u key clicks.
func buttonID(i int) string {
	if i == 0 {
		return "undo"
	}
	return fmt.Sprintf("undo-%d", i+1)
}

// UndoToast is the stack sent out of band with a queue answer (a decision
// or a selection), so it shows the entry just made.
type UndoToast struct {
	Stack UndoStack
}
