/* The header's menu: on a narrow screen it collapses behind the Menu button.
   Without this script the menu stays open and wraps (nothing is hidden). */
(function () {
  "use strict";
  var header = document.getElementById("top");
  var button = document.getElementById("menu-toggle");
  if (!header || !button) { return; }
  header.classList.add("collapsible");
  button.hidden = false;
  button.addEventListener("click", function () {
    var open = header.classList.toggle("open");
    button.setAttribute("aria-expanded", String(open));
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && header.classList.contains("open")) {
      header.classList.remove("open");
      button.setAttribute("aria-expanded", "false");
      button.focus();
    }
  });
})();
