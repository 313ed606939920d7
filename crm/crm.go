// Package crm writes each lead's status to its client's CRM once per
// status of a cycle: every move of a lead (the store's LeadHook) enqueues, in
// the move's own transaction, an outbox row of kind store.OutboxCRM with a
// deterministic id, "crm:<lead key>:<cycle>:<status>", and its delivery
// job (delivery.CreateCRMTx). The delivery job sends it by a reply's rules,
// reading the CRM's capabilities from its sink here:
//
//	webhook    Standard Webhooks-signed JSON; webhook-id derived from the row id,
//	           so the receiver dedupes: a resend is safe (IdempotencyKey)
//	hubspot    contacts batch upsert with idProperty = our lead key: a resend
//	           is the same upsert, safe (IdempotencyKey)
//	pipedrive  search the person by our reference before creating one: NOT
//	           safe to resend blindly; after an unknown outcome the job looks
//	           the record up (Lookup, counted after lookup_settle), else
//	           a person reconciles
//
// A CRM outage only queues jobs: ingest and drafting never wait on it.
// The rows of one lead go out in their order (Hold): a later status waits
// while an earlier write of the lead is unfinished, and a replay of an old
// write over a newer one is refused.
package crm

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// Record is what one write puts on the CRM's record, as the row keeps it
// (its Text): the lead's status at the move and what is known of the contact.
type Record struct {
	V       int    `json:"v"`
	Lead    string `json:"lead"` // the lead key, "<channel>:<conversation id>"
	Ref     string `json:"ref"`  // Reference(Lead): what a CRM that searches finds the record by
	Cycle   int    `json:"cycle"`
	Status  string `json:"handoff_status"`
	Channel string `json:"channel"`
	Name    string `json:"name,omitempty"`
	Phone   string `json:"phone,omitempty"`
	Email   string `json:"email,omitempty"`
	// Owner is routing's owner name, OwnerID the CRM's user id for it
	// (crm[].owners), empty when the config maps none.
	Owner       string    `json:"owner,omitempty"`
	OwnerID     string    `json:"owner_id,omitempty"`
	LastMessage string    `json:"last_message,omitempty"`
	Link        string    `json:"link,omitempty"` // the lead's latest message in handoff's dashboard
	At          time.Time `json:"at"`
	// Stuck marks the write of a lead flagged stuck in its status (past
	// its stuck threshold, StuckTx): the CRM's status field then reads
	// StatusValue's "<status> (stuck)", the webhook's data "stuck": true.
	Stuck bool `json:"stuck,omitempty"`
}

// StuckSuffix is what a stuck lead's status field says after its status.
const StuckSuffix = " (stuck)"

// StatusValue is what r puts in the CRM's status field (handoff_status):
// the lead's status, "matched (stuck)" for a lead flagged stuck in it.
func StatusValue(r Record) string {
	if r.Stuck {
		return r.Status + StuckSuffix
	}
	return r.Status
}

// maxLastMessage bounds the last message a record carries (runes).
const maxLastMessage = 1000

// Encode is the record's stored form (the row's Text).
func (r Record) Encode() string {
	b, _ := json.Marshal(r) // strings and a time: nothing can fail
	return string(b)
}

// Decode reads a row's Text back.
func Decode(text string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return Record{}, fmt.Errorf("crm: the row's record cannot be read: %w", err)
	}
	if r.V != 1 || r.Lead == "" || r.Status == "" {
		return Record{}, errors.New("crm: the row's record names no lead or status")
	}
	return r, nil
}

// RowID is the outbox id of lead's first write for status in cycle: one
// per status of a cycle, so a move that runs again writes nothing new.
func RowID(lead string, cycle int, status store.HandoffStatus) string {
	return WriteKey{Lead: lead, Cycle: cycle, Status: status}.String()
}

// WriteKey names one CRM write: the lead's status in a cycle, and which
// return to that status it is. A cycle can reach a status twice (a close
// undone puts the lead back to the status it was closed from, already
// written): the first is Repeat 0, "crm:<lead>:<cycle>:<status>", each
// return after it "…:r<n>", n counting the earlier stays in the status in
// that cycle, so every move is its own row and the CRM hears the lead is
// open again.
//
// Stuck is the write that marks the stay stuck (StuckTx): the stay's
// key with ":stuck" after it, once per stay.
type WriteKey struct {
	Lead   string
	Cycle  int
	Status store.HandoffStatus
	Repeat int
	Stuck  bool
}

// String is the key's outbox row id.
func (k WriteKey) String() string {
	id := "crm:" + k.Lead + ":" + strconv.Itoa(k.Cycle) + ":" + string(k.Status)
	if k.Repeat > 0 {
		id += ":r" + strconv.Itoa(k.Repeat)
	}
	if k.Stuck {
		id += stuckTail
	}
	return id
}

const stuckTail = ":stuck"

// ParseWriteKey is WriteKey.String's inverse; ok is false for an id that is
// no CRM write's (or not in the canonical form String writes).
func ParseWriteKey(id string) (k WriteKey, ok bool) {
	rest, found := strings.CutPrefix(id, "crm:")
	if !found {
		return WriteKey{}, false
	}
	if r, stuck := strings.CutSuffix(rest, stuckTail); stuck {
		if k, ok = ParseWriteKey("crm:" + r); ok && !k.Stuck {
			k.Stuck = true
			return k, true
		}
		// else: a lead key that ends in ":stuck" (parsed below)
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return WriteKey{}, false
	}
	// "received" and "replied" begin with r too: a status is never a repeat.
	if r, isRepeat := strings.CutPrefix(rest[i+1:], "r"); isRepeat && !leads.Valid(store.HandoffStatus(rest[i+1:])) {
		n, ok := canonicalInt(r)
		if !ok || n == 0 {
			return WriteKey{}, false
		}
		k.Repeat, rest = n, rest[:i]
		if i = strings.LastIndexByte(rest, ':'); i < 0 {
			return WriteKey{}, false
		}
	}
	k.Status = store.HandoffStatus(rest[i+1:])
	rest = rest[:i]
	j := strings.LastIndexByte(rest, ':')
	if j < 0 {
		return WriteKey{}, false
	}
	n, ok := canonicalInt(rest[j+1:])
	if !ok || rest[:j] == "" || !leads.Valid(k.Status) {
		return WriteKey{}, false
	}
	k.Lead, k.Cycle = rest[:j], n
	return k, true
}

// canonicalInt reads a non-negative decimal written as strconv.Itoa writes
// it (no sign, no leading zero), so one key has one id.
func canonicalInt(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// ParseRowID names the lead, cycle and status of a CRM write's row id;
// ok is false for an id that is no CRM write's.
func ParseRowID(id string) (lead string, cycle int, status store.HandoffStatus, ok bool) {
	k, ok := ParseWriteKey(id)
	return k.Lead, k.Cycle, k.Status, ok
}

// KeyAt is the write of lead h's move i (h.History[i]): its status in its
// cycle, and how many stays in that status of the cycle came before it.
func KeyAt(h store.Handoff, i int) WriteKey {
	t := h.History[i]
	k := WriteKey{Lead: h.Key, Cycle: t.Cycle, Status: t.Status}
	for _, e := range h.History[:i] {
		if e.Cycle == t.Cycle && e.Status == t.Status {
			k.Repeat++
		}
	}
	return k
}

// RowIDs are the row ids of lead h's writes, one per move, in the order of
// its history (a lead moved before its client had a CRM has no row for
// those: the caller reads which exist).
func RowIDs(h store.Handoff) []string {
	ids := make([]string, len(h.History))
	for i := range h.History {
		ids[i] = KeyAt(h, i).String()
	}
	return ids
}

// Reference is the short key a lead is found by in a CRM that searches
// (Pipedrive's exact search takes at most 30 characters): "ho_" and 26
// characters of the lead key's SHA-256, which also keeps the customer's
// number or address out of the CRM's search field.
func Reference(lead string) string {
	sum := sha256.Sum256([]byte(lead))
	return "ho_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

// Hook is the store's LeadHook app sets (Store.HookLeadMoves): each move of a lead of
// a client with a CRM enqueues its write in the move's transaction.
func Hook(cfg *config.Config) store.LeadHook {
	return func(tx *store.Tx, h store.Handoff, now time.Time) error {
		_, err := MoveTx(tx, cfg, h, now)
		return err
	}
}

// MoveTx creates lead h's write for its status, as just moved in tx, when
// its channel's client has a CRM: the row and its delivery job commit with
// the move. created is false when the client has none, or the row exists.
func MoveTx(tx *store.Tx, cfg *config.Config, h store.Handoff, now time.Time) (created bool, err error) {
	m, ok := cfg.CRMFor(h.Channel)
	if !ok {
		return false, nil
	}
	rec := NewRecord(h, m, cfg.BaseURL, now)
	if ev, err := tx.EventByKey(h.LastEventKey); err == nil {
		rec.LastMessage = clip(ev.Text, maxLastMessage)
		if rec.Name == "" {
			rec.Name = clean(ev.Name)
		}
	}
	created, err = delivery.CreateCRMTx(tx, delivery.CRMWrite{
		ID: MoveKey(h).String(), Lead: h, Provider: m.ProviderName(), To: m.Kind + " record of lead " + h.Key + " (" + rec.Ref + ")",
		Text: rec.Encode(), At: now, JobID: ulid.Make().String(), MaxAttempts: cfg.Retry.MaxAttempts,
	})
	if err != nil {
		return false, fmt.Errorf("crm: write of lead %s: %w", h.Key, err)
	}
	return created, nil
}

// Written is the store's OutboxHook app sets (Store.HookOutboxMoves): a
// CRM write whose row just moved to sent, in the transaction that records
// it on the record (the delivery job's answer, a lookup, a person's
// reconciliation), moves its lead: WrittenTx.
func Written() store.OutboxHook {
	return func(tx *store.Tx, old *store.Outbox, o store.Outbox) error {
		_, err := WrittenTx(tx, old, o)
		return err
	}
}

// WrittenTx moves the lead of o, a CRM write just moved to sent in tx
// (from old), forward: the CRM holds its record, so a lead of the write's
// cycle still received moves to matched, then to owned with the owner kept
// for it (leads.CRMRecordTx). Any other row, or move, moves nothing.
func WrittenTx(tx *store.Tx, old *store.Outbox, o store.Outbox) (moved bool, err error) {
	if o.Kind != store.OutboxCRM || o.Status != store.OutboxSent || old != nil && old.Status == store.OutboxSent {
		return false, nil
	}
	k, ok := ParseWriteKey(o.ID)
	if !ok {
		return false, nil
	}
	moved, err = leads.CRMRecordTx(tx, k.Lead, k.Cycle, o.UpdatedAt)
	if err != nil {
		return false, fmt.Errorf("crm: lead of write %s: %w", o.ID, err)
	}
	return moved, nil
}

// StuckHook is told, in the flagging's transaction, of each lead the stuck
// sweep flags (leads.FlagStuck's AlertTx, beside the alert): StuckTx.
func StuckHook(cfg *config.Config) func(tx *store.Tx, h store.Handoff, now time.Time) error {
	return func(tx *store.Tx, h store.Handoff, now time.Time) error {
		_, err := StuckTx(tx, cfg, h, now)
		return err
	}
}

// StuckTx writes to lead h's CRM record that its stay in its status is
// stuck, h being just flagged in tx: one more write of the stay, keyed
// "<the stay's write id>:stuck" (once per stay), whose status field reads
// "<status> (stuck)" (StatusValue). It goes out after the stay's own write
// and is refused if a later status is already on the record; the lead's
// next move writes its status without the marker.
func StuckTx(tx *store.Tx, cfg *config.Config, h store.Handoff, now time.Time) (created bool, err error) {
	m, ok := cfg.CRMFor(h.Channel)
	if !ok {
		return false, nil
	}
	k := MoveKey(h)
	k.Stuck = true
	rec := NewRecord(h, m, cfg.BaseURL, now)
	rec.Stuck = true
	if ev, err := tx.EventByKey(h.LastEventKey); err == nil {
		rec.LastMessage = clip(ev.Text, maxLastMessage)
		if rec.Name == "" {
			rec.Name = clean(ev.Name)
		}
	}
	created, err = delivery.CreateCRMTx(tx, delivery.CRMWrite{
		ID: k.String(), Lead: h, Provider: m.ProviderName(), To: m.Kind + " record of lead " + h.Key + " (" + rec.Ref + "), stuck in " + string(h.Status),
		Text: rec.Encode(), At: now, JobID: ulid.Make().String(), MaxAttempts: cfg.Retry.MaxAttempts,
	})
	if err != nil {
		return false, fmt.Errorf("crm: stuck write of lead %s: %w", h.Key, err)
	}
	return created, nil
}

// MoveKey is the key of the move h was just put through: its newest
// transition's (every move appends one), else its status's first write.
// The CRM write's row id is its String; outbound's lead.status_changed
// is keyed by it too.
func MoveKey(h store.Handoff) WriteKey {
	if n := len(h.History); n > 0 && h.History[n-1].Cycle == h.Cycle && h.History[n-1].Status == h.Status {
		return KeyAt(h, n-1)
	}
	return WriteKey{Lead: h.Key, Cycle: h.Cycle, Status: h.Status}
}

// NewRecord is lead h's record for CRM m at now (without its last
// message, which MoveTx reads from the event). Every string is made valid
// UTF-8 here, so the stored form reads back as written.
func NewRecord(h store.Handoff, m config.CRM, baseURL string, now time.Time) Record {
	r := Record{V: 1, Lead: clean(h.Key), Ref: Reference(h.Key), Cycle: h.Cycle, Status: clean(string(h.Status)), Channel: clean(h.Channel),
		Name: clean(h.Name), Owner: clean(h.Owner), OwnerID: m.Owners[h.Owner], At: now.UTC().Round(0)}
	switch c := strings.TrimSpace(h.Contact); {
	case strings.Contains(c, "@"):
		r.Email = clean(c)
	case isPhone(c):
		r.Phone = clean(c)
	}
	if baseURL != "" && h.LastEventKey != "" {
		r.Link = baseURL + "/events/" + url.PathEscape(h.LastEventKey)
	}
	return r
}

func isPhone(s string) bool {
	digits := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case strings.ContainsRune("+ -().", r):
		default:
			return false
		}
	}
	return digits >= 5
}

func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func clip(s string, n int) string {
	s = clean(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// kind is what a CRM kind does on the wire; sink adds the rules every
// kind shares.
type kind interface {
	send(ctx context.Context, rowID string, r Record) (string, error)
	lookup(ctx context.Context, rowID string, r Record) (string, bool, error)
	// owner reads back, after a write answered providerID, the owner the
	// CRM gave the record by its own rules: its user id, "" when none.
	owner(ctx context.Context, providerID string, r Record) (string, error)
	caps() provider.Capabilities
}

// sink is one client's CRM as the delivery job sees it (delivery.Sender,
// provider.Holder).
type sink struct {
	name string
	st   *store.Store
	k    kind
	// owners maps the CRM's user ids back to routing's owner names
	// (crm[].owners read backwards).
	owners   map[string]string
	kindName string
	// wait is how long a write waits behind an unfinished earlier one of
	// its lead before the job asks again (not an attempt).
	wait time.Duration
	log  *slog.Logger
	now  func() time.Time
}

// Options are what the sinks take from the process.
type Options struct {
	// Logger is told of an owner read back that failed; nil: slog.Default.
	Logger *slog.Logger
	// Now stamps the lead moves of an owner read back; nil: time.Now.
	Now func() time.Time
}

// holdWait is how long a write waits behind an unfinished earlier write of
// its lead before the delivery job asks again (one read; no attempt): at
// least this, and a quarter of how long the earlier one has been at it, up
// to a minute (each snooze is a claim the job records, so a long wait must
// not mean thousands of them).
const holdWait = 500 * time.Millisecond

// waitFor is a snooze that grows with how long the awaited row has been in
// its state (since), a quarter of it, between lo and hi.
func waitFor(since time.Time, lo, hi time.Duration) time.Duration {
	return min(max(time.Since(since)/4, lo), hi)
}

// Open builds the CRM of every client that has one, by its provider name
// ("crm:<client>"), for the delivery job and a person's lookup.
func Open(cfg *config.Config, st *store.Store, opt Options) (map[string]delivery.Sender, error) {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	out := make(map[string]delivery.Sender, len(cfg.CRM))
	for _, m := range cfg.CRM {
		var k kind
		switch m.Kind {
		case config.CRMWebhook:
			k = newWebhook(m)
		case config.CRMHubSpot:
			k = newHubSpot(m, st)
		case config.CRMPipedrive:
			k = newPipedrive(m, st)
		default:
			return nil, fmt.Errorf("crm: client %s: unknown CRM kind %q", m.Client, m.Kind)
		}
		back := make(map[string]string, len(m.Owners))
		for name, id := range m.Owners {
			back[id] = name
		}
		out[m.ProviderName()] = &sink{name: m.ProviderName(), st: st, k: k, wait: holdWait, owners: back, kindName: m.Kind, log: opt.Logger, now: opt.Now}
	}
	return out, nil
}

// Send writes the row's record once; a write that an already-sent newer
// write of the lead supersedes is refused (it would set the record back).
func (s *sink) Send(ctx context.Context, m provider.Message) (string, error) {
	r, err := Decode(m.Text)
	if err != nil {
		return "", &provider.Permanent{Err: err}
	}
	if newer, ok := s.newerSent(m.Ref); ok {
		return "", &provider.Permanent{Err: fmt.Errorf("%s: a newer write of lead %s (%s) already holds the record; this older one would set its status back", s.name, r.Lead, newer)}
	}
	id, err := s.k.send(ctx, m.Ref, r)
	if err == nil {
		s.readOwner(ctx, id, r)
	}
	return id, err
}

// Lookup finds the row's write on the CRM: the record holds its status.
func (s *sink) Lookup(ctx context.Context, ref, _ string) (string, bool, error) {
	row, err := s.st.OutboxRow(ref)
	if err != nil {
		return "", false, fmt.Errorf("%s: lookup %s: %w", s.name, ref, err)
	}
	r, err := Decode(row.Text)
	if err != nil {
		return "", false, err
	}
	id, found, err := s.k.lookup(ctx, ref, r)
	if err == nil && found {
		s.readOwner(ctx, id, r)
	}
	return id, found, err
}

// ownerReads bounds the owner read's tries after one write.
const ownerReads = 3

// readOwner, after r's write is on the record (answered providerID), reads
// the owner the CRM gave the record by its own rules when handoff has none
// for the lead (r, a write of received or matched, named no owner id), and
// moves the lead to owned with it (leads.CRMOwnerTx): the owner's routing
// name when crm[].owners maps the id, else "<kind> user <id>". The write
// stands whatever the read does: a failed read (logged), or a lead moved on
// meanwhile, moves nothing, and the lead's next write reads again (its
// stuck write too: StuckTx, so a workflow's late owner is found then).
func (s *sink) readOwner(ctx context.Context, providerID string, r Record) {
	if r.OwnerID != "" || r.Status != string(leads.Received) && r.Status != string(leads.Matched) {
		return
	}
	var id string
	for try := 0; ; try++ {
		var err error
		if id, err = s.k.owner(ctx, providerID, r); err == nil {
			break
		}
		// A read changes nothing, so it is asked again at once on any
		// failure a retry may cure (429 after its Retry-After, up to 1 s;
		// 5xx; the connection), at most ownerReads times.
		var perm *provider.Permanent
		if try+1 >= ownerReads || errors.As(err, &perm) {
			s.log.Warn("crm: the owner the CRM gave the record could not be read; the lead's next write reads it again",
				"crm", s.name, "lead", r.Lead, "record", providerID, "tries", try+1, "err", err)
			return
		}
		wait := 50 * time.Millisecond
		var ns *provider.NotSent
		if errors.As(err, &ns) && ns.RetryAfter > 0 {
			wait = min(ns.RetryAfter, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	if id == "" {
		return
	}
	name, note := s.owners[id], s.kindName+" assigned the record to user "+id
	if name == "" {
		name = s.kindName + " user " + id
	} else {
		note += " (" + name + ")"
	}
	if err := s.st.Update(ctx, func(tx *store.Tx) error {
		_, err := leads.CRMOwnerTx(tx, r.Lead, r.Cycle, name, note, s.now())
		return err
	}); err != nil {
		s.log.Warn("crm: the owner the CRM gave the record was read but not recorded; the lead's next write reads it again",
			"crm", s.name, "lead", r.Lead, "owner", name, "err", err)
	}
}

// Capabilities are the kind's.
func (s *sink) Capabilities() provider.Capabilities { return s.k.caps() }

// Hold keeps a lead's writes in their order: while an earlier write of the
// lead is pending or in flight, this one waits (the delivery job snoozes,
// no attempt counted), so a late "matched" never lands over "owned".
func (s *sink) Hold(ref string, _ time.Time) time.Duration {
	for _, id := range around(s.st, ref, true) {
		if o, err := s.st.OutboxRow(id); err == nil && (o.Status == store.OutboxPending || o.Status == store.OutboxEffectPending) {
			return waitFor(o.CreatedAt, s.wait, time.Minute)
		}
	}
	return 0
}

// newerSent names a later write of ref's lead that is sent already.
func (s *sink) newerSent(ref string) (string, bool) {
	for _, id := range around(s.st, ref, false) {
		if o, err := s.st.OutboxRow(id); err == nil && o.Status == store.OutboxSent {
			return id, true
		}
	}
	return "", false
}

// around lists the write ids of ref's lead before it (earlier) or after
// it, from the lead's history, nearest first, at most 16.
func around(st *store.Store, ref string, earlier bool) []string {
	k, ok := ParseWriteKey(ref)
	if !ok {
		return nil
	}
	h, err := st.Handoff(k.Lead)
	if err != nil {
		return nil
	}
	// Each stay's stuck write, if any, follows the stay's own write.
	var all []string
	for _, id := range RowIDs(h) {
		all = append(all, id, id+stuckTail)
	}
	at := slices.Index(all, ref)
	if at < 0 {
		return nil
	}
	var ids []string
	add := func(id string) {
		if id != ref && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if earlier {
		for i := at - 1; i >= 0 && len(ids) < 16; i-- {
			add(all[i])
		}
	} else {
		for i := at + 1; i < len(all) && len(ids) < 16; i++ {
			add(all[i])
		}
	}
	return ids
}

// earlierSent is the CRM's answer to the nearest earlier write of ref's
// lead that is sent (its row's provider id), "" when there is none.
func earlierSent(st *store.Store, ref string) string {
	for _, id := range around(st, ref, true) {
		if o, err := st.OutboxRow(id); err == nil && o.Status == store.OutboxSent && o.ProviderID != "" {
			return o.ProviderID
		}
	}
	return ""
}
