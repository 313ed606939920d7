package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// FuzzPushTokenForm: a push token written is read back as it was, spent
// once (a second spend finds nothing), and refused past its expiry.
func FuzzPushTokenForm(f *testing.F) {
	f.Add("tok-1", "d01JDRAFT", "dana", int64(1800))
	f.Add("\x00", "d01JD-v2", "zoë 🌸 & <bea>", int64(1))
	f.Add("long", `{"pretty": "json"}`, "ان", int64(-5))
	st := openTest(f)
	at := time.Date(2026, 12, 2, 6, 0, 0, 123, time.UTC)
	f.Fuzz(func(t *testing.T, token, draft, user string, ttl int64) {
		h := sha256.Sum256([]byte(token + draft + user))
		pt := PushToken{Surface: "ntfy", Draft: draft, User: user, CreatedAt: at, Expires: at.Add(time.Duration(ttl) * time.Second)}
		ctx := context.Background()
		err := st.Update(ctx, func(tx *Tx) error { return tx.PutPushToken(h[:], pt) })
		if draft == "" || user == "" {
			if err == nil {
				t.Fatal("a token without its draft or person was stored")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		pt.V = recordVersion
		var got PushToken
		if err := st.View(func(tx *Tx) (err error) { got, err = tx.PushToken(h[:]); return err }); err != nil || !reflect.DeepEqual(got, pt) {
			t.Fatalf("PushToken = %+v, %v; want %+v", got, err, pt)
		}
		spend := func() (PushToken, error) {
			var out PushToken
			err := st.Update(ctx, func(tx *Tx) (err error) { out, err = tx.SpendPushToken(h[:], at); return err })
			return out, err
		}
		got, err = spend()
		var expired *ExpiredTokenError
		switch {
		case ttl <= 0:
			if !errors.As(err, &expired) {
				t.Fatalf("an expired token spent: %+v, %v", got, err)
			}
			// The refusal rolled back: the sweep deletes it.
			if n, err := st.SweepPushTokens(ctx, at, 100); err != nil || n != 1 {
				t.Fatalf("sweep = %d, %v; want the expired token", n, err)
			}
		case err != nil || !reflect.DeepEqual(got, pt):
			t.Fatalf("spend = %+v, %v; want %+v", got, err, pt)
		}
		if _, err := spend(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a second spend: %v, want ErrNotFound", err)
		}
	})
}

// TestPushTokenSpentOnce: two spends of one token at once: one gets it.
func TestPushTokenSpentOnce(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for i := range 20 {
		h := sha256.Sum256([]byte{byte(i)})
		if err := st.Update(ctx, func(tx *Tx) error {
			return tx.PutPushToken(h[:], PushToken{Surface: "ntfy", Draft: "d1", User: "dana", CreatedAt: at, Expires: at.Add(time.Minute)})
		}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := st.Update(ctx, func(tx *Tx) error { _, err := tx.SpendPushToken(h[:], at); return err })
				if err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				} else if !errors.Is(err, ErrNotFound) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d spends of one token succeeded, want 1", won)
		}
	}
	// The sweep keeps live tokens and deletes expired ones.
	live, old := sha256.Sum256([]byte("live")), sha256.Sum256([]byte("old"))
	if err := st.Update(ctx, func(tx *Tx) error {
		if err := tx.PutPushToken(live[:], PushToken{Draft: "d2", User: "dana", Expires: at.Add(time.Hour)}); err != nil {
			return err
		}
		return tx.PutPushToken(old[:], PushToken{Draft: "d3", User: "dana", Expires: at.Add(-time.Second)})
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.SweepPushTokens(ctx, at, 100); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1", n, err)
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.PushToken(live[:]); return err }); err != nil {
		t.Errorf("the live token after the sweep: %v", err)
	}
}
