// The what-if page (templates/audits/whatif.html): every threshold slider and box asks the what-if
// API (GET /api/v1/audits/whatif/<id>/?threshold=..&threshold[ATTR=GROUP]=..) and the results table,
// the headline verdict, the accuracy and the forest plot are drawn again from its answer. Text from
// the file (group names) is only ever set as textContent, and escaped for plotly's labels.
(function () {
  "use strict";
  var controls = document.getElementById("whatif-controls");
  if (!controls) { return; }
  var form = document.getElementById("whatif-form");
  var apiUrl = controls.getAttribute("data-api-url");
  var tolerance = parseFloat(controls.getAttribute("data-tolerance"));
  var errorBox = document.getElementById("whatif-error");
  var globalBox = document.getElementById("threshold-global-box");
  var globalSlider = document.getElementById("threshold-global-slider");
  var latest = 0;
  var VERDICTS = ["PASS", "INCONCLUSIVE", "FAIL"];
  var SYMBOLS = { PASS: "circle", INCONCLUSIVE: "diamond", FAIL: "x" };
  var COLOURS = { PASS: "#1b7837", INCONCLUSIVE: "#b35806", FAIL: "#b2182b" };

  function rows() { return Array.prototype.slice.call(form.querySelectorAll(".threshold-row")); }

  function params() {
    var query = new URLSearchParams();
    rows().forEach(function (row) {
      var box = row.querySelector("input[type=number]");
      if (box.value.trim() !== "") { query.append(box.name, box.value.trim()); }
    });
    return query;
  }

  function gap(value) {
    if (value === null || value === undefined) { return "—"; }
    var text = Number(value).toPrecision(3);
    return value > 0 ? "+" + text : text;
  }

  function badge(verdict) {
    var span = document.createElement("span");
    span.className = "badge verdict-" + (verdict || "none");
    span.textContent = verdict || "none";
    return span;
  }

  function cell(text, className) {
    var td = document.createElement("td");
    if (className) { td.className = className; }
    td.textContent = text;
    return td;
  }

  function plain(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function judged(documentJson) {
    var found = [];
    Object.keys(documentJson.attributes).forEach(function (name) {
      documentJson.attributes[name].comparisons.forEach(function (item) {
        if (item.judged && !item.undefined) { found.push({ attribute: name, item: item }); }
      });
    });
    return found;
  }

  function drawForest(found) {
    var element = document.getElementById("whatif-forest");
    if (!element || !window.PortalFigures) { return; }
    var labels = found.map(function (entry) { return plain(entry.item.metric + " · " + entry.attribute + " = " + entry.item.group); });
    var data = VERDICTS.map(function (verdict) {
      var mine = found.map(function (entry, index) { return [entry, index]; }).filter(function (pair) { return pair[0].item.verdict === verdict; });
      return {
        type: "scatter", mode: "markers", name: verdict,
        x: mine.map(function (pair) { return pair[0].item.difference; }),
        y: mine.map(function (pair) { return labels[pair[1]]; }),
        error_x: {
          type: "data", symmetric: false,
          array: mine.map(function (pair) { return pair[0].item.ci_high - pair[0].item.difference; }),
          arrayminus: mine.map(function (pair) { return pair[0].item.difference - pair[0].item.ci_low; }),
        },
        marker: { symbol: SYMBOLS[verdict], color: COLOURS[verdict], size: 10 },
        hoverinfo: "x+y+name",
      };
    });
    var layout = {
      height: Math.max(220, 60 + 28 * found.length),
      margin: { l: 10, r: 10, t: 10, b: 40 },
      xaxis: { title: { text: "group − reference" }, zeroline: true },
      yaxis: { automargin: true, autorange: "reversed", categoryorder: "array", categoryarray: labels },
      shapes: [{ type: "rect", xref: "x", yref: "paper", x0: -tolerance, x1: tolerance, y0: 0, y1: 1,
        fillcolor: "rgba(120,120,120,0.15)", line: { width: 0 }, layer: "below" }],
      legend: { orientation: "h", y: -0.2 },
    };
    window.PortalFigures.draw(element, { data: data, layout: layout });
  }

  function render(body) {
    var documentJson = body.document;
    var headline = document.getElementById("whatif-headline");
    headline.replaceChildren(badge(documentJson.verdict));
    document.getElementById("whatif-accuracy").textContent =
      body.accuracy.overall === null ? "—" : (100 * body.accuracy.overall).toFixed(1) + "%";
    document.getElementById("whatif-predicted").textContent = documentJson.prediction.predicted_positives.toLocaleString("en");
    var found = judged(documentJson);
    var tbody = document.querySelector("#whatif-comparisons tbody");
    tbody.replaceChildren.apply(tbody, found.map(function (entry) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-attribute", entry.attribute);
      tr.setAttribute("data-group", entry.item.group);
      tr.setAttribute("data-metric", entry.item.metric);
      tr.appendChild(cell(entry.attribute));
      tr.appendChild(cell(entry.item.metric));
      tr.appendChild(cell(entry.item.group));
      tr.appendChild(cell(gap(entry.item.difference), "num"));
      tr.appendChild(cell(gap(entry.item.ci_low) + " … " + gap(entry.item.ci_high), "num"));
      var verdict = document.createElement("td");
      verdict.appendChild(badge(entry.item.verdict));
      tr.appendChild(verdict);
      return tr;
    }));
    drawForest(found);
  }

  function syncFreeze(query) {
    var holder = document.getElementById("whatif-freeze-fields");
    if (!holder) { return; }
    var inputs = [];
    query.forEach(function (value, name) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      inputs.push(input);
    });
    holder.replaceChildren.apply(holder, inputs);
  }

  function update() {
    var query = params();
    var ticket = ++latest;
    var url = apiUrl + "?" + query.toString();
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) { return { ok: response.ok, body: body }; });
      })
      .then(function (answer) {
        if (ticket !== latest) { return; }  // an older answer arriving after a newer one
        if (!answer.ok) {
          errorBox.textContent = (answer.body.field ? answer.body.field + ": " : "") + (answer.body.detail || "refused");
          return;
        }
        errorBox.textContent = "";
        render(answer.body);
        syncFreeze(query);
        var page = new URLSearchParams(query);
        var select = document.getElementById("whatif-attribute");
        if (select) { page.set("attribute", select.value); }
        window.history.replaceState(null, "", "?" + page.toString());
      })
      .catch(function () {
        if (ticket === latest) { errorBox.textContent = "The what-if did not answer; try again."; }
      });
  }

  rows().forEach(function (row) {
    var slider = row.querySelector("input[type=range]");
    var box = row.querySelector("input[type=number]");
    slider.addEventListener("input", function () { box.value = slider.value; update(); });
    box.addEventListener("input", function () {
      if (box.value.trim() !== "" && !isNaN(parseFloat(box.value))) { slider.value = box.value; }
      if (row.hasAttribute("data-global")) { followGlobal(); }
      update();
    });
  });

  // Group sliders whose box is empty stand at the global threshold.
  function followGlobal() {
    rows().forEach(function (row) {
      if (row.hasAttribute("data-global")) { return; }
      var box = row.querySelector("input[type=number]");
      if (box.value.trim() === "") { row.querySelector("input[type=range]").value = globalBox.value; }
    });
  }
  globalSlider.addEventListener("input", followGlobal);

  form.addEventListener("submit", function (event) { event.preventDefault(); update(); });
  var select = document.getElementById("whatif-attribute");
  if (select) {
    select.addEventListener("change", function () {
      window.location.search = "?attribute=" + encodeURIComponent(select.value) + "&threshold=" + encodeURIComponent(globalBox.value);
    });
  }

  var suggest = document.getElementById("whatif-suggest");
  var suggestionBox = document.getElementById("whatif-suggestion");
  suggest.addEventListener("click", function () {
    suggest.disabled = true;
    fetch(controls.getAttribute("data-suggestion-url"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (body) {
        suggest.disabled = false;
        var text = document.createElement("p");
        var cost = (100 * body.accuracy_cost).toFixed(2);
        text.textContent = (body.reached ? "These thresholds bring the TPR gap of " : "No thresholds found that bring the TPR gap of ") +
          body.attribute + " from " + gap(body.gap_before) + " to " + gap(body.gap_after) +
          " (tolerance " + body.tolerance + "); accuracy " + (100 * body.accuracy_before).toFixed(2) + "% → " +
          (100 * body.accuracy_after).toFixed(2) + "% (cost " + cost + " points).";
        var apply = document.createElement("button");
        apply.type = "button";
        apply.id = "whatif-suggestion-apply";
        apply.textContent = "Apply the suggested thresholds";
        apply.addEventListener("click", function () {
          rows().forEach(function (row) {
            var name = row.getAttribute("data-group");
            if (name !== null && Object.prototype.hasOwnProperty.call(body.thresholds.groups, name)) {
              row.querySelector("input[type=number]").value = body.thresholds.groups[name];
              row.querySelector("input[type=range]").value = body.thresholds.groups[name];
            }
          });
          update();
        });
        var notes = [];
        if (body.coarse && body.coarse.length) {
          var coarse = document.createElement("p");
          coarse.id = "whatif-suggestion-coarse";
          coarse.textContent = "Fewer than 1/" + body.tolerance + " positives, so a TPR that moves in steps wider than the tolerance: " +
            body.coarse.join(", ") + ". These groups decide which levels every group can share.";
          notes.push(coarse);
        }
        if (body.kept && body.kept.length) {
          var kept = document.createElement("p");
          kept.textContent = "No label positives (no TPR), kept at the global threshold: " + body.kept.join(", ") + ".";
          notes.push(kept);
        }
        var method = document.createElement("p");
        method.className = "help";
        method.textContent = body.method;
        suggestionBox.replaceChildren.apply(suggestionBox, [text].concat(notes, [apply, method]));
        suggestionBox.hidden = false;
      })
      .catch(function () { suggest.disabled = false; errorBox.textContent = "No suggestion could be made."; });
  });

  update();
}());
