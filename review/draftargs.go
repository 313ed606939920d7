package review

import (
	"encoding/json"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// KindDraft is the draft job kind: it writes the draft of one event (its
// key). Drafts are review's, so are the draft job's args; the worker that
// runs them is workers.DraftJob, which stores what it wrote through Record.
const KindDraft = store.KindDraft

// DraftArgs are the draft job's: draft a reply to the event EventKey.
// RegenerateVersion, set by a regenerate or a redraft, fixes the draft
// version to make, so that a retried attempt cannot make two.
type DraftArgs struct {
	EventKey          string `json:"-"`
	RegenerateVersion int    `json:"regenerate_version,omitempty"`
	// Instruction is a person's word for the new draft ("shorter"), when
	// they asked to draft again; the drafter sees it, the draft records it.
	Instruction string `json:"instruction,omitempty"`
}

// Kind is the draft job kind.
func (DraftArgs) Kind() string { return KindDraft }

// Key is the event's key.
func (a DraftArgs) Key() string { return a.EventKey }

// SetKey is how jobs.Decode gives the key back.
func (a *DraftArgs) SetKey(k string) { a.EventKey = k }

// RegenerateTx is the payload of the discarded draft job j when a person
// replays it to be regenerated (DeadDraft.Regenerate, in the dead
// letters' replay): the next version of its event's draft,
// refused once that draft is approved. The version is fixed now, so a
// retried attempt cannot make two.
func RegenerateTx(tx *store.Tx, j store.Job) (json.RawMessage, error) {
	next := 1
	if d, err := tx.DraftByEvent(j.Key); err == nil {
		if d.Status == store.DraftApproved {
			return nil, &store.StateError{What: "draft " + d.ID, State: "approved", Want: "pending or rejected to be regenerated"}
		}
		next = max(d.Version, 1) + 1
	}
	return jobs.Encode(DraftArgs{EventKey: j.Key, RegenerateVersion: next})
}
