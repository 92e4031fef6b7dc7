// Durations tick here between server flushes. The start of each running phase comes from the
// records (data-started-at, epoch ms); "now" is the server's clock corrected for this
// browser's skew, which every flush re-measures from #server-clock. Finished phases carry no
// data-started-at: they show the server's final figure and never tick.
(function () {
  "use strict";
  var skew = 0; // server time minus browser time, in ms

  function measureSkew() {
    var clock = document.getElementById("server-clock");
    var serverNow = clock && Number(clock.dataset.now);
    if (serverNow) { skew = serverNow - Date.now(); }
  }

  function fmt(ms) { // the same shapes as engine.console.fragments.fmt_ms
    if (ms < 0) { ms = 0; }
    if (ms < 1000) { return Math.floor(ms) + "ms"; }
    if (ms < 60000) { return (ms / 1000).toFixed(1) + "s"; }
    var s = Math.floor(ms / 1000), m = Math.floor(s / 60);
    if (m < 60) { return m + "m " + String(s % 60).padStart(2, "0") + "s"; }
    return Math.floor(m / 60) + "h " + String(m % 60).padStart(2, "0") + "m";
  }

  // The longest age shown for each start: a re-measured skew (network jitter) must not make a
  // duration step back.
  var shown = new Map();

  function tick() {
    var now = Date.now() + skew;
    if (shown.size > 5000) { shown.clear(); }
    document.querySelectorAll("[data-started-at]").forEach(function (el) {
      var key = el.dataset.startedAt + "|" + (el.dataset.suffix || "");
      var age = Math.max(now - Number(el.dataset.startedAt), shown.get(key) || 0);
      shown.set(key, age);
      el.textContent = fmt(age) + (el.dataset.suffix || "");
      if (el.dataset.staleAfter) { // a heartbeat going quiet flags its host before the next flush
        var host = el.closest(".host");
        if (host) { host.classList.toggle("stale", age > Number(el.dataset.staleAfter)); }
      }
    });
    // A deadline counts down to data-due-at (epoch ms); its job turns at risk at data-risk-at
    // and late once the deadline passes, before the next flush says so (engine.console.units).
    document.querySelectorAll("[data-due-at]").forEach(function (el) {
      var due = Number(el.dataset.dueAt);
      var riskAt = el.dataset.riskAt ? Number(el.dataset.riskAt) : Infinity;
      var state = now > due ? "late" : (now >= riskAt ? "at-risk" : "on-time");
      el.textContent = state === "late" ? "late by " + fmt(now - due)
        : (state === "at-risk" ? "at risk: " : "") + "due in " + fmt(due - now);
      el.className = "deadline " + state;
      var head = el.closest("[data-deadline-state]");
      if (head) { head.dataset.deadlineState = state; }
    });
  }

  document.addEventListener("htmx:sseMessage", function () { measureSkew(); tick(); });
  document.addEventListener("htmx:sseOpen", function () { document.body.classList.add("live"); });
  document.addEventListener("htmx:sseError", function () { document.body.classList.remove("live"); });
  measureSkew();
  tick();
  setInterval(tick, 200);
})();
