package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit/corpus"
)

// asJSONKeeps is s as a JSON round trip gives it back: each byte of
// invalid UTF-8 is U+FFFD.
func asJSONKeeps(s string) string { return string([]rune(s)) }

// fuzzTime is a time the stored form keeps (UTC, years 1 to 9999).
func fuzzTime(n int64) time.Time {
	const span = int64(9998 * 365 * 24 * 3600)
	if n < 0 {
		n = -n
	}
	if n < 0 { // math.MinInt64
		n = 0
	}
	return time.Unix(n%span-62135596800+86400*366, n%1e9).UTC()
}

// FuzzWebPushForms: a web push subscription and the VAPID keys read back
// as they were stored (decode(encode(v)) == v), and a subscription without
// an expiry stores no "expires".
func FuzzWebPushForms(f *testing.F) {
	f.Add("dana", "https://fcm.googleapis.com/fcm/send/dXN1YWw6QVBBOTFi", "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "tBHItJI5svbpez7KI4CCXg", int64(1767225600), int64(0), []byte{1, 2, 3}, []byte{4})
	for _, tx := range corpus.Texts() {
		f.Add(tx.From, "https://updates.push.services.mozilla.com/wpush/v2/"+tx.Body, tx.Body, "\xff\xfe", int64(-1), int64(99999999999), []byte(tx.Body), []byte{})
	}
	f.Fuzz(func(t *testing.T, user, endpoint, p256dh, auth string, created, expires int64, priv, pub []byte) {
		s := WebPushSubscription{V: recordVersion, User: asJSONKeeps(user), UserID: asJSONKeeps(auth + user), Endpoint: asJSONKeeps(endpoint), P256DH: asJSONKeeps(p256dh),
			Auth: asJSONKeeps(auth), CreatedAt: fuzzTime(created)}
		if expires%2 == 0 {
			s.Expires = fuzzTime(expires)
		}
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got WebPushSubscription
		if err := decode(raw, &got); err != nil {
			t.Fatalf("decode: %v\nstored %q", err, raw)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("read back %+v\nwant %+v\nstored %q", got, s, raw)
		}
		if s.Expires.IsZero() && bytes.Contains(raw, []byte(`"expires"`)) {
			t.Fatalf("a subscription without an expiry stores one: %q", raw)
		}

		k := VAPIDKeys{V: recordVersion, Private: priv, Public: pub, CreatedAt: fuzzTime(created)}
		if len(k.Private) == 0 {
			k.Private = nil
		}
		if len(k.Public) == 0 {
			k.Public = nil
		}
		raw, err = json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		var gotK VAPIDKeys
		if err := decode(raw, &gotK); err != nil {
			t.Fatalf("decode keys: %v", err)
		}
		if !reflect.DeepEqual(gotK, k) {
			t.Fatalf("keys read back %+v, want %+v", gotK, k)
		}
	})
}

// TestWebPushStore: subscriptions are kept per person on a real file (a
// browser subscribing again replaces its record), listed by person or for
// everyone, deleted; the VAPID keys are made once even when asked for by
// many at once.
func TestWebPushStore(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	if subs, err := st.WebPushSubscriptions(""); err != nil || len(subs) != 0 {
		t.Fatalf("before any write: %v, %v", subs, err)
	}
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	put := func(s WebPushSubscription) {
		t.Helper()
		if err := st.Update(ctx, func(tx *Tx) error { return tx.PutWebPushSubscription(s) }); err != nil {
			t.Fatal(err)
		}
	}
	put(WebPushSubscription{User: "dana", Endpoint: "https://push.example/a", P256DH: "k1", Auth: "a1", CreatedAt: at})
	put(WebPushSubscription{User: "dana", Endpoint: "https://push.example/a", P256DH: "k2", Auth: "a2", CreatedAt: at})
	put(WebPushSubscription{User: "dana", Endpoint: "https://push.example/b", P256DH: "k3", Auth: "a3", CreatedAt: at})
	put(WebPushSubscription{User: "danb", Endpoint: "https://push.example/c", P256DH: "k4", Auth: "a4", CreatedAt: at})
	if err := st.Update(ctx, func(tx *Tx) error { return tx.PutWebPushSubscription(WebPushSubscription{User: "x"}) }); err == nil {
		t.Error("a subscription without an endpoint was stored")
	}
	dana, _ := st.WebPushSubscriptions("dana")
	if len(dana) != 2 || dana[0].P256DH+dana[1].P256DH != "k2k3" && dana[0].P256DH+dana[1].P256DH != "k3k2" {
		t.Fatalf("dana's subscriptions = %+v", dana)
	}
	if all, _ := st.WebPushSubscriptions(""); len(all) != 3 {
		t.Fatalf("all subscriptions = %d, want 3", len(all))
	}
	if err := st.Update(ctx, func(tx *Tx) error { return tx.DeleteWebPushSubscription("dana", "https://push.example/a") }); err != nil {
		t.Fatal(err)
	}
	if dana, _ := st.WebPushSubscriptions("dana"); len(dana) != 1 || dana[0].Endpoint != "https://push.example/b" {
		t.Fatalf("after the delete: %+v", dana)
	}

	var mu sync.Mutex
	made := 0
	keys := make([]VAPIDKeys, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := st.VAPIDKeys(ctx, func() (VAPIDKeys, error) {
				mu.Lock()
				made++
				mu.Unlock()
				return VAPIDKeys{Private: []byte{byte(i), 1}, Public: bytes.Repeat([]byte{byte(i)}, 65), CreatedAt: at}, nil
			})
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	// Each caller that found none makes a pair before the write (the
	// write's fn may run twice, so it makes none); one pair is kept, and
	// every caller, then and later, gets that one.
	if made < 1 || made > len(keys) {
		t.Errorf("keys made %d times, want 1 to %d", made, len(keys))
	}
	for _, k := range keys[1:] {
		if !reflect.DeepEqual(k, keys[0]) {
			t.Fatalf("callers got different keys: %+v / %+v", k, keys[0])
		}
	}
	later, err := st.VAPIDKeys(ctx, func() (VAPIDKeys, error) {
		t.Error("keys made again although a pair is kept")
		return VAPIDKeys{}, errors.New("not wanted")
	})
	if err != nil || !reflect.DeepEqual(later, keys[0]) {
		t.Errorf("a later caller got %+v, %v; want the kept pair", later, err)
	}
}
