// jira-hub console: keeps an open page current without reloading it. Every few seconds the
// page is fetched again and each section marked data-live is replaced by its new version; forms
// outside those sections (a note being typed) are left alone. Without JavaScript the links and
// forms work as they are.
(function () {
  "use strict";
  var PERIOD_MS = 3000;
  var busy = false;

  function typingIn(section) {
    var active = document.activeElement;
    return active && section.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
  }

  function update() {
    var live = document.querySelectorAll("[data-live][id]");
    if (busy || document.hidden || live.length === 0) {
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (response.status === 401) {
          // Signed out elsewhere: show the sign-in form.
          window.location.reload();
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (!text) {
          return;
        }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        live.forEach(function (section) {
          var next = fresh.getElementById(section.id);
          if (next && next.innerHTML !== section.innerHTML && !typingIn(section)) {
            section.innerHTML = next.innerHTML;
          }
        });
        document.documentElement.setAttribute("data-updated", String(Date.now()));
      })
      .catch(function () {
        // The hub is restarting or the network is down: try again at the next tick.
      })
      .then(function () {
        busy = false;
      });
  }

  window.setInterval(update, PERIOD_MS);
})();
