package store

import ()

// Stats counts the records of each kind.
type Stats struct {
	Events int `json:"events"`
	Jobs   int `json:"jobs"`
	Drafts int `json:"drafts"`
	Ready  int `json:"jobs_ready"`
	Leased int `json:"jobs_leased"`
}

// Stats counts records in one read transaction.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.view(func(tx *Tx) error {
		st = Stats{
			Events: tx.bucket(bucketEvents).Stats().KeyN,
			Jobs:   tx.bucket(bucketJobs).Stats().KeyN,
			Drafts: tx.bucket(bucketDrafts).Stats().KeyN,
			Ready:  tx.bucket(bucketJobsReady).Stats().KeyN,
			Leased: tx.bucket(bucketJobsLeased).Stats().KeyN,
		}
		return nil
	})
	return st, err
}
