package views

import (
	"fmt"
	"image/color"
	"strings"

	"github.com/boombuler/barcode/qr"
)

// qrQuiet is the light margin around a QR code, in modules: the four the
// standard asks for, so a phone's camera finds the code on any background.
const qrQuiet = 4

// QR is a QR code drawn as SVG: Size modules square (its quiet zone
// included) and one path of its dark modules, a row's neighbouring dark
// modules joined into one rectangle.
type QR struct {
	Size int
	Path string
}

// NewQR encodes content (an otpauth:// URI) as a QR code at error
// correction level M, the one authenticator apps' own screens use.
func NewQR(content string) (QR, error) {
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		return QR{}, fmt.Errorf("the QR code for the enrolment link could not be made: %w", err)
	}
	n := code.Bounds().Dx()
	var b strings.Builder
	for y := 0; y < n; y++ {
		for x := 0; x < n; {
			if !qrDark(code.At(x, y)) {
				x++
				continue
			}
			run := 1
			for x+run < n && qrDark(code.At(x+run, y)) {
				run++
			}
			fmt.Fprintf(&b, "M%d %dh%dv1h-%dz", x+qrQuiet, y+qrQuiet, run, run)
			x += run
		}
	}
	return QR{Size: n + 2*qrQuiet, Path: b.String()}, nil
}

func qrDark(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r+g+b < 3*0x8000
}

func (q QR) viewBox() string { return fmt.Sprintf("0 0 %d %d", q.Size, q.Size) }
