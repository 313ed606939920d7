package workers

import (
	"fmt"
	"testing"
)

// TestArmOf: a turn's arm depends on its first message's key alone (the
// same key, the same arm, however often it is asked), and over many keys
// the share drafted by B is near the share asked for; share 1 is all B.
func TestArmOf(t *testing.T) {
	for _, share := range []float64{0.1, 0.5, 0.9} {
		b := 0
		const n = 4000
		for i := range n {
			key := fmt.Sprintf("demo:msg-%d", i)
			arm := ArmOf(key, share)
			if again := ArmOf(key, share); again != arm {
				t.Fatalf("ArmOf(%s) = %s, then %s", key, arm, again)
			}
			if arm == ArmB {
				b++
			}
		}
		if got := float64(b) / n; got < share-0.03 || got > share+0.03 {
			t.Errorf("share %.1f: %.3f of %d turns by B", share, got, n)
		}
	}
	for i := range 100 {
		if arm := ArmOf(fmt.Sprint("k", i), 1); arm != ArmB {
			t.Fatalf("share 1 gave %s", arm)
		}
	}
}
