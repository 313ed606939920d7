package delivery_test

import (
	"context"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// Approved is review's answer to an approval, under the name the tests use.
type Approved = review.Approved

// approval is what the tests approve with: the decision, and the policy the
// review takes from the config (the channel's provider, the delivery job's
// attempts).
type approval struct {
	store.Decision
	Provider    string
	JobID       string // unused: review mints the delivery job's id
	MaxAttempts int
}

// reviewFor is the review of drafts in s with channel sending through provider.
func (s *testStore) reviewFor(channel, provider string, maxAttempts int) *review.Review {
	return review.New(s.Store, &config.Config{
		Channels: []config.Channel{{Name: channel, Provider: provider}},
		Retry:    config.Retry{MaxAttempts: maxAttempts},
	})
}

// SaveDraft stores the first draft of its event (review.Save).
func (s *testStore) SaveDraft(ctx context.Context, d store.Draft) (store.Draft, bool, error) {
	return s.SaveDraftVersion(ctx, d, 1)
}

// SaveDraftVersion stores version n of its event's draft (review.Save).
func (s *testStore) SaveDraftVersion(ctx context.Context, d store.Draft, n int) (store.Draft, bool, error) {
	return review.New(s.Store, &config.Config{}).Save(ctx, d, n)
}

// ApproveDraft approves draft id and creates its outbox row (review.Approve).
func (s *testStore) ApproveDraft(ctx context.Context, id string, a approval) (Approved, error) {
	d, err := s.Draft(id)
	if err != nil {
		return Approved{}, err
	}
	return s.reviewFor(d.Channel, a.Provider, a.MaxAttempts).Approve(ctx, id, a.Decision)
}
