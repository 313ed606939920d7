package views

import "strings"

// gsmBasic is the GSM 03.38 basic character set; gsmExtended costs two
// septets each (an escape and the character).
const (
	gsmBasic    = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	gsmExtended = "^{}\\[~]|€\f"
)

// SMS is how a text goes out as SMS: its length in the encoding's units
// and how many message segments it takes.
type SMS struct {
	Units    int  // septets (GSM-7) or UTF-16 code units (UCS-2)
	Segments int  // 0 for an empty text
	Unicode  bool // UCS-2: a character outside GSM-7, 70 a segment instead of 160
}

// SMSOf counts the segments of text: 160 GSM-7 characters in one message,
// 153 each when split; 70 UCS-2 units in one, 67 each when split. The
// dashboard's script counts the same way while the reply is edited.
func SMSOf(text string) SMS {
	var s SMS
	for _, r := range text {
		switch {
		case strings.ContainsRune(gsmBasic, r):
			s.Units++
		case strings.ContainsRune(gsmExtended, r):
			s.Units += 2
		default:
			s.Unicode = true
		}
	}
	single, part := 160, 153
	if s.Unicode {
		s.Units, single, part = 0, 70, 67
		for _, r := range text {
			if r > 0xFFFF {
				s.Units += 2
			} else {
				s.Units++
			}
		}
	}
	switch {
	case s.Units == 0:
	case s.Units <= single:
		s.Segments = 1
	default:
		s.Segments = (s.Units + part - 1) / part
	}
	return s
}
