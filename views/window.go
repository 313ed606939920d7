package views

import "time"

// ReplyWindow is a draft card's reply window: how long its channel's
// provider still takes a free-form reply (review.Window), and the
// templates a person may send once it closed.
type ReplyWindow struct {
	Has    bool // the channel's provider kind has a window; false: nothing is shown
	Kind   string
	Left   time.Duration // 0 once closed
	Closes time.Time
	// Soon says it closes within the digest's warning threshold.
	Soon bool
	// Templates name the provider's templates; the form to send one shows
	// only once the window closed.
	Templates []string
	// Unknown says when the customer last wrote cannot be read, so the
	// window counts as closed; Why says so in a sentence.
	Unknown bool
	Why     string
}

// Closed reports whether the window has closed.
func (w ReplyWindow) Closed() bool { return w.Has && w.Left <= 0 }

func (w ReplyWindow) tone() string {
	if w.Soon {
		return "notice warn"
	}
	return "small"
}
