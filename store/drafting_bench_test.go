package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkDraftingFor: the overview's "messages waiting for a draft" on
// a backlog of 5,000 leads whose draft jobs wait (drafting paused, or the
// model server down): what one overview request reads.
func BenchmarkDraftingFor(b *testing.B) {
	st := openTest(b)
	ctx := context.Background()
	const backlog = 5000
	for from := 0; from < backlog; from += 500 {
		err := st.Update(ctx, func(tx *Tx) error {
			for i := from; i < from+500; i++ {
				ev := newEvent(fmt.Sprintf("web:b%d", i), t0.Add(time.Duration(i)*time.Millisecond))
				e, err := EncodeEvent(ev, draftJobFor(ev.Key, 3))
				if err != nil {
					return err
				}
				if _, err := tx.Record(e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []struct {
		name string
		vis  Visible
	}{{"everything", Everything()}, {"limited", OnlyChannels("other")}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := st.DraftingFor(v.vis); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
