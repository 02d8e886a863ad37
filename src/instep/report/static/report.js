// instep report: the case table's filters and search (the charts are inline SVG drawn
// when the report is written). Plain JavaScript, no framework, no network. Data comes
// from the escaped data-* attributes of the table rows. Test text is only ever assigned
// through textContent, never innerHTML.
(function () {
  "use strict";

  var FILTERS = ["status", "layer", "category", "batch"];

  function control(name) {
    return document.getElementById("f-" + name);
  }

  function applyFilters() {
    var rows = document.querySelectorAll("#case-table tbody tr.case-row");
    var wanted = {};
    FILTERS.forEach(function (name) {
      wanted[name] = control(name).value;
    });
    var words = control("search").value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      var visible = FILTERS.every(function (name) {
        return !wanted[name] || row.getAttribute("data-" + name) === wanted[name];
      });
      if (visible && words.length) {
        var text = row.getAttribute("data-search") || "";
        visible = words.every(function (word) {
          return text.indexOf(word) !== -1;
        });
      }
      row.hidden = !visible;
      if (visible) shown++;
    }
    var count = document.getElementById("shown-count");
    if (count) count.textContent = shown + " of " + rows.length + " cases";
  }

  function setFilter(name, value) {
    var select = control(name);
    if (!select) return;
    var known = Array.prototype.some.call(select.options, function (option) {
      return option.value === value;
    });
    select.value = known ? value : "";
  }

  function wireFilters() {
    if (!document.getElementById("case-table")) return;
    FILTERS.forEach(function (name) {
      control(name).addEventListener("change", applyFilters);
    });
    control("search").addEventListener("input", applyFilters);
    document.getElementById("filters").addEventListener("submit", function (event) {
      event.preventDefault();
    });
    document.getElementById("f-reset").addEventListener("click", function () {
      FILTERS.forEach(function (name) {
        control(name).value = "";
      });
      control("search").value = "";
      applyFilters();
    });
    // Links in the layer table, Failing now and the batch table set the filters they name.
    var links = document.querySelectorAll("[data-filter-layer], [data-filter-batch]");
    for (var i = 0; i < links.length; i++) {
      links[i].addEventListener("click", function (event) {
        var link = event.currentTarget;
        FILTERS.forEach(function (name) {
          control(name).value = "";
        });
        control("search").value = "";
        FILTERS.forEach(function (name) {
          var value = link.getAttribute("data-filter-" + name);
          if (value !== null) setFilter(name, value);
        });
        applyFilters();
      });
    }
    applyFilters();
  }

  document.addEventListener("DOMContentLoaded", function () {
    wireFilters();
  });
})();
