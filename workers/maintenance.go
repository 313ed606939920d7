package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// BackupRecorder is told how each backup went (metrics, the overview):
// err nil is a verified copy, with the unreadable records it carries as
// warnings; an error is a backup that failed, a *store.RejectedError when
// its copy failed verification.
type BackupRecorder interface {
	Backup(at time.Time, warnings []string, err error)
}

// Maintenance is the periodic housekeeping the cron schedule runs.
type Maintenance struct {
	Store   *store.Store
	Config  *config.Config
	Log     *slog.Logger
	Backups BackupRecorder // may be nil
	Wake    func()         // tells the runner new jobs exist; may be nil
	// AfterBackup runs after each good backup with the file written (the
	// offsite copy); its error fails the backup task. May be nil.
	AfterBackup func(ctx context.Context, f store.BackupFile, sha256 string) error
	// Verify checks each copy before it takes a backup's name; nil is
	// store.VerifyFile. Tests wrap it to damage the copy first.
	Verify func(path string) error
	Now    func() time.Time
	// Flagged, when set, is told of each lead FlagStuck flags, in the
	// flagging's transaction beside its alert (crm.StuckHook: the CRM
	// record says the lead is stuck). May be nil.
	Flagged leads.AlertTx
}

func (m *Maintenance) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Backup writes a scheduled backup, verified, and keeps the newest
// backups.keep verified ones (store.BackupToDir): a copy that fails
// verification is kept apart, counts for nothing and deletes nothing.
func (m *Maintenance) Backup(ctx context.Context) error {
	now := m.now()
	f, sum, err := m.Store.BackupToDir(store.BackupDir(m.Config.DataDir), now, store.BackupOptions{Keep: m.Config.Backups.Keep, Verify: m.Verify})
	if m.Backups != nil {
		m.Backups.Backup(now, f.Warnings, err)
	}
	if err != nil {
		var re *store.RejectedError
		if errors.As(err, &re) {
			m.Log.Error("backup rejected: its copy failed verification; the older backups are all kept", "file", re.Name, "kept_in", re.Kept, "reason", re.Reason)
		} else {
			m.Log.Error("backup failed", "dir", store.BackupDir(m.Config.DataDir), slog.Any("err", err))
		}
		return fmt.Errorf("scheduled backup: %w", err)
	}
	if len(f.Warnings) > 0 {
		m.Log.Warn("backup written with unreadable records, as the live database has them", "file", f.Name, "unreadable", len(f.Warnings), "first", f.Warnings[0])
	}
	m.Log.Info("backup written", "file", f.Name, "bytes", f.Size, "sha256", sum)
	if m.AfterBackup != nil {
		return m.AfterBackup(ctx, f, sum)
	}
	return nil
}

// waitsFor says what stuck lead h waits for, for its alert: a lead of a
// client with a CRM is matched only once the CRM holds its record, so one
// still received waits for that write ("" otherwise).
func waitsFor(cfg *config.Config, h store.Handoff) string {
	if _, ok := cfg.CRMFor(h.Channel); !ok || h.Status != leads.Received {
		return ""
	}
	return "Its record is not on the client's CRM yet: it moves to matched once the CRM holds it (a failed CRM write waits in the dead letters)."
}

// FlagStuck flags leads stuck past their thresholds, each once per stay
// (leads.FlagStuck), and creates the alert (delivery.CreateAlertTx) in the
// same transaction when stuck.alert names a provider.
func (m *Maintenance) FlagStuck(ctx context.Context) error {
	var alert leads.AlertTx
	if m.Config.Stuck.Alert != "" {
		alert = func(tx *store.Tx, h store.Handoff, now time.Time) error {
			_, err := delivery.CreateAlertTx(tx, delivery.Alert{
				Lead: h, Provider: m.Config.Stuck.Alert, At: now, Why: waitsFor(m.Config, h),
				JobID: ulid.Make().String(), MaxAttempts: m.Config.Retry.MaxAttempts,
			})
			return err
		}
	}
	if flagged := m.Flagged; flagged != nil {
		only := alert
		alert = func(tx *store.Tx, h store.Handoff, now time.Time) error {
			if only != nil {
				if err := only(tx, h, now); err != nil {
					return err
				}
			}
			return flagged(tx, h, now)
		}
	}
	flagged, err := leads.FlagStuck(ctx, m.Store, m.now(), leads.StuckAfter(m.Config), alert)
	for _, h := range flagged {
		m.Log.Warn("lead stuck", "lead", h.Key, "status", h.Status, "since", h.Since, "owner", h.Owner, "event_key", h.LastEventKey)
	}
	if len(flagged) > 0 && alert != nil && m.Wake != nil {
		m.Wake()
	}
	return err
}

// Prune applies the retention windows: events (and what hangs off them)
// after retention.events, completed idempotency keys after retention.keys;
// and sweeps the expired sessions (SweepSessions).
func (m *Maintenance) Prune(ctx context.Context) error {
	now := m.now()
	if err := m.SweepSessions(ctx); err != nil {
		return err
	}
	events, err := m.Store.PruneEvents(ctx, now.Add(-m.Config.Retention.Events))
	if err != nil {
		return err
	}
	keys, err := m.Store.PruneKeys(ctx, now, 200)
	if err != nil {
		return err
	}
	other, err := m.Store.PruneOutside(ctx, now.Add(-m.Config.Retention.Events))
	if err != nil {
		return err
	}
	if events+keys+other > 0 {
		m.Log.Info("retention pruned records", "events", events, "keys", keys, "alerts_and_sandbox", other)
	}
	return nil
}

// SweepSessions deletes the dashboard sessions past their expiry (the
// dashboard already refuses them; this keeps the file from keeping them).
func (m *Maintenance) SweepSessions(ctx context.Context) error {
	n, err := m.Store.SweepSessions(ctx, m.now())
	if err != nil {
		return err
	}
	if n > 0 {
		m.Log.Info("expired sessions swept", "sessions", n)
	}
	return nil
}

// EnsureDelivery requeues replies left without a delivery job (the rule is
// delivery's: Outbox.Resolve).
func (m *Maintenance) EnsureDelivery(ctx context.Context) error {
	n, err := delivery.New(m.Store, m.Config).Resolve(ctx, m.now())
	if n > 0 {
		m.Log.Warn("requeued replies left without a delivery job", "rows", n)
		if m.Wake != nil {
			m.Wake()
		}
	}
	return err
}
