// Prediction audit form: once a CSV file is chosen, read its header (and the first rows) in the
// browser and offer the file's columns for the label, prediction and score fields, a checkbox per
// column for the sensitive attributes, and the label column's values for the positive value.
// The text fields stay the source of truth, so the form works the same without this script, and
// for Parquet files (whose column names sit in a binary footer) the names are typed.
(function () {
  "use strict";
  var form = document.getElementById("audit-form");
  var file = document.getElementById("id_file");
  var attributes = document.getElementById("id_attributes");
  var label = document.getElementById("id_label");
  var positive = document.getElementById("id_positive");
  if (!form || !file || !attributes || !label || !positive) { return; }
  var SAMPLE_BYTES = 256 * 1024;
  var MAX_VALUES = 20;

  var columnList = document.createElement("datalist");
  columnList.id = "audit-columns";
  form.appendChild(columnList);
  ["id_label", "id_prediction", "id_score"].forEach(function (id) {
    var input = document.getElementById(id);
    if (input) { input.setAttribute("list", columnList.id); }
  });
  var valueList = document.createElement("datalist");
  valueList.id = "audit-label-values";
  form.appendChild(valueList);
  positive.setAttribute("list", valueList.id);

  var picker = document.createElement("div");
  picker.className = "column-picker";
  picker.id = "attribute-picker";
  picker.hidden = true;
  attributes.parentNode.appendChild(picker);
  var status = document.createElement("p");
  status.className = "help";
  status.id = "column-status";
  file.parentNode.appendChild(status);

  var rows = [];
  var header = [];

  // One CSV record per line (quoted commas and doubled quotes handled; the portal's reader does not
  // accept line breaks inside values either).
  function parseLine(line) {
    var fields = [];
    var field = "";
    var quoted = false;
    for (var i = 0; i < line.length; i++) {
      var ch = line[i];
      if (quoted) {
        if (ch === '"' && line[i + 1] === '"') { field += '"'; i++; }
        else if (ch === '"') { quoted = false; }
        else { field += ch; }
      } else if (ch === '"') { quoted = true; }
      else if (ch === ",") { fields.push(field); field = ""; }
      else { field += ch; }
    }
    fields.push(field);
    return fields;
  }

  function chosen() {
    return attributes.value.split(",").map(function (name) { return name.trim(); }).filter(Boolean);
  }

  // Columns already taken as the label or the model's output cannot also be attributes.
  var roles = ["id_label", "id_prediction", "id_score"].map(function (id) { return document.getElementById(id); })
    .filter(Boolean);

  function takenAs(name) {
    var role = roles.find(function (input) { return input.value.trim() === name; });
    return role ? role.id.replace("id_", "") : null;
  }

  function renderPicker() {
    picker.textContent = "";
    var selected = chosen();
    header.forEach(function (name) {
      var role = takenAs(name);
      var box = document.createElement("label");
      box.className = "checkbox";
      var input = document.createElement("input");
      input.type = "checkbox";
      input.value = name;
      input.dataset.column = name;
      input.checked = selected.indexOf(name) !== -1;
      if (role && !input.checked) {
        input.disabled = true;
        box.title = "This column is the " + role + " column.";
      }
      input.addEventListener("change", function () {
        var names = chosen().filter(function (n) { return n !== name; });
        if (input.checked) { names.push(name); }
        // Keep the file's column order, then anything typed that is not a column.
        var ordered = header.filter(function (n) { return names.indexOf(n) !== -1; });
        names.forEach(function (n) { if (ordered.indexOf(n) === -1) { ordered.push(n); } });
        attributes.value = ordered.join(", ");
      });
      box.appendChild(input);
      box.appendChild(document.createTextNode(" " + name));
      picker.appendChild(box);
    });
    picker.hidden = header.length === 0;
  }

  function renderLabelValues() {
    valueList.textContent = "";
    var index = header.indexOf(label.value.trim());
    if (index === -1) { return; }
    var counts = {};
    rows.forEach(function (row) {
      var value = (row[index] || "").trim();
      if (value) { counts[value] = (counts[value] || 0) + 1; }
    });
    Object.keys(counts).sort().slice(0, MAX_VALUES).forEach(function (value) {
      var option = document.createElement("option");
      option.value = value;
      option.label = value + " (" + counts[value] + " of the first " + rows.length + " rows)";
      valueList.appendChild(option);
    });
  }

  function show(names, sample) {
    header = names;
    rows = sample;
    columnList.textContent = "";
    names.forEach(function (name) {
      var option = document.createElement("option");
      option.value = name;
      columnList.appendChild(option);
    });
    renderPicker();
    renderLabelValues();
  }

  file.addEventListener("change", function () {
    var chosenFile = file.files && file.files[0];
    show([], []);
    status.textContent = "";
    if (!chosenFile) { return; }
    if (!/\.csv$/i.test(chosenFile.name)) {
      status.textContent = "Column names are offered for CSV files; type them for a Parquet file.";
      return;
    }
    chosenFile.slice(0, SAMPLE_BYTES).text().then(function (text) {
      var lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
      // The last line of the slice may be cut short; keep only complete ones.
      if (chosenFile.size > SAMPLE_BYTES) { lines.pop(); }
      lines = lines.filter(function (line) { return line.trim() !== ""; });
      if (lines.length === 0) {
        status.textContent = "The file has no header line.";
        return;
      }
      var names = parseLine(lines[0]).map(function (name) { return name.trim(); });
      show(names, lines.slice(1).map(parseLine));
      status.textContent = names.length + " columns: pick the label, the model's output and the attributes below.";
    }, function () {
      status.textContent = "The file could not be read in the browser; type the column names.";
    });
  });
  label.addEventListener("change", renderLabelValues);
  roles.forEach(function (input) { input.addEventListener("change", renderPicker); });
  attributes.addEventListener("change", renderPicker);
})();
