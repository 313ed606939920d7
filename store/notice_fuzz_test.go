package store

import (
	"testing"
	"time"
)

// A notice reads back as the due time rounded up to the millisecond and
// the owner as written, whatever the owner holds (spaces, & < > " \,
// emoji, RTL).
func FuzzNotice(f *testing.F) {
	for _, owner := range []string{"01JSERVERA0000000000000000", "", "fish & chips <b>\"x\"</b> \\ ✓ 😀 שלום", "  two  spaces  ", "{\n  \"text\": \"fish & chips\"\n}"} {
		f.Add(int64(1765000000123456789), owner)
		f.Add(int64(1765000000000000000), owner)
	}
	f.Fuzz(func(t *testing.T, nanos int64, owner string) {
		if nanos < 0 || nanos > 1<<62 {
			t.Skip() // RunAt is a time this century
		}
		due := time.Unix(0, nanos)
		at, got, ok := parseNotice(encodeNotice(due, owner))
		want := due.Truncate(time.Millisecond)
		if want.Before(due) {
			want = want.Add(time.Millisecond)
		}
		if !ok || got != owner || !at.Equal(want) {
			t.Fatalf("parseNotice(encodeNotice(%s, %q)) = %s, %q, %v; want %s, %q, true", due, owner, at, got, ok, want, owner)
		}
	})
}

// What is no notice reads as none, so that it only says "anything may be
// due": an older server's empty payload, Listen's probe, other text.
func TestNotANotice(t *testing.T) {
	for _, p := range []string{"", "probe 0a1b2c3d4e5f6a7b", "1765000000000", "fish & chips 01JSERVER", "{\n  \"due\": 1\n}"} {
		if at, owner, ok := parseNotice(p); ok {
			t.Errorf("parseNotice(%q) = %s, %q, true; want no notice", p, at, owner)
		}
	}
}
