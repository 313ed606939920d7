package views

import (
	"testing"
	"time"
)

func TestAge(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{45 * time.Second, "45s"},
		{12 * time.Minute, "12m"},
		{3*time.Hour + 5*time.Minute, "3h 5m"},
		{4 * time.Hour, "4h"},
		{52 * time.Hour, "2d 4h"},
		{48 * time.Hour, "2d"},
	}
	for _, tt := range tests {
		if got := Age(tt.d); got != tt.want {
			t.Errorf("Age(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"\n\n  hello there \nsecond", 20, "hello there"},
		{"abcdefghij", 5, "abcd…"},
		{"", 5, ""},
		{"héllo wörld", 6, "héllo…"},
	}
	for _, tt := range tests {
		if got := FirstLine(tt.in, tt.n); got != tt.want {
			t.Errorf("FirstLine(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestQueueFilterURL(t *testing.T) {
	tests := []struct {
		f    QueueFilter
		id   string
		want string
	}{
		{QueueFilter{}, "", "/drafts"},
		{QueueFilter{}, "d1", "/drafts?id=d1"},
		{QueueFilter{Owner: "mine", Channel: "web", Cursor: "abc"}, "d2", "/drafts?channel=web&cursor=abc&id=d2&owner=mine"},
		{QueueFilter{Owner: "a&b"}, "", "/drafts?owner=a%26b"},
	}
	for _, tt := range tests {
		if got := tt.f.URL(tt.id); got != tt.want {
			t.Errorf("%+v.URL(%q) = %q, want %q", tt.f, tt.id, got, tt.want)
		}
	}
	if got := EventURL("web:a/b c"); got != "/events/web:a%2Fb%20c" {
		t.Errorf("EventURL = %q", got)
	}
}
