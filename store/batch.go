package store

// Record is Store.Record inside the caller's transaction, for a webhook
// whose one request carries several messages: each is deduplicated on its
// own, and all of them commit, or none does. A key repeated inside the
// transaction is a duplicate of the first, as across requests.
func (tx *Tx) Record(e *Encoded) (Recorded, error) {
	return recordEvent(tx, &e.ev, e.evRaw, &e.j, e.jobRaw)
}
