// Routes and the refresh loop.
//
// Pages are hash routes (#/, #/jobs/NAME, #/jobs/NAME/edit, #/new-job, #/runs/ID, #/locks,
// #/audit) so every link is a real link and the server serves one page. (A job may be named
// "new", so the new job's form is not under #/jobs/.)
"use strict";

function stopTimer() { if (timer) { clearTimeout(timer); timer = null; } }

function isLive(p) { return !p.live || p.live(); }

let inFlight = false;
// lastRefreshMs is how long the last refresh took. The next one waits ten times that, at
// least REFRESH_MS: a job list of ten thousand jobs (half a second to build on the server)
// is then asked for every five seconds, not every second.
let lastRefreshMs = 0;
async function refreshNow() {
  if (!page || inFlight) return;
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
    if (flash.dataset.stale) { clearSay(); delete flash.dataset.stale; }
  } catch (e) {
    if (e.status !== 401 && current === page) {
      say(`Could not refresh — ${e.message}`, true);
      flash.dataset.stale = "1";
    }
  } finally {
    inFlight = false;
  }
}

// schedule ticks: a live page refreshes (while the tab is visible) every second, or every
// ten times its last refresh when that is slower; a page that cannot change only moves its
// relative times on, every second.
function schedule() {
  stopTimer();
  const wait = page && isLive(page) ? Math.max(REFRESH_MS, 10 * lastRefreshMs) : REFRESH_MS;
  timer = setTimeout(async () => {
    if (page && isLive(page)) { if (!document.hidden) await refreshNow(); } else tickTimes();
    if (page) schedule();
  }, wait);
}

function route() {
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
  const hash = location.hash.replace(/^#/, "") || "/";
  const parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  let nav = "overview";
  if (parts[0] === "new-job") { page = jobFormPage(null); nav = ""; document.title = "New job · scheduler"; }
  else if (parts[0] === "jobs" && parts[1] && parts[2] === "edit") { page = jobFormPage(parts[1]); nav = ""; document.title = `Edit ${parts[1]} · scheduler`; }
  else if (parts[0] === "jobs" && parts[1]) { page = jobPage(parts[1]); nav = ""; document.title = `${parts[1]} · scheduler`; }
  else if (parts[0] === "runs" && parts[1]) { page = runPage(parts[1]); nav = ""; document.title = `run ${parts[1]} · scheduler`; }
  else if (parts[0] === "locks") { page = locksPage(); nav = "locks"; document.title = "Locks · scheduler"; }
  else if (parts[0] === "audit") { page = auditPage(); nav = "audit"; document.title = "Audit · scheduler"; }
  else { page = overviewPage(); document.title = "scheduler"; }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === nav) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  if (arrived) {
    say(arrived, false);
    const h1 = main.querySelector("h1");
    if (h1) h1.focus();
  }
  refreshNow().then(() => { if (page) schedule(); });
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden && page && isLive(page)) refreshNow(); });
renderSession();
route();
