// The API token: asked for before any request when the server wants one.
"use strict";

function renderSession() {
  const el = document.getElementById("session");
  if (sessionStorage.getItem(TOKEN_KEY)) {
    replace(el, "Using an API token for this tab · ",
      h("button", { type: "button", onclick: () => { sessionStorage.removeItem(TOKEN_KEY); renderSession(); route(); } }, "Forget token"));
  } else {
    replace(el);
  }
}

function askToken(why) {
  stopTimer();
  page = null;
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true, size: 40 });
  replace(main,
    h("h1", {}, "API token"),
    h("p", {}, why),
    h("p", { class: "muted" }, "The token (SCHEDULER_API_TOKEN, or the read-only SCHEDULER_API_READ_TOKEN) is kept for this tab only and sent as an Authorization header; closing the tab forgets it."),
    h("form", {
      class: "actions", onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        renderSession();
        route();
      },
    }, h("label", { for: "token" }, "Token", input), h("button", { class: "primary", type: "submit", id: "use-token" }, "Use token")));
  input.focus();
}

