// Draws the dashboard's figures with the plotly.js served from static/vendor/plotly/ (load it
// first). A figure is the JSON a server-side figure function made (auditportal/fairness/figures):
//   <div class="figure" data-figure-json="ID">  with  <script type="application/json" id="ID">
//   <div class="figure" data-figure-url="URL">  fetched as JSON ({"data": [...], "layout": {...}})
// Pages with live figures call window.PortalFigures.draw(element, figure) again with new data. A
// figure may carry a second layout for narrow boxes (layout.meta.narrow, below: fitWidth).
(function () {
  "use strict";
  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function draw(element, figure) {
    if (!window.Plotly) {
      element.textContent = "The charts could not load (plotly.js is missing).";
      return Promise.resolve(element);
    }
    element.classList.add("figure-drawn");
    var layout = figure.layout || {};
    // plotly.js forgets a figure's height when the window is resized (its responsive handler measures
    // the box again): the box keeps it, or a tall figure would shrink to the box's minimum height.
    element.style.height = layout.height ? layout.height + "px" : "";
    var fitted = widthOf(element, layout);
    if (fitted === "narrow") { applyLayout(layout, layout.meta.narrow.layout); }
    return window.Plotly.react(element, figure.data || [], layout, CONFIG).then(function () {
      if (fitted) { element.setAttribute("data-figure-width", fitted); } else { element.removeAttribute("data-figure-width"); }
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
