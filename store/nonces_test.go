package store

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

func TestSpendNonce(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	fpA, fpB := []byte("request A"), []byte("request B")
	n := func(value string, at time.Time, fp []byte) Nonce {
		return Nonce{Scope: "mail", Value: value, SignedAt: at, Keep: 5 * time.Minute, Request: fp}
	}
	steps := []struct {
		name  string
		nonce Nonce
		now   time.Time
		want  []byte // nil: unspent until now
	}{
		{"first spend", n("tok1", t0, fpA), t0, nil},
		{"the same request again", n("tok1", t0, fpB), t0.Add(time.Second), fpA},
		{"another scope", Nonce{Scope: "other", Value: "tok1", SignedAt: t0, Keep: time.Minute, Request: fpB}, t0, nil},
		{"another value", n("tok2", t0, fpB), t0, nil},
		{"the same value signed at another time", n("tok1", t0.Add(time.Second), fpB), t0.Add(time.Second), nil},
	}
	for _, s := range steps {
		got, err := st.SpendNonce(ctx, s.nonce, s.now)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !bytes.Equal(got, s.want) {
			t.Errorf("%s: SpendNonce = %q, want %q", s.name, got, s.want)
		}
	}
	if c, _ := nonceCount(st, "mail"); c != 3 {
		t.Fatalf("mail nonces = %d, want 3", c)
	}
	// A spend past the tolerance sweeps the scope's older nonces, and only
	// the scope's.
	if _, err := st.SpendNonce(ctx, n("tok3", t0.Add(time.Hour), fpA), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if c, _ := nonceCount(st, "mail"); c != 1 {
		t.Errorf("mail nonces after the sweep = %d, want 1 (the new one)", c)
	}
	if c, _ := nonceCount(st, "other"); c != 1 {
		t.Errorf("other nonces after mail's sweep = %d, want 1", c)
	}
}

// Concurrent spends of one nonce by different requests: exactly one finds
// it unspent, however the group commit batches them.
func TestSpendNonceConcurrent(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	const n = 16
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		fresh = make(chan int, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			first, err := st.SpendNonce(ctx, Nonce{Scope: "mail", Value: "tok", SignedAt: t0, Keep: time.Minute, Request: []byte{byte(i)}}, t0)
			if err != nil {
				t.Error(err)
				return
			}
			if first == nil {
				fresh <- i
			}
		}()
	}
	close(start)
	wg.Wait()
	close(fresh)
	if got := len(fresh); got != 1 {
		t.Fatalf("%d spends found the nonce unspent, want 1", got)
	}
}

// nonceCount counts scope's remembered nonces: the sweep's proof.
func nonceCount(st *Store, scope string) (int, error) {
	n := 0
	err := st.View(func(tx *Tx) error {
		prefix := nonceScope(scope)
		c := tx.bucket(bucketMeta).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// An unsigned nonce (Telegram's update_id) is found by its value whenever
// the copy arrives, kept Keep after its first spend, and swept with its
// value key.
func TestSpendUnsignedNonce(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	n := func(value string, fp string) Nonce {
		return Nonce{Scope: "surface:telegram", Value: value, Unsigned: true, Keep: time.Hour, Request: []byte(fp)}
	}
	if got, err := st.SpendNonce(ctx, n("901", "first copy"), t0); err != nil || got != nil {
		t.Fatalf("first spend = %q, %v; want unspent", got, err)
	}
	// The same update sent again 59 minutes later, with a new arrival time.
	got, err := st.SpendNonce(ctx, n("901", "second copy"), t0.Add(59*time.Minute))
	if err != nil || string(got) != "first copy" {
		t.Fatalf("resend = %q, %v; want the first copy's fingerprint", got, err)
	}
	// Past Keep, a spend of another value sweeps it and its value key.
	if got, err := st.SpendNonce(ctx, n("902", "x"), t0.Add(2*time.Hour)); err != nil || got != nil {
		t.Fatalf("other value = %q, %v", got, err)
	}
	if c, _ := nonceCount(st, "surface:telegram"); c != 1 {
		t.Errorf("nonces after the sweep = %d, want 1", c)
	}
	var left int
	if err := st.View(func(tx *Tx) error {
		c := tx.bucket(bucketMeta).Cursor()
		p := []byte(nonceValuePrefix + "surface:telegram\x00")
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			left++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if left != 1 {
		t.Errorf("value keys after the sweep = %d, want 1 (902's)", left)
	}
}
