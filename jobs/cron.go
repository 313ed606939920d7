package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule runs the periodic maintenance on cron expressions. It can be
// stopped and started again (a process that loses the lead stops it, and
// starts it once it leads again): each Start runs the tasks afresh.
type Schedule struct {
	log   *slog.Logger
	tasks []task
	mu    sync.Mutex
	c     *cron.Cron // running, or nil
}

type task struct {
	name, spec string
	timeout    time.Duration
	fn         func(context.Context) error
}

// NewSchedule returns an empty schedule.
func NewSchedule(log *slog.Logger) *Schedule {
	return &Schedule{log: log}
}

// Add runs fn on spec (standard 5-field cron or @every), logging its errors.
// Each run gets its own deadline so that one stuck run cannot pile up. A
// spec cron cannot read is refused here.
func (s *Schedule) Add(name, spec string, timeout time.Duration, fn func(context.Context) error) error {
	if _, err := cron.ParseStandard(spec); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks = append(s.tasks, task{name, spec, timeout, fn})
	return nil
}

// Start starts the schedule; starting a started one does nothing.
func (s *Schedule) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		return
	}
	s.c = cron.New()
	for _, t := range s.tasks {
		if _, err := s.c.AddFunc(t.spec, func() {
			ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
			defer cancel()
			if err := t.fn(ctx); err != nil {
				s.log.Error("scheduled task failed", "task", t.name, slog.Any("err", err))
			}
		}); err != nil {
			panic(err) // Add parsed every spec
		}
	}
	s.c.Start()
}

// Stop stops the schedule and waits for a task in progress until ctx ends.
// Stopping a stopped schedule does nothing.
func (s *Schedule) Stop(ctx context.Context) {
	s.mu.Lock()
	c := s.c
	s.c = nil
	s.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case <-c.Stop().Done():
	case <-ctx.Done():
	}
}
