// The top bar's menu on narrow screens: static/css/portal.css folds it behind the Menu button below
// 1000 px; this opens and closes it (Escape closes it too). Without JavaScript, css/noscript.css keeps
// the menu open and the button hidden.
(function () {
  "use strict";

  function start() {
    var button = document.querySelector(".topbar .menu-toggle");
    if (!button) { return; }
    var bar = button.closest(".topbar");

    function setOpen(open) {
      bar.classList.toggle("menu-open", open);
      button.setAttribute("aria-expanded", open ? "true" : "false");
    }

    button.addEventListener("click", function () {
      setOpen(button.getAttribute("aria-expanded") !== "true");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && bar.classList.contains("menu-open")) {
        setOpen(false);
        button.focus();
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
