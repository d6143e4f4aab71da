// The scheduler's dashboard: a few pages over the public /v1 API, no framework and no build.
//
// It is a few plain scripts that index.html loads in order, sharing one global scope:
// core.js (the API call, building and morphing the page, times, dialogs), session.js (the
// token, who it is and what it may do, the namespace picker), overview.js, job.js (with
// slots.js, backfill.js and notify.js, its accountability parts), form.js (a runtime job's
// form), pages.js (a run, locks), audit.js and app.js (routes and the refresh loop), each
// small enough to read in one sitting.
//
// Each page builds its controls once and then refreshes only its data every second while
// the tab is visible, so a run finishing or a new leader shows within two seconds. A
// refresh renders the data afresh and morphs the page into it: an element that is still
// there stays the same element, so the focus, what the operator is typing and a screen
// reader's place survive every refresh. Requests revalidate (ETag, 304), so an unchanged
// answer costs a few headers; a page whose data cannot change any more (a finished run, an
// older page of history) stops polling.
//
// The API token, when the server wants one (the page's scheduler-auth meta says so), is
// asked for before any request and kept in sessionStorage: it lives as long as the tab, and
// no cookie exists that another site could make the browser send.
"use strict";

const TOKEN_KEY = "scheduler.token";
const REFRESH_MS = 1000;
const STRIP_LEN = 20;
const STATUSES = ["queued", "running", "succeeded", "failed", "skipped", "timed_out", "abandoned", "cancelled", "missed"];
const TRIGGERS = ["schedule", "manual", "catch-up", "recovery", "rerun", "backfill", "after"];
// A symbol per status, so outcomes read without colour.
const SYMBOL = {
  succeeded: "✓", failed: "✗", timed_out: "◷", abandoned: "!", cancelled: "⊘",
  running: "▶", queued: "…", skipped: "–", missed: "○",
};

const main = document.getElementById("main");
const flash = document.getElementById("flash");
// "bearer" when the API wants a token, "none" when it does not.
const AUTH = (document.querySelector('meta[name="scheduler-auth"]') || {}).content;
let page = null; // the current page: {refresh(), live?()}
let timer = null;

// ---- API ----------------------------------------------------------------------------------

class Problem extends Error {
  constructor(status, body) {
    const title = (body && body.title) || `HTTP ${status}`;
    const detail = (body && body.detail) || "";
    super(detail ? `${title}: ${detail}` : title);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body, extraHeaders) {
  const headers = { Accept: "application/json", ...extraHeaders };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    // no-cache: the browser keeps the answer with its ETag and asks If-None-Match each time,
    // so an unchanged answer comes back as a 304 with no body.
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-cache" });
  } catch (e) {
    throw new Problem(0, { title: "Server unreachable", detail: "the replica did not answer; is it running?" });
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (res.status === 401) {
    askToken(token ? "That token was refused. Enter the API token again." : "This server needs an API token.");
    throw new Problem(401, data);
  }
  if (!res.ok) throw new Problem(res.status, data);
  return { status: res.status, data };
}

// ---- small helpers ------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function replace(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

// update makes el's content look like children (a fresh render) and keeps every node that
// is still there: only changed attributes and texts are written, new nodes inserted, gone
// ones removed. Elements with a data-key (rows, runs) are matched by key, so a new row at
// the top does not turn every row below into another. A fresh render carries no event
// listeners: pages listen on elements they build once.
function update(el, ...children) {
  const next = document.createElement(el.tagName);
  replace(next, ...children);
  morphChildren(el, next);
}

function morph(cur, next) {
  for (const { name } of [...cur.attributes]) if (!next.hasAttribute(name)) cur.removeAttribute(name);
  for (const { name, value } of [...next.attributes]) if (cur.getAttribute(name) !== value) cur.setAttribute(name, value);
  morphChildren(cur, next);
}

function keyOf(n) { return n.nodeType === Node.ELEMENT_NODE ? n.dataset.key : undefined; }

function morphChildren(cur, next) {
  const wanted = new Set([...next.children].map(keyOf).filter((k) => k !== undefined));
  const keyed = new Map();
  for (const c of [...cur.children]) {
    const k = keyOf(c);
    if (k === undefined) continue;
    if (wanted.has(k)) keyed.set(k, c); else c.remove(); // gone first, so the rest need not move
  }
  let at = cur.firstChild;
  for (const n of [...next.childNodes]) {
    const k = keyOf(n);
    let match = null;
    if (k !== undefined) match = keyed.get(k) || null;
    else if (at && at.nodeType === n.nodeType && at.nodeName === n.nodeName && keyOf(at) === undefined) match = at;
    if (!match) { cur.insertBefore(n, at); continue; }
    if (match === at) at = at.nextSibling; else cur.insertBefore(match, at);
    if (n.nodeType === Node.ELEMENT_NODE) morph(match, n);
    else if (match.nodeValue !== n.nodeValue) match.nodeValue = n.nodeValue;
  }
  while (at) { const after = at.nextSibling; at.remove(); at = after; }
}

// usable marks a button that cannot act now with aria-disabled instead of disabled: a
// disabled button drops the focus, and a focused Pause would lose it the moment it worked.
function usable(button, ok) {
  button.setAttribute("aria-disabled", ok ? "false" : "true");
}

function isUsable(button) { return button.getAttribute("aria-disabled") !== "true"; }

function pad(n) { return String(n).padStart(2, "0"); }

// Absolute times are shown in UTC, the zone of the schedules' defaults and of the logs.
function absTime(iso) {
  const d = new Date(iso);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

function relTime(iso) {
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  const a = Math.abs(s);
  let t;
  if (a < 5) return "now";
  if (a < 60) t = `${a} s`;
  else if (a < 3600) t = `${Math.round(a / 60)} min`;
  else if (a < 86400 * 2) t = `${Math.floor(a / 3600)} h ${Math.round((a % 3600) / 60)} min`;
  else t = `${Math.round(a / 86400)} days`;
  return s > 0 ? `in ${t}` : `${t} ago`;
}

// zoneTime is the instant in zone (the job's), as "2026-11-26 03:00 Europe/Paris", or ""
// for UTC or a zone this browser does not know.
function zoneTime(iso, zone) {
  if (!zone || zone === "UTC" || zone === "Etc/UTC") return "";
  try {
    const parts = {};
    for (const p of new Intl.DateTimeFormat("en-GB", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).formatToParts(new Date(iso))) parts[p.type] = p.value;
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute} ${zone}`;
  } catch (e) {
    return "";
  }
}

// when shows an instant in UTC with how far it is from now; opts.zone adds it in that zone
// (a job's), beside UTC.
function when(iso, opts) {
  if (!iso) return h("span", { class: "muted" }, (opts && opts.none) || "—");
  const local = zoneTime(iso, opts && opts.zone);
  return h("time", { datetime: iso, title: iso }, absTime(iso),
    local ? h("span", { class: "zone" }, ` · ${local}`) : null, h("span", { class: "muted rel" }, ` (${relTime(iso)})`));
}

// tickTimes keeps relative times true on a page that no longer polls.
function tickTimes() {
  for (const t of main.querySelectorAll("time[datetime] > .rel")) {
    const text = ` (${relTime(t.parentElement.getAttribute("datetime"))})`;
    if (t.textContent !== text) t.textContent = text;
  }
}

function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}

function status(s) {
  return h("span", { class: `status s-${s}` }, `${SYMBOL[s] || ""} ${s.replace("_", " ")}`);
}

// The kind of a job, as a word: built-in jobs are compiled in, the others defined at runtime.
const KIND_WORD = { builtin: "built-in", http: "HTTP", sql: "SQL", river: "River", nats: "NATS" };

// A runtime job is any kind but a compiled one: a replica's newer kinds included.
function isRuntime(job) { return !!job && !!job.kind && job.kind !== "builtin"; }

function kindTag(job) {
  if (!job.kind) return null; // a replica older than runtime jobs
  return h("span", { class: `badge kind kind-${job.kind}`, "data-badge": "kind" }, KIND_WORD[job.kind] || job.kind);
}

function labelsText(labels) {
  return Object.keys(labels || {}).sort().map((k) => `${k}=${labels[k]}`).join(" · ");
}

function badges(job) {
  return [
    job.paused ? h("span", { class: "badge paused", "data-badge": "paused" }, "paused") : null,
    job.enabled ? null : h("span", { class: "badge disabled", "data-badge": "disabled" }, "disabled"),
  ];
}

// A cell's content sits in one div, so the phone layout's label + value grid keeps it together.
function td(label, ...children) { return h("td", { "data-label": label }, h("div", {}, ...children)); }

function table(cls, heads, rows, empty) {
  if (!rows.length) return h("p", { class: "muted" }, empty || "Nothing to show.");
  return h("div", { class: "table-wrap" },
    h("table", { class: cls },
      h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows)));
}

// say shows a message: a text, or nodes (a link to the run an action queued).
function say(message, isError) {
  flash.className = "flash" + (isError ? " error" : "");
  flash.setAttribute("role", isError ? "alert" : "status");
  replace(flash, message);
}

function clearSay() { flash.textContent = ""; flash.className = "flash"; }

// confirmAction asks in a modal <dialog> (keyboard and screen-reader friendly) and resolves
// false unless Confirm is pressed. With reason (a string, its first value) the dialog also
// asks why, and resolves {reason} (trimmed, undefined when empty); without, true.
//
// The close event is a queued task: after Escape, Chromium may deliver it only once the
// dialog has been opened again. So each question answers only to a close that finds the
// dialog closed, and a new question ends the one before it (as declined), or a late close
// would answer both: the action done twice, or a Confirm lost.
let confirmPending = null; // ends the question the dialog asks now
function confirmAction(title, text, okLabel, reason) {
  const dlg = document.getElementById("confirm");
  if (confirmPending) confirmPending(false);
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel || "Confirm";
  const why = document.getElementById("confirm-reason");
  why.parentElement.hidden = reason === undefined;
  why.value = reason || "";
  // The dialog's sentence is its description (aria-describedby), so a screen reader reads
  // what will happen, not only the title. Closed, it gives the focus back to its opener.
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const end = (ok) => {
      dlg.removeEventListener("close", onClose);
      if (confirmPending === end) confirmPending = null;
      resolve(ok);
    };
    const onClose = () => {
      if (dlg.open) return; // an earlier question's close, late
      if (opener && opener !== document.body && opener.isConnected) opener.focus();
      const ok = dlg.returnValue === "ok";
      end(ok && reason !== undefined ? { reason: why.value.trim() || undefined } : ok);
    };
    confirmPending = end;
    dlg.addEventListener("close", onClose);
    dlg.returnValue = "";
    dlg.showModal();
    if (reason !== undefined) why.focus(); // the question asked first
  });
}

// Enter in the dialog's reason confirms. The browser would submit the form with its first
// button, Cancel: a submission while the reason has the focus is such an Enter.
document.querySelector("#confirm form").addEventListener("submit", (ev) => {
  if (document.activeElement !== document.getElementById("confirm-reason")) return;
  ev.preventDefault();
  document.getElementById("confirm").close("ok");
});

// act runs an action after confirmation and says what happened; with reason (see
// confirmAction), fn gets the reason the dialog was given. The controls of actions the
// token may not take are disabled (session.js), so a refusal (403) is rare: the token's
// grants changed since the page learnt them. It is shown with the server's own title and
// detail, and the grants are read again.
async function act(title, text, okLabel, fn, reason) {
  const answer = await confirmAction(title, text, okLabel, reason);
  if (!answer) return;
  try {
    const msg = await fn(answer.reason);
    say(msg, false);
  } catch (e) {
    sayFailure(okLabel, e);
  }
  refreshNow();
}

function sayFailure(what, e) {
  if (e.status === 403) {
    say(`Refused: ${what} — ${e.message}`, true);
    reloadPowers();
  }
  else if (e.status !== 401) say(`Failed: ${what} — ${e.message}`, true);
}

// navigate opens another page after an action that ended this one (a job saved or
// deleted): the message survives the route change, and the new page's heading takes the
// focus, so a screen reader starts there instead of on the body.
let nextFlash = null;
function navigate(hash, message) {
  nextFlash = message;
  if (location.hash === hash) route(); else location.hash = hash;
}

