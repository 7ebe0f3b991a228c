// Keyboard review: j/k move through the queue, Enter opens, a approves, r rejects, n goes on.
(function () {
  "use strict";
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  function rows() { return Array.prototype.slice.call(document.querySelectorAll('[data-testid="change-row"]')); }
  function move(step) {
    var list = rows();
    if (!list.length) return;
    var index = list.indexOf(document.activeElement);
    var next = list[Math.max(0, Math.min(list.length - 1, index < 0 ? 0 : index + step))];
    list.forEach(function (r) { r.classList.remove("selected"); r.removeAttribute("aria-selected"); });
    next.classList.add("selected");
    next.setAttribute("aria-selected", "true");
    next.focus();
  }
  function click(selector) {
    var el = document.querySelector(selector);
    if (el) { el.click(); return true; }
    return false;
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    if (key === "j") { move(1); event.preventDefault(); }
    else if (key === "k") { move(-1); event.preventDefault(); }
    else if (key === "Enter" && event.target.dataset && event.target.dataset.href) {
      window.location.assign(event.target.dataset.href); event.preventDefault();
    }
    else if (key === "a") { if (click('[data-testid="approve"]')) event.preventDefault(); }
    else if (key === "r") {
      var reason = document.getElementById("reject-reason");
      if (reason) { reason.focus(); event.preventDefault(); }
    }
    else if (key === "n") { if (click("#next-change")) event.preventDefault(); }
  });
  document.addEventListener("htmx:afterSettle", function () {
    var next = document.getElementById("next-change");
    if (next) next.focus();
  });
})();
