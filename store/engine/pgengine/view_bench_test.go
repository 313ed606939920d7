package pgengine_test

import (
	"fmt"
	"testing"

	"github.com/handoff/handoff/store/engine"
)

// BenchmarkView is what a read transaction of one key costs, the server's
// part included: on the catalog kept, its begin goes with the read, and
// its end is the one other round trip.
func BenchmarkView(b *testing.B) {
	db := open(b)
	if _, err := db.Update(func(tx engine.Tx) error {
		for i := range 100 {
			if err := tx.Bucket(bk).Put(fmt.Appendf(nil, "k%03d", i), []byte("fish & chips")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if err := db.View(func(tx engine.Tx) error {
				if v := tx.Bucket(bk).Get(fmt.Appendf(nil, "k%03d", i%100)); string(v) != "fish & chips" {
					return fmt.Errorf("read %q", v)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
