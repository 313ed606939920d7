package workers

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/handoff/handoff/store"
)

// Canary drafts a share of the new turns of the clients it runs for with
// a candidate drafter, B, and the rest with the job's own, A (config
// drafter.canary). The arm of a turn is decided by its first message's
// key alone: every attempt, a regeneration and a turn that grows while it
// waits are drafted by the same arm, so a turn is never drafted by both.
// A person's decision (store.CanaryDecision) overrides the share: promoted,
// every turn is B's; rolled back, every turn A's.
type Canary struct {
	Drafter Drafter
	Version string  // B's prompt version, which decisions are kept for
	Share   float64 // above 0, at most 1
	// Client is the client a channel belongs to, and Runs whether the
	// canary runs for it.
	Client func(channel string) string
	Runs   func(client string) bool
}

// Arms of a canary, as drafts record them.
const (
	ArmA = "a"
	ArmB = "b"
)

// ArmOf is the arm the share gives the turn whose first message is key:
// the first 8 bytes of its SHA-256 as a fraction of 2^64, below share: B.
func ArmOf(key string, share float64) string {
	sum := sha256.Sum256([]byte(key))
	if float64(binary.BigEndian.Uint64(sum[:8]))/(1<<64) < share {
		return ArmB
	}
	return ArmA
}

// drafterFor is the drafter of turn on channel and the arm it is (""
// where no canary runs).
func (k *DraftJob) drafterFor(channel string, turn store.Turn) (Drafter, string, error) {
	c := k.Canary
	if c == nil || len(turn.Events) == 0 {
		return k.Drafter, "", nil
	}
	client := c.Client(channel)
	if !c.Runs(client) {
		return k.Drafter, "", nil
	}
	d, err := k.Store.Canary(client, c.Version)
	if err != nil {
		return nil, "", err
	}
	arm := ArmOf(turn.Events[0].Key, c.Share)
	switch d.State {
	case store.CanaryPromoted:
		arm = ArmB
	case store.CanaryRolledBack:
		arm = ArmA
	}
	if arm == ArmB {
		return c.Drafter, ArmB, nil
	}
	return k.Drafter, ArmA, nil
}
