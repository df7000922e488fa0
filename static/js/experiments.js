// Live progress of an experiment page: polls progress.json every 2 s (PERIOD_MS) while anything runs and
// updates the trial table in place (the page is complete without it: server-rendered first); when
// progress.json's live_key changes, fetches the sections the server renders itself (each trial's
// verdict documents, Request review link and freeze form; the ASHA rung table: experiments/_live.html)
// and swaps them in. Draws the charts from figures.json (auditportal/fairness/figures/experiment.py),
// fetched again when a validation arrives or another trial is selected (a click on its row or on a chart).
(function () {
  "use strict";
  var section = document.getElementById("experiment");
  if (!section) { return; }
  var url = section.getAttribute("data-progress-url");
  var policyUrl = section.getAttribute("data-policy-url");
  var liveUrl = section.getAttribute("data-live-url");
  var liveKey = section.getAttribute("data-live-key");
  var table = document.querySelector("#trials tbody");
  // Every 2 s; a test that follows a page sets window.PortalPollMs (before the page loads) to ask sooner.
  var PERIOD_MS = window.PortalPollMs || 2000;
  // The server renders each bar's width as data (the Content-Security-Policy allows no style attribute).
  document.querySelectorAll('[data-field="bar"][data-percent]').forEach(function (bar) {
    bar.style.width = bar.getAttribute("data-percent") + "%";
  });


  function capfirst(text) {
    return text ? text.charAt(0).toUpperCase() + text.slice(1) : "";
  }

  function cell(tag, text, className) {
    var element = document.createElement(tag);
    if (className) { element.className = className; }
    if (text !== undefined) { element.textContent = text; }
    return element;
  }

  function buildRows(trial) {
    var row = cell("tr");
    row.setAttribute("data-trial", trial.id);
    var number = cell("td");
    var select = cell("button", String(trial.number), "trial-select");
    select.type = "button";
    select.setAttribute("data-select-trial", trial.id);
    select.setAttribute("aria-label", "Show trial " + trial.number + " in the charts");
    number.appendChild(select);
    row.appendChild(number);
    var state = cell("td");
    var badge = cell("span", "", "state");
    badge.setAttribute("data-field", "state");
    state.appendChild(badge);
    row.appendChild(state);
    var progress = cell("td");
    var bar = cell("div", undefined, "progress");
    var fill = cell("span");
    fill.setAttribute("data-field", "bar");
    bar.appendChild(fill);
    progress.appendChild(bar);
    var steps = cell("small");
    steps.setAttribute("data-field", "steps");
    progress.appendChild(steps);
    row.appendChild(progress);
    ["eod", "eod_beyond_noise", "fair_objective", "accuracy"].forEach(function (name) {
      var td = cell("td", "", "num");
      td.setAttribute("data-field", name);
      row.appendChild(td);
    });
    var verdicts = cell("td");
    verdicts.setAttribute("data-field", "verdicts");
    row.appendChild(verdicts);
    var hparams = cell("td", undefined, "hparams");
    hparams.setAttribute("data-field", "hparams");
    var small = cell("small");
    // Formatted by the server (fairness.text.presentation.hparam_text), as the template shows them.
    (trial.hparams_text || []).forEach(function (pair) {
      small.appendChild(cell("code", pair[0] + "=" + pair[1]));
      small.appendChild(document.createTextNode(" "));
    });
    hparams.appendChild(small);
    row.appendChild(hparams);
    // How the portal stopped the trial (early stop, cancel) and when: a row of its own.
    var noteRow = cell("tr", undefined, "trial-note");
    noteRow.setAttribute("data-trial-note", trial.id);
    noteRow.hidden = true;
    var noteCell = cell("td");
    noteCell.colSpan = 9;
    noteCell.setAttribute("data-field", "note");
    noteRow.appendChild(noteCell);
    // Its verdict documents' row comes with the live sections (swapSections).
    var errorRow = cell("tr");
    errorRow.setAttribute("data-trial-error", trial.id);
    var td = cell("td");
    td.colSpan = 9;
    var error = cell("div", "", "error");
    error.setAttribute("data-field", "error");
    var log = cell("pre", "", "log");
    log.setAttribute("data-field", "log_tail");
    td.appendChild(error);
    td.appendChild(log);
    errorRow.appendChild(td);
    var empty = table.querySelector("tr.empty");
    if (empty) { empty.remove(); }
    table.appendChild(row);
    table.appendChild(noteRow);
    table.appendChild(errorRow);
    markSelected();
    return row;
  }

  // Same markup as templates/experiments/_verdict.html; the numbers written by the server
  // (selectors.trial_shown: fairness/text/numbers.py), as the page writes them.
  function renderVerdicts(target, verdicts, texts) {
    if (!target) { return; }
    target.textContent = "";
    if (!verdicts.length) { target.appendChild(cell("span", "\u2014", "muted")); return; }
    verdicts.forEach(function (v) {
      var box = cell("div", undefined, "verdict");
      box.setAttribute("data-attribute", v.attribute);
      box.appendChild(cell("code", v.attribute));
      box.appendChild(document.createTextNode(" "));
      box.appendChild(cell("span", v.verdict || "n/a", "badge verdict-" + (v.verdict || "none")));
      var text = texts[v.attribute];
      if (text) {
        box.appendChild(document.createTextNode(" "));
        box.appendChild(cell("small", text));
      }
      if (v.policy_version) {
        var link = cell("a", undefined, "policy");
        link.href = policyUrl + "#v" + v.policy_version;
        link.appendChild(cell("small", "policy v" + v.policy_version));
        box.appendChild(document.createTextNode(" "));
        box.appendChild(link);
      }
      target.appendChild(box);
    });
  }

  function update(trial) {
    var row = table.querySelector('tr[data-trial="' + trial.id + '"]') || buildRows(trial);
    var badge = row.querySelector('[data-field="state"]');
    badge.textContent = trial.state_label;
    badge.className = "state " + trial.state;
    // How the portal stopped it (early stop, cancel) and when its processes had ended.
    var noteRow = table.querySelector('tr[data-trial-note="' + trial.id + '"]');
    if (noteRow) {
      noteRow.querySelector('[data-field="note"]').textContent = trial.note || "";
      noteRow.hidden = !trial.note;
    }
    row.querySelector('[data-field="bar"]').style.width = trial.progress_percent + "%";
    var shown = trial.shown || {};
    row.querySelector('[data-field="steps"]').textContent = shown.steps;
    ["eod", "eod_beyond_noise", "fair_objective", "accuracy"].forEach(function (name) {
      row.querySelector('[data-field="' + name + '"]').textContent = shown[name];
    });
    renderVerdicts(row.querySelector('[data-field="verdicts"]'), trial.verdicts || [], shown.verdicts || {});
    var errorRow = table.querySelector('tr[data-trial-error="' + trial.id + '"]');
    errorRow.hidden = !trial.error;
    errorRow.querySelector('[data-field="error"]').textContent = capfirst(trial.error);
    // Absent for those who may not see log tails (the poll sends null to them).
    var log = errorRow.querySelector('[data-field="log_tail"]');
    if (log) {
      log.textContent = trial.log_tail || "";
      log.hidden = !trial.log_tail;
    }
  }

  function render(data) {
    var status = document.getElementById("experiment-status");
    status.textContent = data.status_label;
    status.className = "state " + data.status;
    var error = document.getElementById("experiment-error");
    error.textContent = capfirst(data.error);
    error.hidden = !data.error;
    var cancelNote = document.getElementById("experiment-cancel-note");
    cancelNote.textContent = data.cancel_note || "";
    cancelNote.hidden = !data.cancel_note;
    data.trials.forEach(update);
    if (data.live_key && data.live_key !== liveKey) {
      liveKey = data.live_key;
      loadSections();
    }
    var cancel = document.getElementById("cancel-form");
    if (cancel && (!data.active || data.status === "cancelling")) { cancel.hidden = true; }
    // A new validation (or a new trial) extends the charts: fetch them again (a bounded payload).
    var seen = data.trials.map(function (t) { return t.id + ":" + t.metrics.step + ":" + t.verdicts.length; }).join(",");
    if (seen !== lastSeen) {
      lastSeen = seen;
      loadFigures();
    }
    return data.active || data.trials.some(function (t) { return t.state === "RUNNING" || t.state === "STARTING"; });
  }

  // ------------------------------------------------------------- server-rendered sections
  var sectionsLoading = false;
  var sectionsAgain = false;

  function loadSections() {
    if (!liveUrl) { return; }
    if (sectionsLoading) { sectionsAgain = true; return; }
    sectionsLoading = true;
    fetch(liveUrl, { credentials: "same-origin", headers: { Accept: "text/html", "X-Portal-Poll": "1" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(swapSections)
      .catch(function () { liveKey = null; })  // fetched again at the next poll
      .then(function () {
        sectionsLoading = false;
        if (sectionsAgain) { sectionsAgain = false; loadSections(); }
      });
  }

  // The fragment is the server's own rendering (Django's autoescaping; no scripts: the CSP would run
  // none): its rows replace the page's, keeping a step the user chose in a freeze form.
  function swapSections(html) {
    var fragment = new DOMParser().parseFromString(html, "text/html");
    var rungs = fragment.getElementById("early-stopping");
    var current = document.getElementById("early-stopping");
    if (rungs && current) { current.replaceWith(document.adoptNode(rungs)); }
    fragment.querySelectorAll("tr[data-trial-documents]").forEach(function (row) {
      var id = row.getAttribute("data-trial-documents");
      var old = table.querySelector('tr[data-trial-documents="' + id + '"]');
      var fresh = document.adoptNode(row);
      if (old) {
        var chosen = old.querySelector("select[name=step]");
        var select = fresh.querySelector("select[name=step]");
        if (chosen && select && select.querySelector('option[value="' + chosen.value + '"]')) {
          select.value = chosen.value;
        }
        old.replaceWith(fresh);
        return;
      }
      var before = table.querySelector('tr[data-trial-error="' + id + '"]');
      if (before) { before.before(fresh); }
    });
  }

  function poll() {
    // X-Portal-Poll: an automatic request, which does not keep the session alive (SESSION_IDLE_MINUTES).
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json", "X-Portal-Poll": "1" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) {
        if (render(data)) { window.setTimeout(poll, PERIOD_MS); }
      })
      .catch(function () { window.setTimeout(poll, PERIOD_MS * 3); });
  }

  // ------------------------------------------------------------------------------- charts
  var charts = document.getElementById("charts");
  var figuresUrl = charts ? charts.getAttribute("data-figures-url") : null;
  var csvUrl = charts ? charts.getAttribute("data-csv-url") : null;
  var selected = null;  // the selected trial's id
  var objective = "eod";
  var latest = null;  // the last figures.json
  var loading = false;
  var again = false;
  var lastSeen = null;
  var version = 0;
  var clickable = ["figure-timeline", "figure-scatter", "figure-lowest"];

  function element(id) { return document.getElementById(id); }

  function drawInto(id, figure) {
    var target = element(id);
    if (!target) { return Promise.resolve(); }
    target.hidden = !figure;
    if (!figure) { return Promise.resolve(); }
    return window.PortalFigures.draw(target, figure).then(function () {
      if (clickable.indexOf(id) >= 0 && !target.getAttribute("data-click-bound") && target.on) {
        target.setAttribute("data-click-bound", "true");
        target.on("plotly_click", function (event) {
          var point = event.points && event.points[0];
          if (!point) { return; }
          var id = typeof point.customdata === "number" ? point.customdata : point.data.meta;
          if (typeof id === "number") { selectTrial(id); }
        });
      }
    });
  }

  function scatterFigure() {
    return latest.figures[objective === "eod" ? "scatter_eod" : "scatter_objective"];
  }

  function markSelected() {
    if (!table) { return; }
    table.querySelectorAll("tr[data-trial]").forEach(function (row) {
      var on = String(selected) === row.getAttribute("data-trial");
      row.classList.toggle("selected", on);
      var button = row.querySelector("[data-select-trial]");
      if (button) { button.setAttribute("aria-pressed", on ? "true" : "false"); }
    });
  }

  function drawFigures(data) {
    latest = data;
    selected = data.selected ? data.selected.id : null;
    markSelected();
    var link = element("csv-trial");
    if (link && data.selected) {
      link.href = csvUrl + "?trial=" + data.selected.id;
      link.querySelector('[data-field="selected-number"]').textContent = String(data.selected.number);
      link.hidden = false;
    }
    var note = element("workers-note");
    var workersNote = (data.notes || {}).workers || "";
    note.textContent = workersNote;
    note.hidden = !workersNote;
    return Promise.all([
      drawInto("figure-timeline", data.figures.timeline),
      drawInto("figure-recall", data.figures_trial.recall),
      drawInto("figure-scatter", scatterFigure()),
      drawInto("figure-lowest", data.figures.lowest),
      drawInto("figure-workers", data.figures_trial.workers),
    ]).then(function () {
      version += 1;
      charts.setAttribute("data-version", String(version));
      charts.setAttribute("data-selected", selected === null ? "" : String(selected));
    });
  }

  function loadFigures() {
    if (!charts || !window.PortalFigures) { return; }
    if (loading) { again = true; return; }
    loading = true;
    var url = figuresUrl + (selected === null ? "" : "?trial=" + selected);
    window.PortalFigures.fetchFigure(url)
      .then(drawFigures)
      .catch(function (error) {
        element("figure-timeline").textContent = "The charts could not load: " + error.message;
      })
      .then(function () {
        loading = false;
        if (again) { again = false; loadFigures(); }
      });
  }

  function selectTrial(id) {
    if (id === selected) { return; }
    selected = id;
    markSelected();
    loadFigures();
  }

  if (charts) {
    if (table) {
      table.addEventListener("click", function (event) {
        var target = event.target;
        if (target.closest("a, form, select, input, textarea, pre")) { return; }
        var row = target.closest("tr[data-trial]");
        if (row) { selectTrial(Number(row.getAttribute("data-trial"))); }
      });
    }
    charts.querySelectorAll("[data-objective]").forEach(function (button) {
      button.addEventListener("click", function () {
        objective = button.getAttribute("data-objective");
        charts.querySelectorAll("[data-objective]").forEach(function (other) {
          other.setAttribute("aria-pressed", other === button ? "true" : "false");
        });
        if (latest) { drawInto("figure-scatter", scatterFigure()); }
      });
    });
    loadFigures();
  }

  if (section.getAttribute("data-active") === "true") { window.setTimeout(poll, PERIOD_MS); }
})();
