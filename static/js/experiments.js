// Live progress of an experiment page: polls progress.json every 2 s while anything runs and
// updates the trial table in place. The page is complete without it (server-rendered first).
(function () {
  "use strict";
  var section = document.getElementById("experiment");
  if (!section) { return; }
  var url = section.getAttribute("data-progress-url");
  var policyUrl = section.getAttribute("data-policy-url");
  var table = document.querySelector("#trials tbody");
  var PERIOD_MS = 2000;

  function fmt(value) {
    return value === null || value === undefined ? "\u2014" : Number(value).toFixed(4);
  }

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
    row.appendChild(cell("td", String(trial.number)));
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
    ["eod", "fair_objective", "accuracy"].forEach(function (name) {
      var td = cell("td", "", "num");
      td.setAttribute("data-field", name);
      row.appendChild(td);
    });
    var verdicts = cell("td");
    verdicts.setAttribute("data-field", "verdicts");
    row.appendChild(verdicts);
    var hparams = cell("td");
    var small = cell("small");
    Object.keys(trial.hparams || {}).sort().forEach(function (name) {
      small.appendChild(cell("code", name + "=" + trial.hparams[name]));
      small.appendChild(document.createTextNode(" "));
    });
    hparams.appendChild(small);
    row.appendChild(hparams);
    var documents = cell("td", "—", "muted");  // frozen documents appear when the page is reloaded
    documents.setAttribute("data-field", "documents");
    row.appendChild(documents);
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
    table.appendChild(errorRow);
    return row;
  }

  function fixed3(value) { return Number(value).toFixed(3); }

  // Same markup as templates/experiments/_verdict.html.
  function renderVerdicts(target, verdicts) {
    if (!target) { return; }
    target.textContent = "";
    if (!verdicts.length) { target.appendChild(cell("span", "\u2014", "muted")); return; }
    verdicts.forEach(function (v) {
      var box = cell("div", undefined, "verdict");
      box.setAttribute("data-attribute", v.attribute);
      box.appendChild(cell("code", v.attribute));
      box.appendChild(document.createTextNode(" "));
      box.appendChild(cell("span", v.verdict || "n/a", "badge verdict-" + (v.verdict || "none")));
      if (v.difference !== null && v.difference !== undefined) {
        var text = " " + v.group + " \u2212 " + v.reference + ": " + fixed3(v.difference) +
          " [" + fixed3(v.ci_low) + ", " + fixed3(v.ci_high) + "]";
        if (v.verdict === "INCONCLUSIVE" && v.positives_needed) {
          text += "; ~" + v.positives_needed + " positives per group to decide";
        }
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
    row.querySelector('[data-field="bar"]').style.width = trial.progress_percent + "%";
    row.querySelector('[data-field="steps"]').textContent = trial.steps + " / " + trial.steps_planned;
    ["eod", "fair_objective", "accuracy"].forEach(function (name) {
      row.querySelector('[data-field="' + name + '"]').textContent = fmt(trial.metrics[name]);
    });
    renderVerdicts(row.querySelector('[data-field="verdicts"]'), trial.verdicts || []);
    var errorRow = table.querySelector('tr[data-trial-error="' + trial.id + '"]');
    errorRow.hidden = !trial.error;
    errorRow.querySelector('[data-field="error"]').textContent = capfirst(trial.error);
    var log = errorRow.querySelector('[data-field="log_tail"]');
    log.textContent = trial.log_tail;
    log.hidden = !trial.log_tail;
  }

  function render(data) {
    var status = document.getElementById("experiment-status");
    status.textContent = data.status_label;
    status.className = "state " + data.status;
    var error = document.getElementById("experiment-error");
    error.textContent = capfirst(data.error);
    error.hidden = !data.error;
    data.trials.forEach(update);
    var cancel = document.getElementById("cancel-form");
    if (cancel && !data.active) { cancel.hidden = true; }
    return data.active || data.trials.some(function (t) { return t.state === "RUNNING" || t.state === "STARTING"; });
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) {
        if (render(data)) { window.setTimeout(poll, PERIOD_MS); }
      })
      .catch(function () { window.setTimeout(poll, PERIOD_MS * 3); });
  }

  if (section.getAttribute("data-active") === "true") { window.setTimeout(poll, PERIOD_MS); }
})();
