// The API page (templates/api/docs.html): Swagger UI over the schema named by #swagger-ui's
// data-schema-url. A static file rather than an inline script, so that the page works under a
// Content-Security-Policy without 'unsafe-inline'. "Try it out" sends the session cookie, and the
// page's CSRF token on unsafe methods, as the portal's own forms do.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof SwaggerUIBundle === "undefined") { return; }
  var csrfToken = root.getAttribute("data-csrf-token");
  var SAFE = { GET: true, HEAD: true, OPTIONS: true, TRACE: true };
  window.portalApiDocs = SwaggerUIBundle({
    url: root.getAttribute("data-schema-url"),
    domNode: root,
    deepLinking: true,
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis],
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    displayOperationId: true,
    persistAuthorization: false,
    withCredentials: true,
    requestInterceptor: function (request) {
      if (!SAFE[(request.method || "GET").toUpperCase()] && csrfToken) {
        request.headers["X-CSRFToken"] = csrfToken;
      }
      return request;
    }
  });
})();
