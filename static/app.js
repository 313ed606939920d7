// Keyboard shortcuts of the dashboard, and nothing else. Everything works
// without them: each key clicks a link or button, or focuses a field, that
// is on the page.
//   j / k   next / previous draft        a   approve as drafted
//   e       edit the reply               Ctrl+Enter (in the reply)   approve the edit
//   r       reason for rejecting         /   search        Esc   leave a field
//   u       undo the newest entry of the undo stack (views/undo.templ)
//   x       select the card's draft for "Approve selected"   ?   the shortcuts
(function () {
  "use strict";

  function typing(el) {
    return !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  function click(id) {
    var el = document.getElementById(id);
    if (!el) return false;
    el.click();
    return true;
  }

  function focus(id) {
    var el = document.getElementById(id);
    if (!el) return false;
    el.focus();
    if (el.tagName === "TEXTAREA") el.setSelectionRange(el.value.length, el.value.length);
    return true;
  }

  function edited() {
    var t = document.getElementById("draft-text");
    return !!t && t.value !== t.defaultValue;
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.isComposing) return;
    var t = ev.target;
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") {
      if (t && t.id === "draft-text") {
        ev.preventDefault();
        click("approve-edit");
      }
      return;
    }
    if (ev.key === "Escape" && typing(t)) {
      t.blur();
      return;
    }
    if (typing(t) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var help = document.getElementById("help");
    if (help && help.open) return; // the dialog has the keys until Escape closes it
    var done = false;
    switch (ev.key) {
      case "j": done = click("card-next"); break;
      case "k": done = click("card-prev"); break;
      case "a":
        // "a" approves the draft as written; after an edit, ask first.
        if (edited() && !window.confirm("You edited the reply. Approve the original draft instead of your edit?")) {
          done = true;
          break;
        }
        done = click("approve");
        break;
      case "e": done = focus("draft-text"); break;
      case "r": done = focus("reject-reason"); break;
      case "u": done = click("undo"); break;
      case "/": done = focus("search"); break;
      case "x": done = toggleCurrent(); break;
      case "?": done = showHelp(); break;
    }
    if (done) ev.preventDefault();
  });

  // The SMS segment count under the reply follows the edit; it counts as
  // views.SMSOf does: 160 GSM-7 septets in one message (153 a part when
  // split; ^{}\[~]|€ and form feed take two), else 70 UTF-16 units (67).
  var gsm = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
  var gsmExt = "^{}\\[~]|€\f";
  function smsLine(text) {
    var units = 0, unicode = false;
    for (var ch of text) {
      if (gsm.indexOf(ch) >= 0) units++;
      else if (gsmExt.indexOf(ch) >= 0) units += 2;
      else unicode = true;
    }
    var single = 160, part = 153;
    if (unicode) { units = text.length; single = 70; part = 67; }
    var segs = units === 0 ? 0 : units <= single ? 1 : Math.ceil(units / part);
    return units + (unicode ? " characters (Unicode: 70 a message) · " : " characters · ") + segs + " SMS";
  }
  document.addEventListener("input", function (ev) {
    var out = document.getElementById("sms-count");
    if (out && ev.target && ev.target.id === "draft-text") out.textContent = smsLine(ev.target.value);
  });

  // The live queue's poll (#queue-live) says which draft the card shows
  // and whether it is the empty card, and waits while the tab is hidden.
  document.addEventListener("htmx:configRequest", function (ev) {
    if (!ev.detail.elt || ev.detail.elt.id !== "queue-live") return;
    if (document.hidden && !notifyOn()) { // with notifications on, a hidden tab keeps watching
      ev.preventDefault();
      return;
    }
    var card = document.getElementById("card");
    ev.detail.parameters.current = card && card.dataset.draft ? card.dataset.draft : "";
    ev.detail.parameters.empty = card && card.classList.contains("empty") ? "1" : "";
  });

  // The tab's title leads with the number of drafts waiting, "(3) Drafts · handoff".
  function titleCount() {
    var n = document.getElementById("nav-drafts-count");
    var base = document.title.replace(/^\(\d+\) /, "");
    var k = n ? parseInt(n.textContent, 10) : 0;
    document.title = (k > 0 ? "(" + k + ") " : "") + base;
  }
  titleCount();
  document.addEventListener("htmx:afterSettle", titleCount);
  document.addEventListener("htmx:oobAfterSwap", titleCount);

  // When the list is full, the live queue's new drafts wait after it
  // (#queue-more counts them): say how many arrived since the list held
  // the fewest after it, "3 new drafts below".
  var moreSeen = null;
  function moreNew() {
    var li = document.getElementById("queue-more");
    var n = li ? parseInt(li.dataset.more, 10) : 0;
    if (isNaN(n) || n < 0) return;
    if (moreSeen === null || n < moreSeen) moreSeen = n;
    var out = li && li.querySelector(".more-new");
    if (!out) return;
    var k = n - moreSeen;
    out.textContent = k > 0 ? k + (k === 1 ? " new draft below. " : " new drafts below. ") : "";
  }
  moreNew();
  document.addEventListener("htmx:oobAfterSwap", moreNew);
  document.addEventListener("htmx:afterSettle", moreNew);

  // Optional browser notifications of new drafts (#notify, on the queue):
  // asked for only when the person presses the button, never on load;
  // then, while the tab is hidden or not focused, a rise of the waiting
  // count (the live poll's #nav-drafts-count) shows one notification,
  // replaced by the next (one tag). The choice is kept in localStorage.
  function notifyOn() {
    try {
      return "Notification" in window && Notification.permission === "granted" && localStorage.getItem("handoff.notify") === "1";
    } catch (e) { return false; }
  }
  function notifyButton() {
    var b = document.getElementById("notify");
    if (!b || !("Notification" in window)) return;
    b.parentNode.hidden = false;
    if (Notification.permission === "denied") {
      b.disabled = true;
      b.textContent = "Notifications are blocked for this site";
    } else {
      b.textContent = notifyOn() ? "Stop notifying me" : "Notify me of new drafts";
    }
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target && ev.target.closest ? ev.target.closest("#notify") : null;
    if (!b) return;
    if (notifyOn()) {
      try { localStorage.removeItem("handoff.notify"); } catch (e) { /* private mode */ }
      notifyButton();
      return;
    }
    Notification.requestPermission().then(function (p) {
      if (p === "granted") {
        try { localStorage.setItem("handoff.notify", "1"); } catch (e) { /* private mode */ }
      }
      notifyButton();
    });
  });
  var waitingSeen = null;
  function notifyNew() {
    var n = document.getElementById("nav-drafts-count");
    var k = n ? parseInt(n.textContent, 10) : NaN;
    if (isNaN(k)) return;
    var rise = waitingSeen === null ? 0 : k - waitingSeen;
    waitingSeen = k;
    if (rise <= 0 || !notifyOn() || (!document.hidden && document.hasFocus())) return;
    try {
      var note = new Notification(rise === 1 ? "1 new draft to approve" : rise + " new drafts to approve",
        {body: k + " waiting in the queue", tag: "handoff-drafts"});
      note.onclick = function () { window.focus(); note.close(); };
    } catch (e) { /* a browser that shows them only from a service worker */ }
  }
  notifyButton();
  notifyNew();
  document.addEventListener("htmx:oobAfterSwap", notifyNew);

  // A table wider than the screen scrolls inside its own box (app.css);
  // a tabindex lets the keyboard reach that box and scroll it too.
  function scrollables() {
    document.querySelectorAll("table.list").forEach(function (t) {
      if (t.scrollWidth > t.clientWidth + 1) t.tabIndex = 0;
      else t.removeAttribute("tabindex");
    });
  }
  scrollables();
  window.addEventListener("resize", scrollables);
  document.addEventListener("htmx:afterSettle", scrollables);

  // The undo stack counts its seconds on the server: it polls itself
  // (hx-trigger) while an entry is live, so nothing is counted here.

  // htmx gives focus back to the field that had it when the card is
  // swapped; for the next draft, start with no field focused so the
  // shortcuts work again at once. Only a card that now shows another
  // draft (or the empty queue) does that: the undo stack and the live
  // queue settle every second or few while the person types an edit, and
  // blurring the reply then would turn the rest of their typing into
  // shortcuts ("u" undoing, "j" moving on).
  function cardShows() {
    var card = document.getElementById("card");
    if (!card) return "";
    return card.classList.contains("empty") ? "empty" : "draft:" + (card.dataset.draft || "");
  }
  var cardSeen = cardShows();
  document.addEventListener("htmx:afterSettle", function () {
    var now = cardShows();
    if (now === cardSeen) return;
    cardSeen = now;
    var card = document.getElementById("card");
    if (card && card.contains(document.activeElement)) document.activeElement.blur();
  });
  // "?" shows the shortcuts (views/help.templ); Escape or its button
  // closes the modal dialog, and focus goes back where it was.
  function showHelp() {
    var d = document.getElementById("help");
    if (!d || typeof d.showModal !== "function") return false;
    if (!d.open) d.showModal();
    return true;
  }

  // The selection (views/selection.templ): the ticked drafts of the list
  // are kept by id in the tab's session storage, so the live queue's swaps
  // of the list (every few seconds) and moving to the next draft (j, k)
  // keep them ticked; "x" ticks the card's draft.
  var picked = new Set();
  try { picked = new Set(JSON.parse(sessionStorage.getItem("handoff.picked") || "[]")); } catch (e) { picked = new Set(); }
  function savePicked() {
    try { sessionStorage.setItem("handoff.picked", JSON.stringify(Array.from(picked))); } catch (e) { /* private mode: this page only */ }
  }
  function pickCount() {
    var out = document.getElementById("selected-count");
    if (!out) return;
    var n = 0;
    document.querySelectorAll("#queue-list input.pick").forEach(function (b) {
      b.checked = picked.has(b.value);
      if (b.checked) n++;
    });
    out.textContent = n === 0 ? "Tick drafts (or press x) to decide several at once." : n + " selected.";
    // With nothing ticked the selection's buttons have nothing to do.
    ["approve-selected", "reject-selected"].forEach(function (id) {
      var b = document.getElementById(id);
      if (b) b.disabled = n === 0;
    });
  }
  function toggleCurrent() {
    var card = document.getElementById("card");
    if (!card || !card.dataset.draft) return false;
    var id = card.dataset.draft;
    if (!document.querySelector('#queue-list input.pick[value="' + CSS.escape(id) + '"]')) return false;
    if (picked.has(id)) picked.delete(id); else picked.add(id);
    savePicked();
    pickCount();
    return true;
  }
  document.addEventListener("change", function (ev) {
    var b = ev.target;
    if (!b || !b.classList || !b.classList.contains("pick")) return;
    if (b.checked) picked.add(b.value); else picked.delete(b.value);
    savePicked();
    pickCount();
  });
  document.addEventListener("htmx:oobAfterSwap", pickCount);
  document.addEventListener("htmx:afterRequest", function (ev) {
    if (ev.detail.elt && ev.detail.elt.id === "selection" && ev.detail.successful) {
      picked.clear();
      savePicked();
      pickCount();
    }
  });
  // A plain form post (no htmx) answers with a new page: start afresh there.
  if (document.getElementById("selection-result")) { picked.clear(); savePicked(); }
  pickCount();
})();
