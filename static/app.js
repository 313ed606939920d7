// Keyboard shortcuts of the dashboard, and nothing else. Everything works
// without them: each key clicks a link or button, or focuses a field, that
// is on the page.
//   j / k   next / previous draft        a   approve as drafted
//   e       edit the reply               Ctrl+Enter (in the reply)   approve the edit
//   r       reason for rejecting         /   search        Esc   leave a field
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
      case "/": done = focus("search"); break;
    }
    if (done) ev.preventDefault();
  });

  // htmx gives focus back to the field that had it when the card is
  // swapped; for the next draft, start with no field focused so the
  // shortcuts work again at once.
  document.addEventListener("htmx:afterSettle", function (ev) {
    var card = document.getElementById("card");
    if (card && card.contains(document.activeElement)) document.activeElement.blur();
  });
})();
