package views

import (
	"fmt"
	"time"
)

// UndoToast is the small banner over the next card after a person approves
// a reply that is held for the undo window: "Sent to … in 9s [Undo]". The
// page counts the seconds down (static/app.js) and, once the window is
// over, drops the button and says the reply went.
type UndoToast struct {
	DraftID string
	Lead    string        // who approved and when: "Approved by ann at 09:00:01 UTC"
	To      string        // where the reply goes
	Left    time.Duration // what was left of the window when the page was made
	Filter  QueueFilter   // the queue view the undo returns to
	CSRF    string
	// Refused, when set, is why an undo was refused: the banner says it,
	// without a button.
	Refused string
}

// seconds is what is left of the window, whole seconds rounded up.
func (u *UndoToast) seconds() string {
	return fmt.Sprint(int((u.Left + time.Second - 1) / time.Second))
}

func (u *UndoToast) millis() string { return fmt.Sprint(u.Left.Milliseconds()) }
