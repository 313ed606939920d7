package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Subject names whose data an export or an erase is about: the leads of
// some channels (a client's), or within them one contact's.
type Subject struct {
	Client   string   // the client's id, for the record
	Channels []string // the client's channels
	// Contact, when set, keeps the leads whose contact or conversation id
	// it is; empty: every lead of the channels.
	Contact string
}

// has reports whether lead h is the subject's.
func (sub Subject) has(h Handoff) bool {
	return sub.Contact == "" || h.Contact == sub.Contact || h.ConversationID == sub.Contact
}

// ExportLead is one lead with everything stored about it.
type ExportLead struct {
	Lead   Handoff  `json:"lead"`
	Events []Event  `json:"events"`
	Drafts []Draft  `json:"drafts"`
	Outbox []Outbox `json:"outbox"`
	// Sandbox is what the built-in sandbox provider received for its replies.
	Sandbox []SandboxMessage `json:"sandbox,omitempty"`
}

// An export steps over a record that cannot be read and goes on: each one
// is listed at the end of the document ("unreadable": kind, id, reason),
// so the export is whole but for them, and says which.

// exportVersion is the export's format version (the "v" of its header).
const exportVersion = 1

// Export writes, as one JSON document, every lead of sub with its events,
// drafts, outbox rows and sandbox messages, as of one read transaction:
// {"v":1,"client":…,"contact":…,"channels":[…],"exported_at":…,"leads":[…],"unreadable":[…]}.
// It streams a lead at a time, so a large client costs one lead's memory;
// the transaction stays open while w is written. It returns how many
// leads it wrote.
func (s *Store) Export(w io.Writer, sub Subject, now time.Time) (int, error) {
	n := 0
	err := s.view(func(tx *Tx) error {
		n = 0
		head, err := json.Marshal(struct {
			V          int       `json:"v"`
			Client     string    `json:"client"`
			Contact    string    `json:"contact,omitempty"`
			Channels   []string  `json:"channels"`
			ExportedAt time.Time `json:"exported_at"`
		}{exportVersion, sub.Client, sub.Contact, sub.Channels, now.UTC()})
		if err != nil {
			return err
		}
		// The header's closing brace gives way to the list of leads.
		if _, err := fmt.Fprintf(w, "%s,\"leads\":[", head[:len(head)-1]); err != nil {
			return err
		}
		var skipped []Unreadable
		err = eachLeadSkipping(tx, sub, "", &skipped, func(h Handoff) (bool, error) {
			l, err := exportLead(tx, h, &skipped)
			if err != nil {
				return false, err
			}
			raw, err := json.Marshal(l)
			if err != nil {
				return false, err
			}
			if n > 0 {
				if _, err := io.WriteString(w, ","); err != nil {
					return false, err
				}
			}
			n++
			_, err = w.Write(raw)
			return true, err
		})
		if err != nil {
			return err
		}
		if skipped == nil {
			skipped = []Unreadable{}
		}
		tail, err := json.Marshal(skipped)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "],\"unreadable\":%s}\n", tail)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: export %s: %w", sub.Client, err)
	}
	return n, nil
}

// eachLeadAfter calls fn for every lead of sub whose key sorts after
// after ("" from the start), in key order, until fn answers false.
func eachLeadAfter(tx *Tx, sub Subject, after string, fn func(Handoff) (bool, error)) error {
	return eachLeadSkipping(tx, sub, after, nil, fn)
}

// eachLeadSkipping is eachLeadAfter that, with skipped, steps over a lead
// that cannot be read (listed in skipped when it may be sub's: a client's
// export, or a lead keyed by the contact), where eachLeadAfter fails.
func eachLeadSkipping(tx *Tx, sub Subject, after string, skipped *[]Unreadable, fn func(Handoff) (bool, error)) error {
	channels := slices.Sorted(slices.Values(sub.Channels))
	afterCh, _, _ := strings.Cut(after, ":")
	c := tx.bucket(bucketHandoffs).Cursor()
	for _, ch := range channels {
		if after != "" && ch < afterCh {
			continue // walked before
		}
		prefix := []byte(ch + ":")
		k, v := c.Seek(prefix)
		if after != "" && ch == afterCh {
			if k, v = c.Seek([]byte(after)); k != nil && string(k) == after {
				k, v = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var h Handoff
			if err := decode(v, &h); err != nil {
				if skipped == nil {
					return fmt.Errorf("lead %s: %w", k, err)
				}
				var list *[]Unreadable
				if sub.Contact == "" || string(k) == ch+":"+sub.Contact {
					list = skipped
				}
				tx.skip(unreadableOf("lead", k, err), list)
				continue
			}
			if !sub.has(h) {
				continue
			}
			more, err := fn(h)
			if err != nil || !more {
				return err
			}
		}
	}
	return nil
}

// exportLead gathers what is stored about lead h.
// The records of it that cannot be read are added to skipped.
func exportLead(tx *Tx, h Handoff, skipped *[]Unreadable) (ExportLead, error) {
	l := ExportLead{Lead: h, Events: []Event{}, Drafts: []Draft{}, Outbox: []Outbox{}}
	err := eachLeadEventSkipping(tx, h.Key, skipped, func(ev Event) error {
		l.Events = append(l.Events, ev)
		for _, d := range draftsOfSkipping(tx, ev.Key, skipped) {
			l.Drafts = append(l.Drafts, d)
			if d.OutboxID == "" {
				continue
			}
			o, err := tx.Outbox(d.OutboxID)
			if tx.skip(err, skipped) || err != nil {
				continue // unreadable (listed), or gone with retention
			}
			l.Outbox = append(l.Outbox, o)
			var m SandboxMessage
			if getJSON(tx.bucket(bucketSandbox), []byte(o.ID), &m) == nil {
				l.Sandbox = append(l.Sandbox, m)
			}
		}
		return nil
	})
	if err != nil {
		return ExportLead{}, err
	}
	alerts, err := leadAlertsSkipping(tx, h.Key, skipped)
	l.Outbox = append(l.Outbox, alerts...)
	return l, err
}

// eachLeadEvent calls fn for every event of lead, oldest first.
func eachLeadEvent(tx *Tx, lead string, fn func(Event) error) error {
	return eachLeadEventSkipping(tx, lead, nil, fn)
}

// eachLeadEventSkipping is eachLeadEvent that, with skipped, steps over
// an event that cannot be read (listing it) where eachLeadEvent fails.
func eachLeadEventSkipping(tx *Tx, lead string, skipped *[]Unreadable, fn func(Event) error) error {
	prefix := append([]byte(lead), 0)
	c := tx.bucket(bucketEventsByConv).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ev, err := tx.event(string(k[len(prefix):]))
		if skipped != nil && tx.skip(err, skipped) {
			continue
		}
		if err != nil {
			return fmt.Errorf("conversation index points at event %s: %w", k[len(prefix):], err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

// leadAlerts reads the stuck-lead alerts about lead, its CRM writes and
// its outbound events (they carry its contact or words too: export and
// erasure treat them alike).
func leadAlerts(tx *Tx, lead string) ([]Outbox, error) { return leadAlertsSkipping(tx, lead, nil) }

// leadAlertsSkipping is leadAlerts that, with skipped, steps over an alert
// that cannot be read (listing it).
func leadAlertsSkipping(tx *Tx, lead string, skipped *[]Unreadable) ([]Outbox, error) {
	var out []Outbox
	for _, kind := range []string{"stuck:", "crm:", "ev:"} { // alerts, then CRM writes (OutboxCRM), then outbound events (OutboxEvent)
		prefix := []byte(kind + lead + ":")
		c := tx.bucket(bucketOutbox).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			o, err := tx.Outbox(string(k))
			if skipped != nil && tx.skip(err, skipped) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if (o.Kind == OutboxCRM || o.Kind == OutboxEvent) && LeadKey(o.Channel, o.ConversationID) != lead {
				continue // another lead's, whose conversation id starts with this one's
			}
			out = append(out, o)
		}
	}
	return out, nil
}
