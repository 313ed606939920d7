package browser

import (
	"bytes"
	"fmt"
	"image/png"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
	"github.com/pquerna/otp/totp"
)

// TestTOTPEnrolmentOnAPhone enrols a second factor the way a person with
// a phone does: the enrolment screen fits 390 px (the otpauth link
// wraps) and at 1366 px, its QR code as Chromium draws it is read back by
// a QR decoder to the account's otpauth link, and a code made from the
// secret in that link confirms the enrolment.
func TestTOTPEnrolmentOnAPhone(t *testing.T) {
	requireEnvironment(t)
	ada := user{name: "ada", role: "admin", password: "correct-horse-battery"}
	s := startServer(t, ada)
	b := newBrowser(t)
	b.viewport(phoneWidth, phoneHeight, true, false)
	b.login(s.url, ada, "/account", "#totp")
	b.do("start enrolment",
		chromedp.SendKeys(chromedp.CSS(`form[action="/account/totp/start"] input[name="current"]`), ada.password),
		chromedp.Click(chromedp.CSS(`form[action="/account/totp/start"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#totp svg.qr`)))

	for _, pass := range []struct {
		name          string
		width, height int64
		mobile, dark  bool
	}{
		{"phone", phoneWidth, phoneHeight, true, false},
		{"phone-dark", phoneWidth, phoneHeight, true, true},
		{"desktop", desktopWidth, desktopHeight, false, false},
	} {
		b.viewport(pass.width, pass.height, pass.mobile, pass.dark)
		b.checkShown(pass.name, int(pass.width), "/account/totp/start")
		type box struct{ Left, Right, Width float64 }
		link := run(b, "measure the otpauth link", chromedp.Evaluate[box](
			`(r => ({Left: r.left, Right: r.right, Width: r.width}))(document.querySelector(".otpauth a").getBoundingClientRect())`))
		if link.Right > float64(pass.width) {
			t.Errorf("%s: the otpauth link ends at x=%.0f, past the %d px screen", pass.name, link.Right, pass.width)
		}
		qr := run(b, "measure the QR code", chromedp.Evaluate[box](
			`(r => ({Left: r.left, Right: r.right, Width: r.width}))(document.querySelector("#totp svg.qr").getBoundingClientRect())`))
		if qr.Width < 160 || qr.Right > float64(pass.width) {
			t.Errorf("%s: the QR code is %.0f px wide ending at x=%.0f; want at least 160 px inside the screen", pass.name, qr.Width, qr.Right)
		}
	}

	// What Chromium drew, read by a camera-style decoder (no hint that the
	// picture is only the code).
	b.viewport(phoneWidth, phoneHeight, true, false)
	shot := run(b, "screenshot the QR code", chromedp.Screenshot(chromedp.CSS(`#totp svg.qr`)))
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the QR code's screenshot: %v", err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("the QR code Chromium drew does not decode: %v (screenshot %s)", err, b.screenshot("qr-unreadable"))
	}
	shown := run(b, "read the otpauth link", chromedp.Text(chromedp.CSS(`.otpauth a`)))
	if res.GetText() != strings.TrimSpace(shown) || !strings.HasPrefix(res.GetText(), "otpauth://totp/") {
		t.Fatalf("the QR code reads %q; the link on the page is %q", res.GetText(), shown)
	}
	u, err := url.Parse(res.GetText())
	if err != nil {
		t.Fatal(err)
	}
	secret := u.Query().Get("secret")
	if !strings.Contains(u.Path, "ada") || secret == "" {
		t.Fatalf("the QR code's link %q names no account or secret", res.GetText())
	}
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.do("confirm with the scanned secret's code",
		chromedp.SendKeys(chromedp.CSS(`form[action="/account/totp/confirm"] input[name="code"]`), code),
		chromedp.Click(chromedp.CSS(`form[action="/account/totp/confirm"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#totp ul.mono`)))
	b.screenshot(fmt.Sprintf("recovery-codes-%d", phoneWidth))
}
