package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule runs the periodic maintenance on cron expressions.
type Schedule struct {
	c   *cron.Cron
	log *slog.Logger
}

// NewSchedule returns an empty schedule.
func NewSchedule(log *slog.Logger) *Schedule {
	return &Schedule{c: cron.New(), log: log}
}

// Add runs fn on spec (standard 5-field cron or @every), logging its errors.
// Each run gets its own deadline so that one stuck run cannot pile up.
func (s *Schedule) Add(name, spec string, timeout time.Duration, fn func(context.Context) error) error {
	_, err := s.c.AddFunc(spec, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := fn(ctx); err != nil {
			s.log.Error("scheduled task failed", "task", name, slog.Any("err", err))
		}
	})
	return err
}

// Start starts the schedule.
func (s *Schedule) Start() { s.c.Start() }

// Stop stops the schedule and waits for a task in progress until ctx ends.
func (s *Schedule) Stop(ctx context.Context) {
	select {
	case <-s.c.Stop().Done():
	case <-ctx.Done():
	}
}
