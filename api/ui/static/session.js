// Who is signed in, what its token may do, and which namespace the console shows.
//
// The console asks GET /v1/whoami once per token, and GET /v1/namespaces (the namespaces the
// token may read) at each change of page. From the token's grants it marks unavailable every
// control of an action the token may not take, before anything is sent: a viewer's Run now,
// Pause, Edit and Delete, a non-admin's Step down and actions on built-in jobs. Each such
// control says why in its tooltip and in a visible line beside it, which is also its
// accessible description. The server still decides (every route checks the caller); the
// console only stops offering what the server would refuse.
//
// The namespace is part of the address, so a link shares it: #/ns/billing/jobs/report is the
// job report of namespace billing, and an address without /ns/ is namespace default's, where
// the built-in jobs live (so links made before namespaces keep working). A token that may not
// read default starts on the first namespace it may read.
"use strict";

const DEFAULT_NS = "default";
const ROLE_RANK = { viewer: 1, editor: 2, admin: 3 };

// who is the /v1/whoami answer and namespaces the names the token may read; both null until
// asked, and again once the token changes. They are kept in sessionStorage beside the token,
// so a reload draws the header and marks the controls at once, without waiting for the
// answers (which then come back as 304s): the page does not jump when they land.
const SESSION_KEY = "scheduler.session";
const session = { who: null, namespaces: null };
// The namespace the page shows, and the kind of page ("overview", "job", "audit"...), which a
// switch of namespace keeps when the other namespace has the same page.
let currentNs = DEFAULT_NS;
let currentView = "overview";

async function loadSession() {
  const [who, list] = await Promise.all([api("GET", "/v1/whoami"), api("GET", "/v1/namespaces")]);
  session.who = who.data;
  session.namespaces = list.data.namespaces.map((n) => n.name);
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  renderSession();
}

async function loadNamespaces() {
  const { data } = await api("GET", "/v1/namespaces");
  session.namespaces = data.namespaces.map((n) => n.name);
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  renderPicker();
}

function restoreSession() {
  try {
    const kept = JSON.parse(sessionStorage.getItem(SESSION_KEY) || "null");
    if (kept && kept.who && Array.isArray(kept.namespaces)) Object.assign(session, kept);
  } catch (e) {
    sessionStorage.removeItem(SESSION_KEY);
  }
}

function forgetSession() {
  session.who = null;
  session.namespaces = null;
  sessionStorage.removeItem(SESSION_KEY);
}

// revalidateSession asks again who the token is and which namespaces it reads. Grants that
// changed (a token's role, a service account's claims) build the page again with the new
// marks; a new namespace only joins the picker, so nothing typed is lost.
async function revalidateSession() {
  const before = JSON.stringify(session.who);
  try {
    await loadSession();
  } catch (e) {
    return; // a 401 asks for the token; anything else, the page's own refresh says
  }
  renderNav();
  if (JSON.stringify(session.who) !== before) route();
}

// reloadPowers asks again after a refusal showed that the page's idea of the token's grants
// was out of date.
function reloadPowers() {
  if (session.who) revalidateSession();
}

// ---- powers -------------------------------------------------------------------------------

// grantIn is the strongest of the token's grants that covers namespace ns, or null.
function grantIn(ns) {
  let best = null;
  for (const g of (session.who && session.who.grants) || []) {
    if ((g.namespace === "*" || g.namespace === ns) && ROLE_RANK[g.role] && (!best || ROLE_RANK[g.role] > ROLE_RANK[best.role])) best = g;
  }
  return best;
}

function mayRead(ns) { return grantIn(ns) !== null; }
function mayEdit(ns) { const g = grantIn(ns); return g !== null && ROLE_RANK[g.role] >= ROLE_RANK.editor; }
function isAdmin() { return !!(session.who && session.who.admin); }

// roleText says a grant in words: "viewer of billing", "viewer of every namespace", "admin".
function roleText(g) {
  if (g.role === "admin" && g.namespace === "*") return "admin";
  return `${g.role} of ${g.namespace === "*" ? "every namespace" : g.namespace}`;
}

function rolesText() {
  const grants = (session.who && session.who.grants) || [];
  return grants.length ? grants.map(roleText).join(", ") : "no role";
}

// tokenIs completes "Your token is …": "a viewer of billing", "an editor of billing and a viewer of ops".
function tokenIs() {
  const grants = (session.who && session.who.grants) || [];
  if (!grants.length) return "without any role";
  return grants.map((g) => `${/^[aeiou]/.test(g.role) ? "an" : "a"} ${roleText(g)}`).join(" and ");
}

// The reasons a control is unavailable, as its tooltip and its note say them; null when the
// token may act.
function whyNotEdit(ns) {
  if (mayEdit(ns)) return null;
  return `Your token is ${tokenIs()}: it may look at ${ns}, not change it (an editor of ${ns} may).`;
}

function whyNotAdmin(what) {
  return isAdmin() ? null : `Only an admin may ${what}; your token is ${tokenIs()}.`;
}

// whyNotAct is why the token may not trigger, pause or resume job (null: it may). A built-in
// job is an admin's alone, whoever edits namespace default.
function whyNotAct(ns, job) {
  return whyNotEdit(ns) || (job && job.kind === "builtin" ? whyNotAdmin("run, pause or resume a built-in job") : null);
}

// ---- unavailable controls -----------------------------------------------------------------

// whyNote is the visible line that says why the controls beside it are unavailable; each of
// them names it as its description (aria-describedby), so a screen reader reads the reason
// with the control, and a phone, which shows no tooltip, shows it too.
function whyNote(id) {
  return h("p", { class: "why-not", id, hidden: true });
}

function showWhy(note, why) {
  note.hidden = !why;
  if (note.textContent !== (why || "")) note.textContent = why || "";
}

// gate makes button usable when ready (the job's state allows the action) and the token may
// (why is null); otherwise it is marked unavailable, and why, if any, explains it.
function gate(button, ready, why, note) {
  usable(button, ready && !why);
  explain(button, why, note);
}

function explain(el, why, note) {
  if (why) {
    el.setAttribute("title", why);
    el.setAttribute("aria-describedby", note.id);
  } else {
    el.removeAttribute("title");
    el.removeAttribute("aria-describedby");
  }
}

// gateLink is gate for a link drawn as a button (New job, Edit): unavailable, it loses its
// href, so it leads nowhere, and keeps a tab stop so the keyboard still finds its reason.
function gateLink(a, href, why, note) {
  if (why) {
    a.removeAttribute("href");
    a.setAttribute("role", "link");
    a.setAttribute("tabindex", "0");
    a.setAttribute("aria-disabled", "true");
  } else {
    a.setAttribute("href", href);
    for (const name of ["role", "tabindex", "aria-disabled"]) a.removeAttribute(name);
  }
  explain(a, why, note);
}

// ---- addresses ----------------------------------------------------------------------------

// hashFor is the console's address of rest ("", "audit", "jobs/NAME") in namespace ns.
function hashFor(ns, rest) {
  const prefix = !ns || ns === DEFAULT_NS ? "#/" : `#/ns/${encodeURIComponent(ns)}/`;
  return prefix + (rest || "");
}

function jobHash(ns, name, more) { return hashFor(ns, `jobs/${encodeURIComponent(name)}${more || ""}`); }

// jobsPath is the API's collection of namespace ns's jobs: /v1/jobs is default's.
function jobsPath(ns) {
  return !ns || ns === DEFAULT_NS ? "/v1/jobs" : `/v1/namespaces/${encodeURIComponent(ns)}/jobs`;
}

function jobPath(ns, name) { return `${jobsPath(ns)}/${encodeURIComponent(name)}`; }

// adoptNamespace makes ns the page's namespace without loading the page again: a run reached
// by an address without the namespace (#/runs/ID) belongs to the namespace its job does.
function adoptNamespace(ns, rest) {
  if (ns === currentNs) return;
  currentNs = ns;
  history.replaceState(null, "", hashFor(ns, rest));
  renderNav();
}

// ---- the header ---------------------------------------------------------------------------

const picker = document.getElementById("ns-picker");

// The pages a namespace switch keeps; any other (a job, a run) becomes the new namespace's
// overview, since the job or run is the old namespace's.
const KEPT_ON_SWITCH = { "new-job": "new-job", audit: "audit", locks: "locks", partitions: "partitions" };

// Choosing a namespace opens it. A mouse or a touch chooses once; the arrow keys on a closed
// list (Chromium on Linux and Windows) change it at each press, and opening a namespace per
// press would drag the page through every namespace on the way (WCAG 3.2.2): so a choice made
// with the keys opens on Enter, and is undone when the focus leaves without one.
let pickedByKey = false;

function openPicked() {
  pickedByKey = false;
  if (picker.value && picker.value !== currentNs) location.hash = hashFor(picker.value, KEPT_ON_SWITCH[currentView] || "");
}

picker.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter") {
    ev.preventDefault();
    openPicked();
  } else if (ev.key.startsWith("Arrow") || ev.key === "Home" || ev.key === "End" || ev.key.length === 1) {
    pickedByKey = true;
  }
});
picker.addEventListener("change", () => { if (!pickedByKey) openPicked(); });
picker.addEventListener("blur", () => {
  if (!pickedByKey) return;
  pickedByKey = false;
  renderPicker();
});

function renderPicker() {
  const names = session.namespaces || [];
  // Without a token yet (the token form) there is nothing to pick, and no page to keep
  // still: no place is kept for it.
  const box = document.getElementById("ns-pick");
  box.hidden = !session.who && AUTH === "bearer" && !sessionStorage.getItem(TOKEN_KEY);
  box.classList.toggle("pending", !session.who);
  update(picker,
    names.includes(currentNs) ? null : h("option", { value: "", disabled: true }, "choose one"),
    names.map((n) => h("option", { value: n }, n)));
  // A choice being made with the keys stays until Enter or the focus leaves.
  if (!(pickedByKey && document.activeElement === picker)) picker.value = names.includes(currentNs) ? currentNs : "";
}

// renderNav points the header's links at the namespace shown; Locks, the cluster's, is
// offered to a token that reads namespace default (where GET /v1/locks is read).
function renderNav() {
  const href = { overview: hashFor(currentNs, ""), locks: hashFor(currentNs, "locks"), partitions: hashFor(currentNs, "partitions"), audit: hashFor(currentNs, "audit"), all: "#/all" };
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.setAttribute("href", href[a.dataset.nav]);
    if (a.dataset.nav === currentView) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  document.querySelector(".brand").setAttribute("href", href.overview);
  document.querySelector('[data-nav="locks"]').closest("li").hidden = !!session.who && !mayRead(DEFAULT_NS);
  document.querySelector('[data-nav="all"]').closest("li").hidden = !isAdmin(); // every namespace: an admin's
  renderPicker();
}

// renderSession shows, discreetly, who is signed in: the token's name and its roles. It
// morphs the header in place, so Forget token keeps the focus when the grants are asked again.
function renderSession() {
  const el = document.getElementById("session");
  const token = sessionStorage.getItem(TOKEN_KEY);
  const who = session.who;
  const forget = () => { sessionStorage.removeItem(TOKEN_KEY); forgetSession(); renderSession(); route(); };
  let name = null;
  if (who) name = who.token_name || (who.kind === "none" ? "no token needed" : who.kind);
  update(el,
    who ? h("span", { id: "who" }, h("span", { class: "sr-only" }, "Signed in as "), name, " · ", rolesText()) : null,
    !who && token ? "Using an API token for this tab" : null,
    token ? [" ", h("button", { type: "button", onclick: forget }, "Forget token")] : null);
}

function askToken(why) {
  stopTimer();
  page = null;
  forgetSession();
  renderSession();
  renderPicker();
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true, size: 40 });
  replace(main,
    h("h1", {}, "API token"),
    h("p", {}, why),
    h("p", { class: "muted" }, "The token (SCHEDULER_API_TOKEN, the read-only SCHEDULER_API_READ_TOKEN, or one an admin made for you) is kept for this tab only and sent as an Authorization header; closing the tab forgets it."),
    h("form", {
      class: "actions", onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        forgetSession();
        renderSession();
        route();
      },
    }, h("label", { for: "token" }, "Token", input), h("button", { class: "primary", type: "submit", id: "use-token" }, "Use token")));
  input.focus();
}

// namespacePage stands for the pages of a namespace the token may not read, or that does not
// exist: it says which, and links the namespaces it may read.
function namespacePage(ns) {
  const mine = (session.namespaces || []).filter((n) => n !== ns);
  replace(main,
    h("h1", { tabindex: "-1" }, `Namespace ${ns}`),
    h("p", { class: "problem", role: "note" }, mayRead(ns)
      ? `There is no namespace named ${ns}; an admin creates it.`
      : `Your token is ${tokenIs()}: it may not read ${ns}.`),
    mine.length ? h("p", {}, "Namespaces you may read: ",
      mine.map((n, i) => [i ? ", " : "", h("a", { href: hashFor(n, "") }, n)]), ".") : null);
  return { refresh: async () => {}, live: () => false };
}
