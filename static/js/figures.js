// Draws the dashboard's figures with the plotly.js served from static/vendor/plotly/ (load it
// first). A figure is the JSON a server-side figure function made (auditportal/fairness/figures):
//   <div class="figure" data-figure-json="ID">  with  <script type="application/json" id="ID">
//   <div class="figure" data-figure-url="URL">  fetched as JSON ({"data": [...], "layout": {...}})
// Pages with live figures call window.PortalFigures.draw(element, figure) again with new data.
(function () {
  "use strict";
  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  // Narrower than this (a phone), a legend beside the plot would leave it a sliver: it goes below.
  var NARROW = 600;
  var LEGEND_ROW = 21;  // pixels per row of a legend below the plot
  var LEGEND_CHAR = 7.5;  // pixels per character of a legend entry's name, its mark 40 more

  // The figure's layout for the element's width: a legend the server put beside the plot (a long
  // list of trials) moves below it on a narrow screen, in two columns where every name fits half
  // the width, and the figure grows by its rows so that the plot keeps its height.
  function fitted(element, data, layout) {
    var legend = layout.legend || {};
    var width = element.clientWidth;
    if (legend.orientation !== "v" || legend.x < 1 || width >= NARROW) { return layout; }
    var names = data.filter(function (trace) { return trace.showlegend !== false; })
      .concat((layout.shapes || []).filter(function (shape) { return shape.showlegend; }))
      .map(function (entry) { return String(entry.name || ""); });
    var longest = names.reduce(function (most, name) { return Math.max(most, name.length); }, 0);
    var columns = longest * LEGEND_CHAR + 40 <= width / 2 ? 2 : 1;
    var copy = Object.assign({}, layout);
    copy.legend = Object.assign({}, legend, {
      orientation: "h", x: 0, xanchor: "left", y: -0.3, yanchor: "top",
      entrywidth: 1 / columns, entrywidthmode: "fraction",
    });
    copy.height = (layout.height || 450) + (Math.ceil(names.length / columns) + 1) * LEGEND_ROW;
    return copy;
  }

  function draw(element, figure) {
    if (!window.Plotly) {
      element.textContent = "The charts could not load (plotly.js is missing).";
      return Promise.resolve(element);
    }
    element.classList.add("figure-drawn");
    var data = figure.data || [];
    return window.Plotly.react(element, data, fitted(element, data, figure.layout || {}), CONFIG);
  }

  function fetchFigure(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status + " for " + url); }
        return response.json();
      });
  }

  function drawAll(root) {
    (root || document).querySelectorAll("[data-figure-json]").forEach(function (element) {
      var source = document.getElementById(element.getAttribute("data-figure-json"));
      if (source) { draw(element, JSON.parse(source.textContent)); }
    });
    (root || document).querySelectorAll("[data-figure-url]").forEach(function (element) {
      fetchFigure(element.getAttribute("data-figure-url"))
        .then(function (figure) { return draw(element, figure); })
        .catch(function (error) { element.textContent = "The chart could not load: " + error.message; });
    });
  }

  window.PortalFigures = { draw: draw, fetchFigure: fetchFigure, drawAll: drawAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { drawAll(); });
  } else {
    drawAll();
  }
})();
