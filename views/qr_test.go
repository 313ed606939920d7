package views

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"regexp"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
)

// rasterise draws the rendered SVG's path (only what the page sends: its
// viewBox and the d attribute) as a picture, scale pixels a module.
func rasterise(t *testing.T, svg string, scale int) image.Image {
	t.Helper()
	vb := regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`).FindStringSubmatch(svg)
	d := regexp.MustCompile(` d="([^"]*)"`).FindStringSubmatch(svg)
	if vb == nil || d == nil {
		t.Fatalf("the page's QR code has no viewBox or path: %s", svg)
	}
	var size int
	fmt.Sscan(vb[1], &size)
	img := image.NewGray(image.Rect(0, 0, size*scale, size*scale))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	rects := 0
	for _, r := range strings.Split(d[1], "z") {
		if r == "" {
			continue
		}
		var x, y, w, back int
		if _, err := fmt.Sscanf(r, "M%d %dh%dv1h-%d", &x, &y, &w, &back); err != nil || w != back {
			t.Fatalf("path piece %q is not one row's rectangle: %v", r, err)
		}
		rects++
		for px := x * scale; px < (x+w)*scale; px++ {
			for py := y * scale; py < (y+1)*scale; py++ {
				img.SetGray(px, py, color.Gray{})
			}
		}
	}
	if rects == 0 {
		t.Fatal("the QR code has no dark modules")
	}
	return img
}

// TestQRCodeDecodesToTheEnrolmentLink renders the enrolment panel the page
// shows and reads its QR code back with a separate decoder (ZXing's port):
// the camera gets exactly the otpauth link, secret and issuer included,
// for a short name and for one with spaces, accents and RTL text.
func TestQRCodeDecodesToTheEnrolmentLink(t *testing.T) {
	for _, uri := range []string{
		"otpauth://totp/handoff:dana?algorithm=SHA1&digits=6&issuer=handoff&period=30&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP",
		"otpauth://totp/handoff:Zo%C3%AB%20M%C3%BCller%20%D7%A9%D7%9C%D7%95%D7%9D?algorithm=SHA1&digits=6&issuer=handoff&period=30&secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ",
	} {
		q, err := NewQR(uri)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := AccountPageView(Layout{Title: "Your account"}, AccountPage{Enrol: &Enrolment{Secret: "JBSWY3DPEHPK3PXP", URI: uri, QR: q}}).Render(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		page := buf.String()
		i := strings.Index(page, `<svg class="qr"`)
		if i < 0 {
			t.Fatal("the enrolment panel has no QR code")
		}
		svg := page[i : i+strings.Index(page[i:], "</svg>")]
		bmp, err := gozxing.NewBinaryBitmapFromImage(rasterise(t, svg, 4))
		if err != nil {
			t.Fatal(err)
		}
		got, err := gozxingqr.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]interface{}{gozxing.DecodeHintType_PURE_BARCODE: true})
		if err != nil {
			t.Fatalf("the QR code of %s does not decode: %v", uri, err)
		}
		if got.GetText() != uri {
			t.Fatalf("the QR code reads %q, want %q", got.GetText(), uri)
		}
	}
}
