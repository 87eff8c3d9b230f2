// The dashboard's only script: the token (kept in sessionStorage, sent as a
// bearer header on every htmx request: no cookie, so no CSRF) and the
// messages of failed requests. Everything else is htmx attributes.
(function () {
  "use strict";
  var KEY = "chronoq-token";

  function byId(id) {
    return document.getElementById(id);
  }

  function tokenState() {
    var state = byId("token-state");
    if (state) {
      state.textContent = sessionStorage.getItem(KEY) ? "token set for this tab" : "no token";
    }
  }

  function refresh() {
    htmx.trigger(document.body, "chronoq-changed");
  }

  function message(xhr) {
    var text = "HTTP " + xhr.status;
    try {
      text = JSON.parse(xhr.responseText).error.message;
    } catch (ignored) {
      // not our JSON error: keep the status
    }
    if (xhr.status === 401) {
      text += " (paste a token above)";
    }
    return text;
  }

  // a failed read goes to the banner until a read succeeds; a failed
  // action goes to the flash line, where its success would have gone
  function show(elt, text, kind) {
    var box = kind === "read" ? byId("problem") : byId("flash");
    if (kind === "read") {
      box.hidden = false;
      box.textContent = text;
    } else {
      box.replaceChildren();
      var span = document.createElement("span");
      span.className = "error";
      span.textContent = text;
      box.appendChild(span);
    }
  }

  function kindOf(detail) {
    return detail.requestConfig && detail.requestConfig.verb === "post" ? "action" : "read";
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var token = sessionStorage.getItem(KEY);
    if (token) {
      event.detail.headers["Authorization"] = "Bearer " + token;
    }
  });

  document.addEventListener("htmx:responseError", function (event) {
    show(event.detail.elt, message(event.detail.xhr), kindOf(event.detail));
  });

  document.addEventListener("htmx:sendError", function (event) {
    show(event.detail.elt, "the server cannot be reached", kindOf(event.detail));
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful && kindOf(event.detail) === "read") {
      byId("problem").hidden = true;
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var form = byId("token-form");
    if (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var input = byId("token");
        var value = input.value.trim();
        if (value) {
          sessionStorage.setItem(KEY, value);
        }
        input.value = "";
        tokenState();
        refresh();
      });
      byId("forget-token").addEventListener("click", function () {
        sessionStorage.removeItem(KEY);
        tokenState();
        refresh();
      });
    }
    tokenState();
  });
})();
