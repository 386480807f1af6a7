/* Collapsing menus, for every page of the site (the front door, /docs/, the dashboard and
   the playground). A box marked data-collapsible holds a hidden button.menu-toggle whose
   aria-controls names its menu; this script shows the button and marks the box
   "collapsible", and each stylesheet hides the menu of a collapsible box on a narrow screen
   until the button opens it ("open"). Escape closes what is open. Without this script every
   menu stays open and wraps: nothing is hidden. No inline handlers (CSP-ready). */
(function () {
  "use strict";
  var boxes = [];

  function setOpen(box, open) {
    box.element.classList.toggle("open", open);
    box.button.setAttribute("aria-expanded", String(open));
  }

  document.querySelectorAll("[data-collapsible]").forEach(function (element) {
    var button = element.querySelector("button.menu-toggle[aria-controls]");
    if (!button || !document.getElementById(button.getAttribute("aria-controls"))) { return; }
    var box = { element: element, button: button };
    boxes.push(box);
    element.classList.add("collapsible");
    button.hidden = false;
    button.addEventListener("click", function () {
      setOpen(box, !element.classList.contains("open"));
    });
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") { return; }
    boxes.forEach(function (box) {
      if (!box.element.classList.contains("open")) { return; }
      var hadFocus = box.element.contains(document.activeElement);
      setOpen(box, false);
      if (hadFocus) { box.button.focus(); }
    });
  });
})();
