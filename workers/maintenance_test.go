package workers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/keys"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// mt0 is the injected clock's start in the maintenance tests.
var mt0 = time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)

// backupLog records what Maintenance.Backup reports.
type backupLog struct {
	mu    sync.Mutex
	calls []string
	errs  []error
}

func (b *backupLog) Backup(at time.Time, warnings []string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf("%v@%s", err == nil, at.Format(time.RFC3339)))
	if err != nil {
		b.errs = append(b.errs, err)
	}
}

func (b *backupLog) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

// receiveHeld records a demo-channel event at at whose draft job is due
// only far in the future: the lead stays received while the test runs.
func receiveHeld(t *testing.T, st *store.Store, id string, at time.Time) store.Event {
	t.Helper()
	key := "demo:" + id
	rec, err := leads.RecordEvent(context.Background(), st, store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "demo", MessageID: id, CorrelationID: ulid.Make().String(),
		ConversationID: "conv-" + id, Contact: "+15550001234", Name: "Ada", Text: "hello", ReceivedAt: at,
	}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3, RunAt: at.Add(1000 * time.Hour)})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = %v, %v", key, rec.Created, err)
	}
	return rec.Event
}

// alertRig is a store with the real delivery job and the sandbox provider
// running on an injected clock, and the Maintenance that flags stuck leads.
type alertRig struct {
	dir    string
	st     *store.Store
	cfg    *config.Config
	clock  *testkit.Clock
	runner *jobs.Runner
	maint  *Maintenance
}

func startAlertRig(t *testing.T, dir string, clock *testkit.Clock) *alertRig {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Stuck.Alert = "sandbox"
	cfg.Retry.MaxAttempts = 3
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	senders := map[string]delivery.Sender{}
	for name, p := range providers {
		senders[name] = p
	}
	opt := testOptions()
	opt.Now = clock.Now
	r := jobs.NewRunner(st, map[string]jobs.Kind{delivery.Kind: &delivery.Job{Store: st, Providers: senders, Now: clock.Now}}, opt)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := &alertRig{dir: dir, st: st, cfg: cfg, clock: clock, runner: r}
	g.maint = &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Wake: r.Wake, Now: clock.Now}
	return g
}

// stop stops the runner, checks the file and closes the store: a clean restart's first half.
func (g *alertRig) stop(t *testing.T) {
	t.Helper()
	stopAndCheck(t, g.runner, g.st)
}

// stopAndCheck stops r, checks st's file and closes it: a clean restart's
// first half.
func stopAndCheck(t *testing.T, r *jobs.Runner, st *store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Errorf("runner Stop: %v", err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestStuckAlertDeliveredOnce: a lead received at t0 with stuck.received
// 10m is flagged between t0+10m and t0+11m, its alert goes out once through
// the sandbox (the real delivery job, on the runner), and neither flagging
// again nor a restart sends a second one. The alert is a message to the
// team, not a reply: the lead stays received.
func TestStuckAlertDeliveredOnce(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewClock(mt0)
	g := startAlertRig(t, dir, clock)
	ev := receiveHeld(t, g.st, "lead-1", mt0)
	lead := store.LeadKey("demo", ev.ConversationID)
	alertID := fmt.Sprintf("stuck:%s:%d", lead, mt0.Unix())

	clock.Advance(9 * time.Minute)
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatalf("FlagStuck at t0+9m: %v", err)
	}
	if _, err := g.st.OutboxRow(alertID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an alert exists at t0+9m (%v); the lead is not stuck yet", err)
	}

	clock.Advance(2 * time.Minute)
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatalf("FlagStuck at t0+11m: %v", err)
	}
	var row store.Outbox
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		if row, err = g.st.OutboxRow(alertID); err != nil || row.Status != store.OutboxSent {
			return false
		}
		var jobs []store.Job
		err = g.st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation("alert:" + lead); return err })
		return err == nil && len(jobs) == 1 && jobs[0].State.Final()
	}, "the alert to be sent and its job to complete")
	if row.Kind != store.OutboxAlert || row.Provider != "sandbox" {
		t.Errorf("alert row %+v; want kind alert through the sandbox", row)
	}
	checkOneMessage := func(when string) {
		t.Helper()
		msgs, err := g.st.SandboxMessages(100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Ref != alertID || msgs[0].Repeats != 0 {
			t.Fatalf("%s: sandbox holds %+v; want one message for %s, never repeated", when, msgs, alertID)
		}
		if !strings.Contains(msgs[0].Text, lead) {
			t.Errorf("%s: the alert %q does not name the lead %s", when, msgs[0].Text, lead)
		}
		var jobs []store.Job
		err = g.st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation("alert:" + lead); return err })
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].State != store.JobCompleted {
			t.Fatalf("%s: alert jobs %+v; want one, completed", when, jobs)
		}
		h, err := g.st.Handoff(lead)
		if err != nil {
			t.Fatal(err)
		}
		if h.Status != leads.Received || !h.Stuck() {
			t.Errorf("%s: lead is %s (stuck %v); the alert must leave it received and stuck", when, h.Status, h.Stuck())
		}
	}
	checkOneMessage("after the alert")

	clock.Advance(9 * time.Minute)
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatalf("FlagStuck at t0+20m: %v", err)
	}
	checkOneMessage("after flagging again at t0+20m")

	// A restart: everything closed, opened again, flagged again.
	g.stop(t)
	clock.Advance(time.Minute)
	g = startAlertRig(t, dir, clock)
	t.Cleanup(func() { g.stop(t) })
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatalf("FlagStuck after a restart: %v", err)
	}
	checkOneMessage("after a restart")
}

// TestStuckWithoutAlertSendsNothing: with no stuck.alert a stuck lead is
// flagged and logged, and nothing goes to the outbox.
func TestStuckWithoutAlertSendsNothing(t *testing.T) {
	clock := testkit.NewClock(mt0)
	g := startAlertRig(t, t.TempDir(), clock)
	t.Cleanup(func() { g.stop(t) })
	g.cfg.Stuck.Alert = ""
	ev := receiveHeld(t, g.st, "quiet", mt0)
	clock.Advance(11 * time.Minute)
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := g.st.Handoff(store.LeadKey("demo", ev.ConversationID))
	if err != nil || !h.Stuck() {
		t.Fatalf("lead: stuck %v, %v; want flagged", h.Stuck(), err)
	}
	// Every status a row could have reached, so a row the runner already
	// took (or failed) is seen too.
	for _, s := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxFailed, store.OutboxNeedsReconciliation} {
		if rows, err := g.st.OutboxByStatus(s, 10); err != nil || len(rows) != 0 {
			t.Errorf("outbox %s: %d rows, %v; want none without stuck.alert", s, len(rows), err)
		}
	}
}

// TestMaintenanceBackup writes scheduled backups into the data folder's
// backups folder, keeps backups.keep, and reports each result, a failure
// included.
func TestMaintenanceBackup(t *testing.T) {
	st := openStore(t)
	dataDir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Backups.Keep = 2
	clock := testkit.NewClock(mt0)
	rec := &backupLog{}
	m := &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Backups: rec, Now: clock.Now}
	receiveHeld(t, st, "b-1", mt0)

	var want []string
	for range 3 {
		if err := m.Backup(context.Background()); err != nil {
			t.Fatalf("Backup: %v", err)
		}
		want = append(want, "true@"+clock.Now().Format(time.RFC3339))
		clock.Advance(time.Hour)
	}
	files, err := store.Backups(store.BackupDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Name != store.BackupPrefix+"20260601T110000Z.db" || files[1].Name != store.BackupPrefix+"20260601T100000Z.db" {
		t.Errorf("backups %+v; want the newest 2 of 3", files)
	}
	if store.BackupDir(dataDir) != filepath.Join(dataDir, "backups") {
		t.Errorf("store.BackupDir(%s) = %s; want the backups folder inside it", dataDir, store.BackupDir(dataDir))
	}

	// The folder cannot be made: the backup fails, and says so.
	if err := os.RemoveAll(store.BackupDir(dataDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store.BackupDir(dataDir), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = m.Backup(context.Background())
	if err == nil || !strings.Contains(err.Error(), "scheduled backup") {
		t.Errorf("Backup into a blocked folder = %v; want a scheduled backup error", err)
	}
	want = append(want, "false@"+clock.Now().Format(time.RFC3339))
	if got := rec.all(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("reported %v, want %v", got, want)
	}
}

// TestMaintenanceBackupRejectsADamagedCopy: keep 2, two good backups,
// then one whose copy is truncated before the real verification. The
// task fails with the reason, both good backups stay, the bad copy is in
// backups/rejected/, and the offsite hook never sees it.
func TestMaintenanceBackupRejectsADamagedCopy(t *testing.T) {
	st := openStore(t)
	dataDir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Backups.Keep = 2
	clock := testkit.NewClock(mt0)
	rec := &backupLog{}
	var offsite []string
	m := &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Backups: rec, Now: clock.Now,
		AfterBackup: func(_ context.Context, f store.BackupFile, _ string) error {
			offsite = append(offsite, f.Name)
			return nil
		}}
	receiveHeld(t, st, "r-1", mt0)
	for range 2 {
		if err := m.Backup(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	m.Verify = func(path string) error {
		if err := os.Truncate(path, 4096*3); err != nil {
			t.Fatal(err)
		}
		return store.VerifyFile(path)
	}
	err := m.Backup(context.Background())
	var re *store.RejectedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "failed verification") {
		t.Fatalf("backup of a damaged copy = %v, want a rejection", err)
	}
	files, err := store.Backups(store.BackupDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Name != store.BackupPrefix+"20260601T100000Z.db" || files[1].Name != store.BackupPrefix+"20260601T090000Z.db" {
		t.Errorf("backups %+v; want both good ones", files)
	}
	rejected, err := store.RejectedBackups(store.BackupDir(dataDir))
	if err != nil || len(rejected) != 1 || rejected[0].Name != store.BackupPrefix+"20260601T110000Z.db" || rejected[0].Reason == "" {
		t.Errorf("rejected = %+v (%v), want the bad copy with its reason", rejected, err)
	}
	if len(offsite) != 2 {
		t.Errorf("the offsite hook saw %v, want the two good backups only", offsite)
	}
	if got := rec.all(); len(got) != 3 || !strings.HasPrefix(got[2], "false@") || len(rec.errs) != 1 || !errors.As(rec.errs[0], &re) {
		t.Errorf("reported %v %v, want the third failed with the rejection", got, rec.errs)
	}
}

// TestMaintenancePrune applies retention.events and retention.keys at the
// injected time.
func TestMaintenancePrune(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	cfg := config.Default()
	cfg.Retention.Events, cfg.Retention.Keys = 720*time.Hour, 72*time.Hour
	clock := testkit.NewClock(mt0)
	m := &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Now: clock.Now}

	ev := receiveHeld(t, st, "p-1", mt0)
	// Its work finished: the draft job ran (nothing else hangs off it).
	jobs, err := st.Claim(ctx, mt0.Add(1000*time.Hour), store.AnyJobs(10), time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim = %d, %v", len(jobs), err)
	}
	if _, err := st.FinishJob(ctx, jobs[0].ID, jobs[0].ExecutionID, mt0, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Claim(ctx, st, "n8n-run-1", "h", mt0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Complete(ctx, st, "n8n-run-1", keys.By{}, []byte(`{}`), cfg.Retention.Keys, mt0); err != nil {
		t.Fatal(err)
	}

	clock.Advance(719 * time.Hour)
	if err := m.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventByKey(ev.Key); err != nil {
		t.Errorf("the event inside retention.events was pruned: %v", err)
	}
	if err := st.View(func(tx *store.Tx) error { _, err := tx.IdemKey("n8n-run-1"); return err }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key completed 719h ago with retention.keys 72h: %v; want pruned", err)
	}
	clock.Advance(2 * time.Hour)
	if err := m.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventByKey(ev.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the finished event past retention.events: %v; want pruned", err)
	}
}

// TestStuckAlertNamesTheMissingCRMRecord: a lead of a client with a CRM
// still received past its threshold waits for its CRM record (matched
// means the CRM holds it): its alert says so; a lead of a client without
// one gets the plain sentence.
func TestStuckAlertNamesTheMissingCRMRecord(t *testing.T) {
	clock := testkit.NewClock(mt0)
	g := startAlertRig(t, t.TempDir(), clock)
	t.Cleanup(func() { g.stop(t) })
	var msgs []store.SandboxMessage
	sent := func(n int) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, func() bool {
			var err error
			msgs, err = g.st.SandboxMessages(10)
			return err == nil && len(msgs) == n
		}, fmt.Sprintf("%d alerts to reach the sandbox", n))
	}
	plain := receiveHeld(t, g.st, "plain", mt0)
	clock.Advance(11 * time.Minute)
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent(1)
	g.cfg.CRM = []config.CRM{{Client: config.DefaultClient.ID, Kind: config.CRMWebhook, URL: "https://crm.example.com/hook"}}
	viaCRM := receiveHeld(t, g.st, "via-crm", clock.Now())
	clock.Advance(11 * time.Minute)
	if err := g.maint.FlagStuck(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent(2)
	const why = "Its record is not on the client's CRM yet"
	for _, m := range msgs {
		switch {
		case strings.Contains(m.Ref, viaCRM.ConversationID):
			if !strings.Contains(m.Text, "has been received since") || !strings.Contains(m.Text, why) {
				t.Errorf("alert of the CRM client's lead = %q, want it to say it waits for its CRM record", m.Text)
			}
		case strings.Contains(m.Ref, plain.ConversationID):
			if strings.Contains(m.Text, why) {
				t.Errorf("alert of a lead without a CRM = %q, names a CRM", m.Text)
			}
		default:
			t.Errorf("unexpected sandbox message %+v", m)
		}
	}
	if got := waitsFor(g.cfg, store.Handoff{Channel: "demo", Status: leads.Matched}); got != "" {
		t.Errorf("waitsFor(matched) = %q, want nothing: its record exists", got)
	}
}
