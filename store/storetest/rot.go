package storetest

import (
	"bytes"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Rot flips bytes inside one record's stored value in the closed file at
// path, in place, as bit rot would: bbolt keeps no checksum of its pages,
// so the page structure stays sound and only a read of that record sees
// it. It reads the value of key in bucket, lets edit change a copy (the
// same length), and writes the change over every place the file holds the
// value's bytes (a freed page may still hold an older copy). It fails when
// the record is absent, edit changed nothing or the length, or the file
// does not hold the value's bytes.
func Rot(path, bucket string, key []byte, edit func(v []byte)) error {
	var old []byte
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("rot: no bucket %s", bucket)
		}
		if v := b.Get(key); v != nil {
			old = bytes.Clone(v)
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("rot: %s holds no record %q", bucket, key)
	}
	rotten := bytes.Clone(old)
	edit(rotten)
	if len(rotten) != len(old) || bytes.Equal(rotten, old) {
		return fmt.Errorf("rot: the edit of %s %q must change bytes and keep the length", bucket, key)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	n := 0
	for i := 0; ; {
		at := bytes.Index(file[i:], old)
		if at < 0 {
			break
		}
		copy(file[i+at:], rotten)
		i += at + len(old)
		n++
	}
	if n == 0 {
		return fmt.Errorf("rot: the file does not hold the bytes of %s %q in one piece", bucket, key)
	}
	return os.WriteFile(path, file, 0o600)
}

// Replace is an edit for Rot that puts new over the first old in the value
// (the same length), so that a test names the damage it makes
// ("correlation_id" → "correlation_\xf7d").
func Replace(old, new string) func(v []byte) {
	return func(v []byte) {
		if i := bytes.Index(v, []byte(old)); i >= 0 && len(old) == len(new) {
			copy(v[i:], new)
		}
	}
}
