package store

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/handoff/handoff/store/engine"
)

// FuzzReminderForm: a reminder written is read back as it was, by its
// draft and stage and among its draft's; a second of the same stage is
// not written.
func FuzzReminderForm(f *testing.F) {
	f.Add("d01JDRAFT", "remind", "slack,telegram", int64(0))
	f.Add("d01JDRAFT-v2", "window", "email", int64(86400))
	f.Add("d\u00e9 🌸", "escalate", "", int64(-3600))
	f.Add("d\x00nul", "remind", "ntfy", int64(1))
	f.Add("{\n  \"pretty\": \"json\" & <x>\n}", "ان", "slack", int64(5))
	st := openTest(f)
	at := time.Date(2026, 12, 2, 6, 0, 0, 123, time.UTC)
	f.Fuzz(func(t *testing.T, draft, stage, surfaces string, closes int64) {
		r := Reminder{Draft: draft, Stage: stage, At: at}
		if surfaces != "" {
			r.Surfaces = strings.Split(surfaces, ",")
		}
		if closes != 0 {
			r.Closes = at.Add(time.Duration(closes%(1<<30)) * time.Second)
		}
		ctx := context.Background()
		var added bool
		err := st.Update(ctx, func(tx *Tx) (err error) { added, err = tx.AddReminder(r); return err })
		if draft == "" || stage == "" || strings.ContainsRune(draft+stage, 0) || !utf8.ValidString(draft) || !utf8.ValidString(stage) || !utf8.ValidString(strings.ReplaceAll(surfaces, ",", "\x00")) {
			if err == nil {
				t.Fatalf("AddReminder(%q, %q) = nil, want a refusal", draft, stage)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		r.V = recordVersion
		var got Reminder
		var all []Reminder
		if err := st.View(func(tx *Tx) (err error) {
			if got, err = tx.Reminder(draft, stage); err != nil {
				return err
			}
			all, err = tx.RemindersOf(draft)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if added && !reflect.DeepEqual(got, r) {
			t.Fatalf("Reminder = %#v, want %#v", got, r)
		}
		if !slicesHas(all, got) {
			t.Fatalf("RemindersOf(%q) = %+v, want it to hold %+v", draft, all, got)
		}
		again := r
		again.At = at.Add(time.Hour)
		if err := st.Update(ctx, func(tx *Tx) (err error) { added, err = tx.AddReminder(again); return err }); err != nil || added {
			t.Fatalf("a second %s reminder of %q: added %v, %v; want none", stage, draft, added, err)
		}
	})
}

func slicesHas(rs []Reminder, r Reminder) bool {
	for _, x := range rs {
		if reflect.DeepEqual(x, r) {
			return true
		}
	}
	return false
}

// TestAddReminderOnce: many writers adding the same stage of the same
// draft at once add it once.
func TestAddReminderOnce(t *testing.T) {
	st := openTest(t)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		added int
	)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ok bool
			err := st.Update(context.Background(), func(tx *Tx) (err error) {
				ok, err = tx.AddReminder(Reminder{Draft: "d01", Stage: "remind", Surfaces: []string{fmt.Sprint(i)}, At: time.Unix(int64(i), 0)})
				return err
			})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				added++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if added != 1 {
		t.Fatalf("added %d times, want once", added)
	}
}

// TestCheckReminders: Check finds a reminder stored under another draft's
// key, and lists one that cannot be read.
func TestCheckReminders(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Update(context.Background(), func(tx *Tx) error {
		_, err := tx.AddReminder(Reminder{Draft: "d01", Stage: "remind", At: time.Unix(0, 0)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := st.raw(func(tx engine.Tx) error {
		return tx.Bucket(bucketReminders).Put(reminderKey("d02", "remind"), []byte(`{"v":1,"draft":"d01","stage":"remind","at":"1970-01-01T00:00:00Z"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err == nil || !strings.Contains(err.Error(), `the reminder at "d02/remind" is the remind reminder of draft d01`) {
		t.Fatalf("Check = %v, want the misplaced reminder named", err)
	}
	if err := st.raw(func(tx engine.Tx) error {
		b := tx.Bucket(bucketReminders)
		if err := b.Delete(reminderKey("d02", "remind")); err != nil {
			return err
		}
		return b.Put(reminderKey("d03", "window"), []byte(`{"v":1,"draft":`))
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := st.Inspect()
	if err != nil || len(rep.Damaged) != 0 || len(rep.Unreadable) != 1 || rep.Unreadable[0].Kind != "reminder" {
		t.Fatalf("Inspect = %+v, %v; want the damaged reminder listed", rep, err)
	}
}
