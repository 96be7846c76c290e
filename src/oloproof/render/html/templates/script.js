"use strict";
(function () {
  // The report's case table: filter by criterion and outcome, search the case's text.
  // (The viewer filters on the server: its table is one page of many.)
  var table = document.querySelector("#case-table[data-filter='client']");
  if (table) {
    var rows = Array.prototype.slice.call(table.querySelectorAll("tr.case-row"));
    var crit = document.getElementById("filter-criterion");
    var outcome = document.getElementById("filter-outcome");
    var search = document.getElementById("filter-search");
    var count = document.getElementById("filter-count");
    var apply = function () {
      var c = crit.value, o = outcome.value, q = search.value.trim().toLowerCase();
      var shown = 0;
      rows.forEach(function (row) {
        var state = c === "" ? row.dataset.outcome : row.getAttribute("data-c" + c);
        var ok = (o === "" || state === o) && (q === "" || row.dataset.search.indexOf(q) !== -1);
        row.hidden = !ok;
        if (ok) { shown += 1; }
      });
      count.textContent = shown + " of " + rows.length + " cases shown";
    };
    [crit, outcome].forEach(function (el) { el.addEventListener("change", apply); });
    search.addEventListener("input", apply);
    apply();
  }

  // The viewer's filters are a form: a new choice in a list asks for its first page.
  var form = document.getElementById("case-filters");
  if (form) {
    Array.prototype.forEach.call(form.querySelectorAll("select"), function (el) {
      el.addEventListener("change", function () { form.submit(); });
    });
  }

  // The report file: one page per case, chosen by the address's #case-N.
  var runPage = document.getElementById("run-page");
  var casePages = document.querySelectorAll("section.case-page[id^='case-']");
  if (runPage && casePages.length) {
    var route = function () {
      var target = location.hash.match(/^#case-\d+$/) ? document.getElementById(location.hash.slice(1)) : null;
      Array.prototype.forEach.call(casePages, function (p) { p.hidden = p !== target; });
      runPage.hidden = target !== null;
      if (target) { window.scrollTo(0, 0); }
      else if (location.hash) {
        var anchor = document.getElementById(location.hash.slice(1));
        if (anchor) { anchor.scrollIntoView(); }
      }
    };
    window.addEventListener("hashchange", route);
    route();
  }

  // The viewer: a run in progress, fed by server-sent events (the --json event stream,
  // and `progress`, the counts the header shows).
  var live = document.getElementById("live");
  if (live && window.EventSource) {
    var status = document.getElementById("live-status");
    var progress = document.getElementById("live-progress");
    var completeness = document.getElementById("completeness");
    var since = document.getElementById("cases-since");
    var tbody = document.querySelector("#live-metrics tbody");
    var stored = Number(live.dataset.stored);
    var pct = function (x) { return x === null ? "" : (100 * x).toFixed(1) + "%"; };
    var plural = function (n, word) { return n + " " + word + (n === 1 ? "" : "s"); };
    var last = "";
    var source = new EventSource(live.dataset.events);
    source.onopen = function () { status.textContent = "following"; };
    source.onerror = function () { if (status.textContent !== "finished") { status.textContent = "reconnecting…"; } };
    source.addEventListener("case_executed", function (e) {
      var ev = JSON.parse(e.data);
      last = " · last: " + ev.scenario_id + " " + ev.status;
    });
    source.addEventListener("progress", function (e) {
      var ev = JSON.parse(e.data);
      progress.textContent = ev.cases_done + "/" + ev.cases_total + " cases" + last;
      completeness.textContent = ev.cases_done + " of " + ev.cases_total + " cases stored · " +
        plural(ev.cases_errored, "execution error") + " · " + completeness.dataset.completeness;
      if (since) {
        var more = ev.cases_done - stored;
        since.textContent = more > 0 ? "· " + more + " more finished since; reload to list them" : "";
      }
    });
    source.addEventListener("provisional_metrics", function (e) {
      var ev = JSON.parse(e.data);
      while (tbody.firstChild) { tbody.removeChild(tbody.firstChild); }
      ev.metrics.forEach(function (m) {
        var tr = document.createElement("tr");
        tr.className = "live-metric";
        [m.metric, pct(m.estimate),
         m.wilson_lower === null ? "" : "[" + pct(m.wilson_lower) + ", " + pct(m.wilson_upper) + "]",
         m.n_observed + " observed · " + m.n_missing + " missing"].forEach(function (text) {
          var td = document.createElement("td");
          td.textContent = text;
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
    });
    source.addEventListener("run_finished", function () {
      status.textContent = "finished";
      source.close();
      location.reload();
    });
  }
})();
