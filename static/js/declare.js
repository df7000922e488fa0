// Step 2 of dataset registration: offer the chosen label column's values as positive-value choices,
// and pre-select the defaults a steward would expect (features = the remaining columns).
(function () {
  "use strict";
  var data = document.getElementById("profile-data");
  var label = document.getElementById("id_label");
  var positive = document.getElementById("id_positive");
  if (!data || !label || !positive) { return; }
  var columns = JSON.parse(data.textContent).columns;
  var list = document.createElement("datalist");
  list.id = "positive-values";
  positive.setAttribute("list", list.id);
  positive.parentNode.appendChild(list);

  function refresh() {
    list.textContent = "";
    var column = columns.find(function (c) { return c.name === label.value; });
    if (!column || !column.values) { return; }
    column.values.forEach(function (pair) {
      var option = document.createElement("option");
      option.value = pair[0];
      // Counts as the page writes them (fairness/text/numbers.py): thousands separated by commas.
      option.label = pair[0] + " (" + Number(pair[1]).toLocaleString("en-US") + " rows)";
      list.appendChild(option);
    });
    if (!positive.value && column.values.length === 2) {
      var names = column.values.map(function (pair) { return pair[0]; });
      var guess = ["1", "true", "yes", "approved", "repaid", "hired"].find(function (v) {
        return names.indexOf(v) !== -1;
      });
      if (guess) { positive.value = guess; }
    }
  }
  label.addEventListener("change", refresh);
  refresh();
})();
