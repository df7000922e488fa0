// The page of an upload a worker has in hand (datasets/staged.html): polls its status, shows the
// current step and how long it has taken, and reloads when the status changes (the server then
// shows the declaration form, the error, or the registered version).
(function () {
  "use strict";
  var root = document.getElementById("staged");
  if (!root) { return; }
  var url = root.getAttribute("data-status-url");
  var status = root.getAttribute("data-status");
  var waiting = root.getAttribute("data-waiting");
  var since = Date.parse(root.getAttribute("data-progress-at")) || Date.now();
  var progress = root.querySelector('[data-field="progress"]');
  var elapsed = root.querySelector('[data-field="elapsed"]');
  var noWorker = document.getElementById("no-worker");
  var NO_WORKER_AFTER_MS = 30000;
  // Asks after 1 s, then every 1.5 s (5 s after a failed request); a test that follows the page sets
  // window.PortalPollMs (before the page loads) to ask every that many ms instead.
  var fixed = window.PortalPollMs;

  function duration(ms) {
    var seconds = Math.max(0, Math.round(ms / 1000));
    var minutes = Math.floor(seconds / 60);
    return minutes ? minutes + " min " + (seconds % 60) + " s" : seconds + " s";
  }

  function tick() {
    var ms = Date.now() - since;
    elapsed.textContent = "for " + duration(ms);
    noWorker.hidden = !(progress.textContent === waiting && ms > NO_WORKER_AFTER_MS);
  }

  function poll() {
    // X-Portal-Poll: an automatic request, which does not keep the session alive (SESSION_IDLE_MINUTES).
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json", "X-Portal-Poll": "1" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) {
        if (data.status !== status) {
          window.location.replace(window.location.href);
          return;
        }
        if (data.progress && data.progress !== progress.textContent) {
          progress.textContent = data.progress;
          since = Date.parse(data.progress_at) || Date.now();
        }
        window.setTimeout(poll, fixed || 1500);
      })
      .catch(function () { window.setTimeout(poll, fixed || 5000); });
  }

  tick();
  window.setInterval(tick, 1000);
  window.setTimeout(poll, fixed || 1000);
})();
