// The review pages' behaviour (CSP: no inline scripts). Keyboard review: j/k move through the queue,
// Enter opens, a approves, r rejects, n goes on. On a change that needs confirmation (medium or
// high risk, a permanent delete, a merge that drops facts) `a` first moves to the confirm box
// (Space ticks it, `a` again approves): a single key never approves it. Clicking a row opens it; a select-all box ticks the
// rows shown; the approve form says what approving will do to live memory as the choices change.
(function () {
  "use strict";
  function typing(el) {
    if (el && el.tagName === "INPUT" && el.type === "checkbox") return false;  // shortcuts still work on boxes
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  // `a`: approve, unless the change needs confirmation and it is not ticked yet.
  function approve() {
    var confirm = document.querySelector('[data-testid="confirm-risk"]');
    if (confirm && !confirm.checked) {
      confirm.focus();
      var box = document.getElementById("risk-confirm");
      if (box) box.classList.add("attention");
      return true;
    }
    return click('[data-testid="approve"]');
  }
  function rows() { return Array.prototype.slice.call(document.querySelectorAll('[data-testid="change-row"]')); }
  // The row holding the focus (its link is the row's one tab stop).
  function currentRow() {
    var el = document.activeElement;
    return el && el.closest ? el.closest('[data-testid="change-row"]') : null;
  }
  function move(step) {
    var list = rows();
    if (!list.length) return;
    var index = list.indexOf(currentRow());
    var next = list[Math.max(0, Math.min(list.length - 1, index < 0 ? 0 : index + step))];
    list.forEach(function (r) { r.classList.remove("selected"); r.removeAttribute("aria-selected"); });
    next.classList.add("selected");
    next.setAttribute("aria-selected", "true");
    (next.querySelector("a.preview") || next).focus();
  }
  function click(selector) {
    var el = document.querySelector(selector);
    if (el) { el.click(); return true; }
    return false;
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (document.querySelector("dialog[open]")) return;  // the shortcut help is open (app.js)
    var key = event.key;
    if (key === "j") { move(1); event.preventDefault(); }
    else if (key === "k") { move(-1); event.preventDefault(); }
    else if (key === "Enter" && event.target.dataset && event.target.dataset.href) {
      window.location.assign(event.target.dataset.href); event.preventDefault();
    }
    else if ((key === "x" || key === " ") && currentRow() && event.target.tagName === "A") {
      var box = currentRow().querySelector('input[name="change_id"]');
      if (box) { box.click(); event.preventDefault(); }  // a click fires "change": select-all follows
    }
    else if (key === "o" && currentRow() && event.target.tagName === "A") {
      var expand = currentRow().querySelector('[data-testid="row-expand"]');
      if (expand) { expand.click(); event.preventDefault(); }
    }
    else if (key === "a") { if (approve()) event.preventDefault(); }
    else if (key === "r") {
      var reason = document.getElementById("reject-reason");
      if (reason) { reason.focus(); event.preventDefault(); }
    }
    else if (key === "n") { if (click("#next-change")) event.preventDefault(); }
  });

  // "show here" toggles: a second click closes the opened row instead of fetching it again (this
  // listener runs in the capture phase, before htmx's own on the button).
  document.addEventListener("click", function (event) {
    var expand = event.target.closest && event.target.closest('[data-testid="row-expand"]');
    if (!expand) return;
    var opened = document.getElementById(expand.getAttribute("aria-controls"));
    if (opened) {
      opened.remove();
      expand.setAttribute("aria-expanded", "false");
      event.preventDefault();
      event.stopPropagation();
    } else {
      expand.setAttribute("aria-expanded", "true");
    }
  }, true);

  // A click anywhere on a row opens it, except on its own controls (checkbox, link, text selection).
  document.addEventListener("click", function (event) {
    var row = event.target.closest && event.target.closest('[data-testid="change-row"]');
    if (!row || event.target.closest("a, input, button, label, select, textarea")) return;
    if (window.getSelection && String(window.getSelection())) return;
    window.location.assign(row.dataset.href);
  });

  // Select all: ticks every row shown; shows mixed when some are ticked.
  function boxes() { return Array.prototype.slice.call(document.querySelectorAll('#queue-rows input[name="change_id"]')); }
  function syncSelectAll() {
    var all = document.getElementById("select-all");
    if (!all) return;
    var list = boxes(), ticked = list.filter(function (b) { return b.checked; }).length;
    all.hidden = false;
    all.disabled = list.length === 0;
    all.checked = list.length > 0 && ticked === list.length;
    all.indeterminate = ticked > 0 && ticked < list.length;
    var count = document.getElementById("bulk-count");
    if (count) count.textContent = ticked ? ticked + " selected" : "None selected";
  }
  // On a phone the filters fold away (unless one is set), so the queue's first row is near the top.
  function foldFilters() {
    var filters = document.getElementById("queue-filters");
    if (filters && !filters.dataset.active && !filters.dataset.folded && window.matchMedia &&
        window.matchMedia("(max-width: 760px)").matches) {
      filters.open = false;
    }
    if (filters) filters.dataset.folded = "1";
  }
  foldFilters();
  document.addEventListener("change", function (event) {
    if (event.target.id === "select-all") {
      boxes().forEach(function (b) { b.checked = event.target.checked; });
    }
    if (event.target.id === "select-all" || event.target.name === "change_id") syncSelectAll();
    if (event.target.id === "supersedes" || event.target.id === "merge-into" || event.target.id === "keep-both") {
      describeApprove();
    }
  });

  // The sentence saying what approve does follows the supersede / merge choices.
  function describeApprove() {
    var effect = document.getElementById("approve-effect");
    var supersedes = document.getElementById("supersedes"), merge = document.getElementById("merge-into");
    if (!effect || !supersedes || !merge) return;
    var kept = effect.dataset.kept, keep = document.getElementById("keep-both");
    var retiring = keep && keep.checked ? [] : (effect.dataset.retiring || "").split(", ").filter(Boolean);
    if (supersedes.value && retiring.indexOf(supersedes.value) < 0) retiring.unshift(supersedes.value);
    var text;
    if (merge.value) {
      text = "Approve will merge this into " + merge.value + ", which keeps the combined content; no new memory is created.";
    } else if (retiring.length) {
      text = "Approve will add this as a new live memory and retire " + retiring.join(", ") + ", which stop" +
        (retiring.length === 1 ? "s" : "") + " being live.";
    } else if (keep && keep.checked) {
      text = "Approve will add this as a new live memory; " + effect.dataset.retiring + " stays live too, as you chose: both stay live.";
    } else if (kept) {
      text = "Approve will add this as a new live memory; " + kept + " stays live too: both stay live.";
    } else {
      text = "Approve will add this as a new live memory.";
    }
    effect.textContent = text;
  }

  function settle() {
    syncSelectAll();
    describeApprove();
  }
  if (document.readyState !== "loading") settle(); else document.addEventListener("DOMContentLoaded", settle);
  document.addEventListener("htmx:afterSettle", function () {
    settle();
    var next = document.getElementById("next-change");
    if (next) next.focus();
  });

  // Live updates (app/web/review_stream.py). Once the event stream is open the queue's 2 s poller
  // is not needed: the stream re-reads the current view on every change. Without EventSource (or
  // until it connects) the poller keeps the queue current. A reconnect may have missed events, so
  // it re-reads the view once.
  function refreshQueue() {
    var refresher = document.getElementById("queue-refresher");
    if (refresher) htmx.trigger(refresher, "sse:change");
  }
  document.addEventListener("htmx:sseOpen", function (event) {
    var poller = document.getElementById("queue-poller");
    if (poller) poller.remove();
    if (event.target.dataset.live) refreshQueue();
    event.target.dataset.live = "open";
  });
  // Re-reading the view would drop ticked rows and rows opened in place: it waits until they are
  // gone (a decision settled, a box unticked), then catches up.
  function queueBusy() {
    return document.querySelector('#queue-rows input[name="change_id"]:checked, #queue-rows [id^="peek-"]');
  }
  // A re-read already on its way when a box gets ticked would land over the tick (found by the
  // reviewer benchmark's bulk flow): its answer is dropped, and the view is read again later.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var from = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (!from || from.id !== "queue-refresher" || !queueBusy()) return;
    event.detail.shouldSwap = false;
    from.dataset.stale = "1";
  });
  var focusedRow = null;  // the row keyboard review is on, found again in the re-read view
  document.addEventListener("htmx:confirm", function (event) {
    if (event.target.id !== "queue-refresher") return;
    if (queueBusy()) {
      event.preventDefault();
      event.target.dataset.stale = "1";
      return;
    }
    var row = currentRow();
    focusedRow = row ? row.dataset.changeId : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!focusedRow) return;
    var row = document.querySelector('[data-testid="change-row"][data-change-id="' + focusedRow + '"]');
    focusedRow = null;
    if (row && !currentRow()) {
      row.classList.add("selected");
      row.setAttribute("aria-selected", "true");
      (row.querySelector("a.preview") || row).focus();
    }
  });
  function catchUp() {
    var refresher = document.getElementById("queue-refresher");
    if (refresher && refresher.dataset.stale && !queueBusy()) {
      delete refresher.dataset.stale;
      refreshQueue();
    }
  }
  document.addEventListener("htmx:afterSettle", catchUp);
  document.addEventListener("change", catchUp);
  // Without EventSource, views the 2 s poller does not cover (a middle page, newest first past
  // page 1) are re-read every 10 s instead.
  if (!window.EventSource) {
    setInterval(function () { if (!document.getElementById("queue-poller")) refreshQueue(); }, 10000);
  }
  // Another reviewer decided the change this page shows: its banner came in (from the stream, or
  // without EventSource from polling it every 5 s); the decision controls go, since deciding
  // again could only fail.
  function decidedElsewhere(target) {
    if (!target || target.id !== "live-banner" || !target.textContent.trim()) return;
    // The decision's controls, inside its forms or tied to them by a `form` attribute.
    var controls = document.querySelectorAll("#review-body form button, #review-body form input, " +
      "#review-body form textarea, #review-body form select, #review-body [form]");
    Array.prototype.forEach.call(controls, function (el) { el.disabled = true; });
  }
  document.addEventListener("htmx:sseMessage", function (event) {
    decidedElsewhere(event.target);
    if (event.target.id === "live-approval") approvedElsewhere();
  });
  // Another reviewer gave one of the approvals this change needs: it is still pending, but what the
  // page says (approvals so far, what approving does) is not, so the change is read again, unless
  // this reviewer has started on a decision (typed, ticked, chose), which a re-read would drop.
  function approvedElsewhere() {
    var body = document.getElementById("review-body");
    if (!body || body.dataset.status !== "pending") return;
    var started = Array.prototype.some.call(body.querySelectorAll("form input, form textarea, form select, [form]"),
      function (el) {
        if (el.type === "hidden" || el.tagName === "BUTTON") return false;
        if (el.type === "checkbox") return el.checked !== el.defaultChecked;
        if (el.tagName === "SELECT") {
          return Array.prototype.some.call(el.options, function (o) { return o.selected !== o.defaultSelected; });
        }
        return el.value !== el.defaultValue;
      });
    if (started) return;
    htmx.ajax("GET", window.location.pathname + window.location.search,
              {target: "#review-body", select: "#review-body", swap: "outerHTML"});
  }
  document.addEventListener("htmx:afterSwap", function (event) { decidedElsewhere(event.target); });
  var live = document.getElementById("review-live");
  if (!window.EventSource && live && live.dataset.fallback) {
    var banner = setInterval(function () {
      if (document.getElementById("live-banner").textContent.trim()) { clearInterval(banner); return; }
      htmx.ajax("GET", live.dataset.fallback, {target: "#live-banner", swap: "innerHTML"});
      pollApproval();
    }, 5000);
  }
  // Without EventSource, another reviewer's approval (of a change that needs more) is polled too: a
  // banner with more approvals than the page has seen is shown, and the change is read again.
  var approvalsSeen = live ? Number(live.dataset.approvals || 0) : 0;
  function pollApproval() {
    fetch(live.dataset.fallback + "&kind=approval", {credentials: "same-origin"}).then(function (response) {
      return response.status === 200 ? response.text() : "";
    }).then(function (html) {
      if (!html) return;
      var holder = document.createElement("div");
      holder.innerHTML = html;  // the server's escaped banner, as the stream would send it
      var given = Number((holder.querySelector("[data-given]") || {dataset: {}}).dataset.given || 0);
      if (given <= approvalsSeen) return;
      approvalsSeen = given;
      document.getElementById("live-approval").innerHTML = html;
      approvedElsewhere();
    }).catch(function () { /* the next poll tries again */ });
  }
  // "N s ago" keeps counting on the live banner.
  setInterval(function () {
    Array.prototype.forEach.call(document.querySelectorAll("time[data-ago]"), function (el) {
      var seconds = Math.max(0, Math.round((Date.now() - Date.parse(el.getAttribute("datetime"))) / 1000));
      el.textContent = (seconds < 60 ? seconds + " s" : seconds < 3600 ? Math.floor(seconds / 60) + " min"
        : seconds < 86400 ? Math.floor(seconds / 3600) + " h" : Math.floor(seconds / 86400) + " d") + " ago";
    });
  }, 1000);
})();
