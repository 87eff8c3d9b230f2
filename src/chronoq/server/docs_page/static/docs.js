// The API reference: Swagger UI over this server's /openapi.json. A file,
// not an inline script, because the page's CSP allows scripts of this origin only.
"use strict";

(function () {
  const mount = document.getElementById("swagger-ui");
  // the directory of this page: the server's root, or a proxy's prefix of it
  const root = new URL(".", window.location.href);

  function show(problem) {
    const message = document.createElement("p");
    message.className = "problem";
    message.setAttribute("role", "alert");
    message.textContent = problem;
    mount.replaceChildren(message);
  }

  function start(spec) {
    // the document names no server, and Swagger UI would send its calls to
    // the host's root: send them where this page is, under a proxy's prefix too
    if (!Array.isArray(spec.servers) || spec.servers.length === 0) {
      spec.servers = [{ url: root.href.replace(/\/$/, ""), description: "this server" }];
    }
    window.ui = SwaggerUIBundle({
      spec: spec,
      domNode: mount,
      deepLinking: true,
      filter: true,
      displayRequestDuration: true,
      validatorUrl: null, // no badge fetched from another site
      persistAuthorization: false, // a token pasted into Authorize stays in this tab's memory
      queryConfigEnabled: false, // no ?url= that would load another document
    });
  }

  fetch(new URL("openapi.json", root), { headers: { accept: "application/json" } })
    .then(function (answer) {
      if (!answer.ok) {
        throw new Error("GET openapi.json answered " + answer.status);
      }
      return answer.json();
    })
    .then(start)
    .catch(function (error) {
      show("The API document could not be loaded (" + error.message + "): " +
        "check that chronoq serve is running, and reload the page.");
    });
})();
