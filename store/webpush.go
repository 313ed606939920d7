package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// Web Push (approvals.webpush): a person who opted in on the queue page has
// a browser push subscription per browser, and the install has one VAPID
// key pair, made the first time it is asked for:
//
//	webpush_subs   <user> 0x00 <hex SHA-256 of the endpoint> -> WebPushSubscription JSON
//	webpush_keys   "vapid"                                   -> VAPIDKeys JSON
//
// Both buckets are created by their first write (a file without them has
// none; reads find nothing), so no migration and no schema version. The
// VAPID private key and a subscription's auth secret are never rendered
// or logged.
var (
	bucketWebPushSubs = []byte("webpush_subs")
	bucketWebPushKeys = []byte("webpush_keys")
	keyVAPID          = []byte("vapid")
)

// WebPushSubscription is one browser's PushSubscription (its toJSON()).
type WebPushSubscription struct {
	V    int    `json:"v"`
	User string `json:"user"`
	// UserID is the person's User.ID when they subscribed: a person
	// removed and a new one made under the same name is another person,
	// whose pushes never go to the old one's browsers.
	UserID   string `json:"user_id,omitempty"`
	Endpoint string `json:"endpoint"` // the push service's URL for this browser (https)
	P256DH   string `json:"p256dh"`   // the browser's P-256 public key, base64url
	Auth     string `json:"auth"`     // the 16-byte auth secret, base64url
	// Expires is the subscription's expirationTime when the browser gave
	// one; zero: none.
	Expires   time.Time `json:"expires,omitzero"`
	CreatedAt time.Time `json:"created_at"`
}

// VAPIDKeys is the install's VAPID key pair (RFC 8292).
type VAPIDKeys struct {
	V int `json:"v"`
	// Private is the P-256 private key, PKCS #8 DER.
	Private []byte `json:"private"`
	// Public is the uncompressed public key (65 bytes), as the browser's
	// applicationServerKey and the Authorization header's k take it.
	Public    []byte    `json:"public"`
	CreatedAt time.Time `json:"created_at"`
}

func webPushKey(user, endpoint string) []byte {
	sum := sha256.Sum256([]byte(endpoint))
	return append(append([]byte(user), 0), hex.EncodeToString(sum[:])...)
}

func (tx *Tx) webPushBucket(name []byte, write bool) (engine.Bucket, error) {
	if b := tx.bucket(name); b != nil || !write {
		return b, nil
	}
	b, err := tx.tx.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return b, nil
}

// PutWebPushSubscription stores s (a browser subscribing again replaces its
// record).
func (tx *Tx) PutWebPushSubscription(s WebPushSubscription) error {
	if s.User == "" || s.Endpoint == "" || s.P256DH == "" || s.Auth == "" {
		return errors.New("web push subscription: a subscription needs its person, endpoint and keys")
	}
	b, err := tx.webPushBucket(bucketWebPushSubs, true)
	if err != nil {
		return err
	}
	s.V = recordVersion
	return putJSON(b, webPushKey(s.User, s.Endpoint), s)
}

// DeleteWebPushSubscription deletes user's subscription at endpoint;
// deleting one that is not there is no error.
func (tx *Tx) DeleteWebPushSubscription(user, endpoint string) error {
	b, _ := tx.webPushBucket(bucketWebPushSubs, false)
	if b == nil {
		return nil
	}
	return b.Delete(webPushKey(user, endpoint))
}

// DeleteWebPushSubscriptionsOf deletes every subscription of user, the
// unreadable ones too (a removed person's browsers are personal data the
// product no longer needs), and says how many it deleted.
func (tx *Tx) DeleteWebPushSubscriptionsOf(user string) (int, error) {
	if user == "" {
		return 0, errors.New("web push subscription: whose subscriptions to delete is not named")
	}
	b, _ := tx.webPushBucket(bucketWebPushSubs, false)
	if b == nil {
		return 0, nil
	}
	prefix := append([]byte(user), 0)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// WebPushSubscriptions lists the subscriptions of user, or of everyone
// when user is "". An unreadable record is skipped (and reported as the
// store's other unreadable records are).
func (tx *Tx) WebPushSubscriptions(user string) ([]WebPushSubscription, error) {
	b, _ := tx.webPushBucket(bucketWebPushSubs, false)
	if b == nil {
		return nil, nil
	}
	var prefix []byte
	if user != "" {
		prefix = append([]byte(user), 0)
	}
	var out []WebPushSubscription
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var s WebPushSubscription
		if err := decode(v, &s); err != nil {
			tx.skip(unreadableOf("web push subscription", k, err), nil)
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// WebPushSubscriptions lists the subscriptions of user ("": everyone's).
func (s *Store) WebPushSubscriptions(user string) ([]WebPushSubscription, error) {
	var out []WebPushSubscription
	err := s.View(func(tx *Tx) error {
		var err error
		out, err = tx.WebPushSubscriptions(user)
		return err
	})
	return out, err
}

// VAPIDKeys returns the install's VAPID keys, made by gen and stored the
// first time (in the write transaction that finds none, so two callers at
// once keep one pair).
func (s *Store) VAPIDKeys(ctx context.Context, gen func() (VAPIDKeys, error)) (VAPIDKeys, error) {
	var k VAPIDKeys
	found := false
	if err := s.View(func(tx *Tx) error {
		b, _ := tx.webPushBucket(bucketWebPushKeys, false)
		if b == nil {
			return nil
		}
		err := getJSON(b, keyVAPID, &k)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	}); err != nil || found {
		return k, err
	}
	// The pair is made before the write: the write's fn may run twice, and
	// only the pair it keeps (or one made meanwhile) is ever returned.
	made, err := gen()
	if err != nil {
		return VAPIDKeys{}, err
	}
	if len(made.Private) == 0 || len(made.Public) != 65 {
		return VAPIDKeys{}, errors.New("vapid keys: a PKCS #8 private key and a 65-byte public key are needed")
	}
	made.V = recordVersion
	err = s.update(ctx, func(tx *Tx) error {
		b, err := tx.webPushBucket(bucketWebPushKeys, true)
		if err != nil {
			return err
		}
		if err := getJSON(b, keyVAPID, &k); err == nil || !errors.Is(err, ErrNotFound) {
			return err // made meanwhile, or unreadable
		}
		k = made
		return putJSON(b, keyVAPID, k)
	})
	return k, err
}
