package pgengine

// Classify is classify, for the tests of the error kinds.
var Classify = classify

// HolderPID is the server process holding d's exclusive lock; 0 while it is lost.
func (d *DB) HolderPID() uint32 { return d.hold.pid() }

// ExclusiveKey is the advisory lock key of Options.Exclusive on schema.
func ExclusiveKey(schema string) int64 { return lockKey("exclusive", schema) }
