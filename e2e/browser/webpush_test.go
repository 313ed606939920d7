package browser

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// pushSpy stands in for the browser's push service before the page's
// scripts run (a headless browser reaches none): PushManager.subscribe
// records the applicationServerKey it was given and answers a
// subscription with a real P-256 key and auth secret, as a browser's
// toJSON() gives them; Notification's permission is granted when asked.
const pushSpy = `(() => {
  window.__asked = 0; window.__key = "";
  class Spy { close() {} }
  Spy.permission = "default";
  Spy.requestPermission = () => { window.__asked++; Spy.permission = "granted"; return Promise.resolve("granted"); };
  window.Notification = Spy;
  if (!window.PushManager) return;
  let sub = null;
  const b64 = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  PushManager.prototype.getSubscription = function () { return Promise.resolve(sub); };
  PushManager.prototype.subscribe = async function (opts) {
    window.__key = b64(opts.applicationServerKey);
    const kp = await crypto.subtle.generateKey({ name: "ECDH", namedCurve: "P-256" }, true, ["deriveBits"]);
    const raw = await crypto.subtle.exportKey("raw", kp.publicKey);
    const json = { endpoint: "https://push.example/wpush/browser-test", expirationTime: null,
      keys: { p256dh: b64(raw), auth: b64(crypto.getRandomValues(new Uint8Array(16))) } };
    sub = { endpoint: json.endpoint, toJSON: () => json, unsubscribe: () => { sub = null; return Promise.resolve(true); } };
    return sub;
  };
})();`

// TestQueueWebPushOptIn: with approvals.webpush the queue registers the
// service worker /sw.js with the whole dashboard as its scope; "Push new
// drafts to this browser" subscribes with the page's VAPID key and the
// server takes the subscription (the page says so only after POST
// /push/subscribe answered 200); "Stop pushing" unsubscribes.
func TestQueueWebPushOptIn(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, cardConfig+"approvals:\n  webpush:\n    subject: mailto:ops@handoff.test\n", alice)
	s.postHook(hook{ID: "p-1", From: "+15550000041", Name: "Zoë 🌸", Text: "Thanks 👍🏽! Is the 🐟 & 🍟 combo still on?"})
	s.waitPending(1)

	b := newBrowser(t)
	b.do("install the spy", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: pushSpy})
		return err
	}))
	b.viewport(desktopWidth, laptopHeight, false, false)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	b.do("see the opt-in", chromedp.WaitVisible(chromedp.ID("push-on")))
	scope := run(b, "the service worker's scope", chromedp.Evaluate[string](`navigator.serviceWorker.ready.then(r => r.scope)`, chromedp.EvalAwaitPromise))
	if scope != s.url+"/" {
		t.Errorf("service worker scope %q, want %q: the whole dashboard", scope, s.url+"/")
	}
	if n := run(b, "count the asks", chromedp.Evaluate[int](`window.__asked`)); n != 0 {
		t.Fatalf("opening the queue asked %d time(s) for permission; want none before the button", n)
	}
	b.do("press the opt-in", chromedp.Click(chromedp.ID("push-on")))
	eventually(t, stepTimeout, "the page to say pushes are on", func() (bool, string) {
		got, err := b.tryRun(chromedp.Text(chromedp.ID("push-state")))
		return err == nil && got == "Notifications of new drafts are on in this browser.", got
	})
	key := run(b, "the key subscribed with", chromedp.Evaluate[string](`window.__key`))
	want := run(b, "the page's key", chromedp.Evaluate[string](`document.getElementById("push-optin").dataset.vapidKey`))
	if key == "" || key != want {
		t.Errorf("subscribed with key %q, want the page's %q", key, want)
	}
	b.do("see the off button", chromedp.WaitVisible(chromedp.ID("push-off")))
	shown := `(id) => getComputedStyle(document.getElementById(id)).display !== "none"`
	if run(b, "the on button", chromedp.Evaluate[bool](`(`+shown+`)("push-on")`)) {
		t.Error("with pushes on, the page still offers to turn them on")
	}
	b.viewShot("webpush-on")
	b.do("press stop", chromedp.Click(chromedp.ID("push-off")))
	eventually(t, stepTimeout, "the page to say pushes are off", func() (bool, string) {
		got, err := b.tryRun(chromedp.Text(chromedp.ID("push-state")))
		return err == nil && got == "Notifications are off in this browser.", fmt.Sprint(got, err)
	})
	if run(b, "the off button", chromedp.Evaluate[bool](`(`+shown+`)("push-off")`)) || !run(b, "the on button", chromedp.Evaluate[bool](`(`+shown+`)("push-on")`)) {
		t.Error("with pushes off, the page should offer only to turn them on")
	}
}
