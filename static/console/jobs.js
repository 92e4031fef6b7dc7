// The jobs page's selection. The stream swaps rows (and the whole table) as the records change,
// and a swapped row comes with its checkbox unticked: the selection lives here, by job id, and
// is put back after every swap. A job that has left the view leaves the selection too, so
// what the bulk buttons act on is exactly what is ticked on the page. Their questions name
// how many jobs they will act on (base.html asks them before the form posts).
(function () {
  "use strict";
  var selected = new Set();

  function boxes() { return document.querySelectorAll('#frag-jobs input[name="job"]'); }

  function show() {
    var onPage = new Set();
    boxes().forEach(function (box) { onPage.add(box.value); box.checked = selected.has(box.value); });
    selected.forEach(function (id) { if (!onPage.has(id)) { selected.delete(id); } });
    var n = selected.size, all = document.querySelector("#frag-jobs [data-pick-all]");
    if (all) { all.checked = n > 0 && n === onPage.size; all.indeterminate = n > 0 && n < onPage.size; }
    var jobs = n === 1 ? "1 selected job" : n + " selected jobs";
    document.querySelectorAll("[data-bulk]").forEach(function (button) {
      button.disabled = n === 0;
      button.dataset.count = String(n);
      button.dataset.confirm = button.dataset.bulk === "cancel"
        ? "Cancel " + jobs + "? Their partitions stop where they are; retry starts the unfinished ones again."
        : "Retry " + jobs + "?";
    });
    var picked = document.querySelector("[data-picked]");
    if (picked) { picked.textContent = n + " selected"; }
  }

  document.addEventListener("change", function (event) {
    var el = event.target;
    if (!el.closest || !el.closest("#frag-jobs")) { return; }
    if (el.matches("[data-pick-all]")) {
      boxes().forEach(function (box) { if (el.checked) { selected.add(box.value); } else { selected.delete(box.value); } });
    } else if (el.matches('input[name="job"]')) {
      if (el.checked) { selected.add(el.value); } else { selected.delete(el.value); }
    }
    show();
  });
  document.addEventListener("htmx:sseMessage", show);
  show();
})();
