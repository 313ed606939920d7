package views

import (
	"strings"
	"testing"
)

func TestSMSOf(t *testing.T) {
	tests := []struct {
		name string
		text string
		want SMS
	}{
		{"empty", "", SMS{}},
		{"one GSM segment", strings.Repeat("a", 160), SMS{Units: 160, Segments: 1}},
		{"two GSM segments", strings.Repeat("a", 161), SMS{Units: 161, Segments: 2}},
		{"three GSM segments", strings.Repeat("a", 307), SMS{Units: 307, Segments: 3}},
		{"extended characters count twice", strings.Repeat("€", 80), SMS{Units: 160, Segments: 1}},
		{"one extended character too many", strings.Repeat("€", 80) + "a", SMS{Units: 161, Segments: 2}},
		{"unicode: 70 a message", strings.Repeat("ł", 70), SMS{Units: 70, Segments: 1, Unicode: true}},
		{"unicode: 67 a part", strings.Repeat("ł", 71), SMS{Units: 71, Segments: 2, Unicode: true}},
		{"an emoji is two UTF-16 units", "hi 👋", SMS{Units: 5, Segments: 1, Unicode: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SMSOf(tt.text); got != tt.want {
				t.Errorf("SMSOf(%q) = %+v; want %+v", tt.text, got, tt.want)
			}
		})
	}
}
