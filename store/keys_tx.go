package store

// The typed operations on the idempotency-key record (keys.go), for the
// rules in package keys. Keys have no secondary index: the table
// (tables.go) is the bucket and the record's key.

// IdemKey reads the idempotency key key: ErrNotFound when it was never
// claimed, or was released or pruned.
func (tx *Tx) IdemKey(key string) (IdemKey, error) { return keysTable.get(tx, []byte(key)) }

// PutIdemKey writes k over old, the key as read in this transaction (nil:
// k is a new key, refused if one is stored under its name). It stamps the
// record's version.
func (tx *Tx) PutIdemKey(old, k *IdemKey) error {
	k.V = recordVersion
	return keysTable.put(tx, old, k)
}

// DeleteIdemKey removes the stored key k: its next claim starts afresh.
func (tx *Tx) DeleteIdemKey(k *IdemKey) error { return keysTable.delete(tx, k) }
