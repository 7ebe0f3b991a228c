// Memwarden's only first-party script: no inline handlers anywhere (the CSP forbids them).
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
  window.memwarden = { ready: ready };
})();
