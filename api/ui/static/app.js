// Routes and the refresh loop.
//
// Pages are hash routes, so every link is a real link and the server serves one page:
// #/ (the overview), #/jobs/NAME, #/jobs/NAME/edit, #/new-job, #/runs/ID, #/partitions, #/locks and
// #/audit (its filters after a "?"), each of namespace default, or of namespace NS under
// #/ns/NS/ (session.js). (A job may be named "new", so the new job's form is not under
// #/jobs/.)
"use strict";

function stopTimer() { if (timer) { clearTimeout(timer); timer = null; } }

function isLive(p) { return !p.live || p.live(); }

let inFlight = false;
// again asks for one more refresh once the one in flight ends: a move to another page of a
// list, or a new page, must not wait for the next tick to show.
let again = false;
// lastRefreshMs is how long the last refresh took. The next one waits ten times that, at
// least REFRESH_MS: a job list of ten thousand jobs (half a second to build on the server)
// is then asked for every five seconds, not every second. At most MAX_REFRESH_WAIT_MS, so
// one refresh slowed by a busy moment does not leave the page still for a minute.
let lastRefreshMs = 0;
const MAX_REFRESH_WAIT_MS = 10000;
function nextRefreshWait() { return Math.min(MAX_REFRESH_WAIT_MS, Math.max(REFRESH_MS, 10 * lastRefreshMs)); }
async function refreshNow() {
  if (!page) return;
  if (inFlight) {
    again = true;
    return;
  }
  const current = page;
  const focused = document.activeElement;
  inFlight = true;
  const started = performance.now();
  try {
    await current.refresh();
    lastRefreshMs = performance.now() - started;
    tickTimes();
    // A control that went away with the data it acted on (Cancel, once the run ended)
    // hands the focus to the page's heading, not to the body, where a screen reader
    // would lose its place.
    if (focused && focused !== document.body && !focused.isConnected && current === page) {
      const h1 = main.querySelector("h1");
      if (h1) h1.focus();
    }
    main.dataset.refreshes = String(Number(main.dataset.refreshes || 0) + 1);
    markCurrent();
  } catch (e) {
    if (e.status !== 401 && current === page) markStale(e);
  } finally {
    inFlight = false;
    if (again) {
      again = false;
      refreshNow();
    }
  }
}

// ---- when the replica stops answering -----------------------------------------------------
//
// A page whose refresh fails keeps what it showed, marked as not current: a banner says since
// when, and offers the cluster's other replicas (as GET /v1/instances last listed them), each
// with the address its console answers on when its listening address names one.

const staleEl = document.getElementById("stale");
let answeredAt = null; // when this page's replica last answered a refresh

function markCurrent() {
  answeredAt = new Date();
  if (staleEl.hidden) return;
  staleEl.hidden = true;
  replace(staleEl);
  main.classList.remove("not-current");
  document.title = document.title.replace(/^\(not current\) /, "");
}

function markStale(e) {
  main.classList.add("not-current");
  if (!document.title.startsWith("(not current) ")) document.title = `(not current) ${document.title}`;
  const others = replicas.filter((i) => !i.is_self);
  const since = answeredAt ? `What this page shows is from ${absTime(answeredAt.toISOString())}` : "This page has nothing from it yet";
  update(staleEl,
    h("p", {}, h("strong", {}, "Not current. "), `${since}; this page's replica has not answered since then. ${e.message} The page keeps asking.`),
    others.length
      ? [h("p", {}, "The cluster's other replicas serve the same console:"), h("ul", { id: "other-replicas" }, others.map(replicaItem))]
      : h("p", {}, "No other replica is known to this page: open /ui/ on another replica's address."));
  staleEl.hidden = false;
}

function replicaItem(i) {
  const url = replicaURL(i);
  return h("li", { "data-key": i.instance_id },
    url ? h("a", { href: url }, i.instance_id) : h("span", { class: "mono" }, i.instance_id), i.is_leader ? " (leader)" : "",
    url ? ` at ${url}` : ` on host ${i.host}: ${i.http_addr ? `it listens on ${i.http_addr}` : "its address is not known"}; open /ui/ on that host's address`);
}

// replicaURL is replica i's console at the same page, when its listening address names a
// host (one listening on every address is reached by its host name), else "".
function replicaURL(i) {
  const m = /^(.*):(\d+)$/.exec(i.http_addr || "");
  if (!m) return "";
  let host = m[1];
  if (["", "0.0.0.0", "[::]", "::"].includes(host)) host = i.host;
  return host ? `${location.protocol}//${host}:${m[2]}/ui/${location.hash}` : "";
}

// schedule ticks: a live page refreshes (while the tab is visible) every second, or every
// ten times its last refresh when that is slower (nextRefreshWait); a page that cannot change only moves its
// relative times on, every second.
function schedule() {
  stopTimer();
  const wait = page && isLive(page) ? nextRefreshWait() : REFRESH_MS;
  timer = setTimeout(async () => {
    if (page && isLive(page)) { if (!document.hidden && !inFlight) await refreshNow(); } else tickTimes();
    if (page) schedule();
  }, wait);
}

// routeSeq numbers the route changes: one that finds a newer one begun while it waited for
// the token's grants gives way to it.
let routeSeq = 0;

async function route() {
  const seq = ++routeSeq;
  stopTimer();
  lastRefreshMs = 0;
  clearSay();
  const arrived = nextFlash;
  nextFlash = null;
  if (AUTH === "bearer" && !sessionStorage.getItem(TOKEN_KEY)) {
    // Ask first: a request without the token would only be refused.
    askToken("This server needs an API token.");
    return;
  }
  // The token's grants come first: every page marks what the token may not do as it builds.
  const fresh = !session.who;
  if (fresh) {
    page = null;
    replace(main, h("p", {}, "Loading…"));
    try {
      await loadSession();
    } catch (e) {
      if (seq === routeSeq && e.status !== 401) sessionFailed(e);
      return;
    }
  }
  // A page's own parameters follow a "?" (#/audit?job=NAME): the audit page's filters.
  const [hash, hashQuery] = (location.hash.replace(/^#/, "") || "/").split("?");
  // A part that is not valid percent-encoding is taken as written: the page then says that
  // no such job or run exists, rather than the route failing.
  const decode = (p) => { try { return decodeURIComponent(p); } catch (e) { return p; } };
  let parts = hash.split("/").filter(Boolean).map(decode);
  let ns = null;
  if (parts[0] === "ns" && parts[1]) {
    ns = parts[1];
    parts = parts.slice(2);
  }
  if (!session.namespaces.includes(ns || DEFAULT_NS)) {
    // Made since the page asked, perhaps.
    try { await loadNamespaces(); } catch (e) { /* the page says what fails */ }
  } else if (!fresh) {
    revalidateSession(); // kept from before: asked again, and the page follows a change
  }
  if (seq !== routeSeq) return;
  const rest = parts.map(encodeURIComponent).join("/");
  if (ns === null && !mayRead(DEFAULT_NS)) {
    // An address without a namespace is default's, which this token may not read: its own
    // namespace instead (the hash change routes again).
    const home = session.namespaces.find(mayRead);
    if (home) {
      location.replace(hashFor(home, rest));
      return;
    }
  }
  ns = ns || DEFAULT_NS;
  currentNs = ns;
  let view = "overview";
  let title = "scheduler";
  if (!mayRead(ns) || !session.namespaces.includes(ns)) { view = "namespace"; page = namespacePage(ns); }
  else if (parts[0] === "new-job") { view = "new-job"; page = jobFormPage(ns, null); title = "New job · scheduler"; }
  else if (parts[0] === "jobs" && parts[1] && parts[2] === "edit") { view = "edit"; page = jobFormPage(ns, parts[1]); title = `Edit ${parts[1]} · scheduler`; }
  else if (parts[0] === "jobs" && parts[1]) { view = "job"; page = jobPage(ns, parts[1]); title = `${parts[1]} · scheduler`; }
  else if (parts[0] === "runs" && parts[1]) { view = "run"; page = runPage(ns, parts[1]); title = `run ${parts[1]} · scheduler`; }
  else if (parts[0] === "all") { view = "all"; page = allPage(); title = "All namespaces · scheduler"; }
  else if (parts[0] === "locks") { view = "locks"; page = locksPage(); title = "Locks · scheduler"; }
  else if (parts[0] === "partitions") { view = "partitions"; page = partitionsPage(); title = "Partitions · scheduler"; }
  else if (parts[0] === "audit") { view = "audit"; page = auditPage(ns, new URLSearchParams(hashQuery || "")); title = "Audit · scheduler"; }
  else page = overviewPage(ns);
  if (ns !== DEFAULT_NS && view !== "locks" && view !== "partitions" && view !== "all") title = title.replace("scheduler", `${ns} · scheduler`);
  document.title = title;
  currentView = view;
  renderNav();
  if (arrived) say(arrived, false);
  if (view !== "overview" && !replicas.length) {
    // The replicas to offer should this one stop answering (the overview reads them itself).
    api("GET", "/v1/instances").then(({ data }) => { replicas = data.instances; }, () => {});
  }
  // Each page change hands the focus to the new page's heading, where a screen reader
  // starts reading it, not to the body (issue 34); once more after the first refresh when
  // the page draws its heading then. The namespace picker keeps it: its arrow keys go on
  // choosing.
  if (document.activeElement !== document.getElementById("ns-picker")) focusHeading();
  refreshNow().then(() => {
    if (seq !== routeSeq) return;
    if (document.activeElement === document.body || !document.activeElement) focusHeading();
    if (page) schedule();
  });
}

function focusHeading() {
  const h1 = main.querySelector("h1");
  if (h1) h1.focus({ preventScroll: true });
}

// sessionFailed says that the token's grants could not be read (the replica is down, say)
// and offers to try again; nothing else can be shown without them.
function sessionFailed(e) {
  replace(main,
    h("h1", { tabindex: "-1" }, "Not loaded"),
    h("p", { class: "problem" }, `Could not ask the replica what this token may do — ${e.message}`),
    h("button", { type: "button", id: "retry", onclick: route }, "Try again"));
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden && page && isLive(page)) refreshNow(); });
restoreSession();
renderSession();
route();
