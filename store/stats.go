package store

import (
	bolt "go.etcd.io/bbolt"
)

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
	err := s.view(func(tx *bolt.Tx) error {
		st = Stats{
			Events: tx.Bucket(bucketEvents).Stats().KeyN,
			Jobs:   tx.Bucket(bucketJobs).Stats().KeyN,
			Drafts: tx.Bucket(bucketDrafts).Stats().KeyN,
			Ready:  tx.Bucket(bucketJobsReady).Stats().KeyN,
			Leased: tx.Bucket(bucketJobsLeased).Stats().KeyN,
		}
		return nil
	})
	return st, err
}
