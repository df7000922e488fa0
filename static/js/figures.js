// Draws the dashboard's figures with the plotly.js served from static/vendor/plotly/ (load it
// first). A figure is the JSON a server-side figure function made (auditportal/fairness/figures):
//   <div class="figure" data-figure-json="ID">  with  <script type="application/json" id="ID">
//   <div class="figure" data-figure-url="URL">  fetched as JSON ({"data": [...], "layout": {...}})
// Pages with live figures call window.PortalFigures.draw(element, figure) again with new data. A
// figure may carry a second layout for narrow boxes (layout.meta.narrow, below: fitWidth).
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
    var layout = fitted(element, data, figure.layout || {});
    // plotly.js forgets a figure's height when the window is resized (its responsive handler measures
    // the box again): the box keeps it, or a tall figure would shrink to the box's minimum height.
    element.style.height = layout.height ? layout.height + "px" : "";
    var width = widthOf(element, layout);
    if (width === "narrow") { applyLayout(layout, layout.meta.narrow.layout); }
    return window.Plotly.react(element, data, layout, CONFIG).then(function () {
      if (width) { element.setAttribute("data-figure-width", width); } else { element.removeAttribute("data-figure-width"); }
      return element;
    });
  }

  // A figure made for a wide box may carry the changes that make it read in a narrow one, in
  // layout.meta.narrow = {below_px, layout, wide} (auditportal/fairness/figures/screen.py): drawn
  // narrower than below_px, it is drawn with `layout` applied (Plotly.relayout's attribute strings),
  // and relaid out with `layout` or `wide` when the window's width takes it across below_px.
  // data-figure-width says which it is drawn for ("narrow" or "wide"). draw() changes the layout it is
  // given. Without meta.narrow: null.
  function widthOf(element, layout) {
    var narrow = layout.meta && layout.meta.narrow;
    if (!narrow || !element.clientWidth) { return null; }
    return element.clientWidth < narrow.below_px ? "narrow" : "wide";
  }

  function applyLayout(layout, changes) {
    Object.keys(changes).forEach(function (name) {
      var keys = name.replace(/\[(\d+)\]/g, ".$1").split(".");
      var target = layout;
      keys.slice(0, -1).forEach(function (key) {
        if (target[key] === undefined || target[key] === null) { target[key] = {}; }
        target = target[key];
      });
      target[keys[keys.length - 1]] = changes[name];
    });
  }

  function fitWidth(element) {
    var wanted = element.layout ? widthOf(element, element.layout) : null;
    var drawn = element.getAttribute("data-figure-width");
    if (!wanted || !drawn || wanted === drawn) { return Promise.resolve(element); }
    var narrow = element.layout.meta.narrow;
    return window.Plotly.relayout(element, wanted === "narrow" ? narrow.layout : narrow.wide).then(function () {
      element.setAttribute("data-figure-width", wanted);
      return element;
    });
  }

  var fitting = null;
  window.addEventListener("resize", function () {
    if (fitting !== null) { return; }
    fitting = window.requestAnimationFrame(function () {
      fitting = null;
      document.querySelectorAll("[data-figure-width]").forEach(fitWidth);
    });
  });

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

  window.PortalFigures = { draw: draw, fetchFigure: fetchFigure, drawAll: drawAll, fitWidth: fitWidth };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { drawAll(); });
  } else {
    drawAll();
  }
})();
