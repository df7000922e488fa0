// The request page after a decision (templates/approvals/request.html): while the signed report is
// being generated, polls the request's status (approvals:status, JSON) and puts each report's link
// in place as soon as it exists. Titles are set as text, never as HTML.
(function () {
  "use strict";
  var root = document.getElementById("report-pending");
  if (!root) { return; }
  var url = root.getAttribute("data-status-url");
  var pending = root.querySelector('[data-field="pending"]');
  var list = root.querySelector('[data-field="links"]');
  // After 2 s, then 1.5 times longer each time, up to 30 s; a test that follows the page sets
  // window.PortalPollMs (before the page loads) to ask every that many ms instead.
  var fixed = window.PortalPollMs;
  var delay = fixed || 2000;
  var MAX_DELAY = fixed || 30000;

  function show(reports) {
    list.textContent = "";
    reports.forEach(function (report) {
      var item = document.createElement("li");
      item.setAttribute("data-report", String(report.id));
      var link = document.createElement("a");
      link.href = report.url;
      link.textContent = report.title;
      item.appendChild(link);
      if (report.outcome) { item.appendChild(document.createTextNode(" — " + report.outcome)); }
      list.appendChild(item);
    });
    list.hidden = false;
    pending.textContent = "The signed report is ready; members whose vote decided the request sign it on its page.";
  }

  function poll() {
    // X-Portal-Poll: an automatic request, which does not keep the session alive (SESSION_IDLE_MINUTES).
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json", "X-Portal-Poll": "1" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) {
        if (data.reports && data.reports.length) { show(data.reports); return; }
        delay = fixed || Math.min(MAX_DELAY, Math.round(delay * 1.5));
        window.setTimeout(poll, delay);
      })
      .catch(function () { window.setTimeout(poll, MAX_DELAY); });
  }

  window.setTimeout(poll, delay);
})();
