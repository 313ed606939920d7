package store

// Record writes the event e carries inside the caller's transaction, with
// its dedup and conversation index entries, unless an event with the same
// key exists: then the first event is returned (with its duplicate count
// raised) and nothing else is written. A key repeated inside one
// transaction is a duplicate of the first, as across transactions. The
// event's lead and its draft job are the ingest's next step in the same
// transaction (leads.RecordTx); Created says whether it is due.
func (tx *Tx) Record(e *Encoded) (Recorded, error) {
	return recordEvent(tx, &e.ev, e.evRaw)
}
