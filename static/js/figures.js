// Draws the dashboard's figures with the plotly.js served from static/vendor/plotly/ (load it
// first). A figure is the JSON a server-side figure function made (auditportal/fairness/figures):
//   <div class="figure" data-figure-json="ID">  with  <script type="application/json" id="ID">
//   <div class="figure" data-figure-url="URL">  fetched as JSON ({"data": [...], "layout": {...}})
// Pages with live figures call window.PortalFigures.draw(element, figure) again with new data.
(function () {
  "use strict";
  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function draw(element, figure) {
    if (!window.Plotly) {
      element.textContent = "The charts could not load (plotly.js is missing).";
      return Promise.resolve(element);
    }
    element.classList.add("figure-drawn");
    return window.Plotly.react(element, figure.data || [], figure.layout || {}, CONFIG);
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
