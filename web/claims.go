package web

import (
	"sync"
	"time"
)

// claimFor is how long opening a draft's card holds it for its viewer: the
// open queue's poll (livePoll) renews it, so it lapses within this long of
// the tab closing.
const claimFor = 30 * time.Second

// claims are the soft claims of the approval queue: who is looking at
// which waiting draft, so that two approvers opening /drafts are shown
// different drafts and a card says "Dana is looking at this". A claim
// steers, it never refuses: approval stays the store's one-transaction
// decision, so these live in memory and a restart only forgets who was
// looking.
type claims struct {
	mu sync.Mutex
	m  map[string]claim // draft id → its viewer
}

type claim struct {
	by    string
	until time.Time
}

func newClaims() *claims { return &claims{m: map[string]claim{}} }

// pick claims for me the first of ids that nobody else holds at now and
// returns its index; when others hold them all, it returns -1 and claims
// nothing. The check and the claim are one step, so two people opening
// the queue at once get different drafts.
func (cs *claims) pick(ids []string, me string, now time.Time) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.sweep(now)
	for i, id := range ids {
		if c, ok := cs.m[id]; !ok || c.by == me {
			cs.m[id] = claim{by: me, until: now.Add(claimFor)}
			return i
		}
	}
	return -1
}

// look claims draft id for me (renewing my claim) and returns who else
// held it at now, "" when nobody did; another's claim stays theirs.
func (cs *claims) look(id, me string, now time.Time) (other string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[id]; ok && c.by != me && now.Before(c.until) {
		return c.by
	}
	cs.m[id] = claim{by: me, until: now.Add(claimFor)}
	return ""
}

// release drops any claim on draft id: it was decided.
func (cs *claims) release(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.m, id)
}

// sweep forgets lapsed claims, so the map holds only the open cards.
func (cs *claims) sweep(now time.Time) {
	for id, c := range cs.m {
		if !now.Before(c.until) {
			delete(cs.m, id)
		}
	}
}
