// Memwarden's only first-party script on every page: no inline handlers anywhere (the CSP forbids them).
(function () {
  "use strict";
  function ready(fn) {
    if (document.readyState !== "loading") fn(); else document.addEventListener("DOMContentLoaded", fn);
  }
  ready(function () {
    var status = document.getElementById("htmx-status");
    if (status && window.htmx) {
      status.textContent = "htmx " + window.htmx.version + " loaded";
      status.dataset.htmxVersion = window.htmx.version;
    }
  });

  // Keyboard help: `?` (or a "Keyboard shortcuts" button) opens the modal dialog in base.html. The
  // page behind is inert while it is open; Tab and Shift+Tab cycle inside it; Escape closes it (the
  // dialog's own cancel) and focus returns to where it was.
  var opener = null;
  function help() { return document.getElementById("shortcut-help"); }
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  function openHelp() {
    var dialog = help();
    if (!dialog || dialog.open) return;
    opener = document.activeElement;
    dialog.showModal();
    var close = dialog.querySelector("[data-testid='help-close']");
    if (close) close.focus();
  }
  function focusables(dialog) {
    return Array.prototype.filter.call(dialog.querySelectorAll("a[href], button, input, select, textarea, [tabindex]"),
      function (el) { return !el.disabled && el.tabIndex >= 0; });
  }
  document.addEventListener("keydown", function (event) {
    var dialog = help();
    if (dialog && dialog.open) {
      if (event.key === "Tab") {
        var list = focusables(dialog);
        if (!list.length) return;
        var first = list[0], last = list[list.length - 1];
        if (event.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) {
          last.focus(); event.preventDefault();
        } else if (!event.shiftKey && (document.activeElement === last || !dialog.contains(document.activeElement))) {
          first.focus(); event.preventDefault();
        }
      }
      return;
    }
    if (event.key === "?" && !event.ctrlKey && !event.metaKey && !event.altKey && !typing(event.target)) {
      openHelp();
      event.preventDefault();
    }
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-help-open]");
    if (button) { openHelp(); event.preventDefault(); }
  });
  ready(function () {
    var dialog = help();
    if (!dialog) return;
    dialog.addEventListener("close", function () {
      if (opener && opener.focus && document.contains(opener)) opener.focus();
      opener = null;
    });
  });
  window.memwarden = { ready: ready, openHelp: openHelp };
})();
