// The queue page's opt-in to Web Push (approvals.webpush): the button
// subscribes this browser with the install's VAPID public key, through the
// service worker at /sw.js (scope /: the whole dashboard), and hands the
// subscription to POST /push/subscribe with the session's CSRF token.
// "Turn off" unsubscribes here and there. A notification only opens the
// draft's card: deciding stays on the page.
(function () {
  "use strict";
  var box = document.getElementById("push-optin");
  if (!box) return;
  var on = document.getElementById("push-on");
  var off = document.getElementById("push-off");
  var state = document.getElementById("push-state");
  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
    state.textContent = "This browser cannot show notifications from the dashboard.";
    on.style.display = off.style.display = "none";
    box.hidden = false;
    return;
  }
  function csrf() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.content : "";
  }
  function key(b64) {
    var s = (b64 + "===".slice((b64.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    var raw = atob(s), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  function tell(text) { state.textContent = text; }
  // style.display, not hidden: the dashboard's button style would show a
  // hidden button.
  function show(subscribed) {
    on.style.display = subscribed ? "none" : "";
    off.style.display = subscribed ? "" : "none";
    box.hidden = false;
  }
  show(false);
  box.hidden = true;
  function post(path, body) {
    return fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify(body),
    }).then(function (r) {
      return r.text().then(function (t) {
        if (!r.ok) throw new Error(t.trim() || "HTTP " + r.status);
        return t;
      });
    });
  }
  var ready = navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(function () {
    return navigator.serviceWorker.ready;
  });
  ready.then(function (reg) { return reg.pushManager.getSubscription(); })
    .then(function (sub) { show(!!sub); if (sub) tell("Notifications of new drafts are on in this browser."); })
    .catch(function (e) { tell("Notifications are not available: " + e.message); box.hidden = false; });
  on.addEventListener("click", function () {
    on.disabled = true;
    Notification.requestPermission().then(function (perm) {
      if (perm !== "granted") throw new Error("the browser's permission was not given");
      return ready;
    }).then(function (reg) {
      return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key(box.dataset.vapidKey) });
    }).then(function (sub) {
      return post("/push/subscribe", sub.toJSON());
    }).then(function () {
      show(true);
      tell("Notifications of new drafts are on in this browser.");
    }).catch(function (e) {
      tell("Notifications were not turned on: " + e.message);
    }).finally(function () { on.disabled = false; });
  });
  off.addEventListener("click", function () {
    off.disabled = true;
    ready.then(function (reg) { return reg.pushManager.getSubscription(); }).then(function (sub) {
      if (!sub) return;
      var endpoint = sub.endpoint;
      return sub.unsubscribe().then(function () { return post("/push/unsubscribe", { endpoint: endpoint }); });
    }).then(function () {
      show(false);
      tell("Notifications are off in this browser.");
    }).catch(function (e) {
      tell("Notifications were not turned off: " + e.message);
    }).finally(function () { off.disabled = false; });
  });
})();
