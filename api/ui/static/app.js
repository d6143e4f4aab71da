// The scheduler's dashboard: a few pages over the public /v1 API, no framework and no build.
//
// Pages are hash routes (#/, #/jobs/NAME, #/runs/ID, #/locks, #/audit) so every link is a
// real link and the server serves one file. Each page builds its controls once and then
// refreshes only its data every second while the tab is visible, so a run finishing or a
// new leader shows within two seconds. A refresh renders the data afresh and morphs the
// page into it: an element that is still there stays the same element, so the focus, what
// the operator is typing and a screen reader's place survive every refresh. Requests
// revalidate (ETag, 304), so an unchanged answer costs a few headers; a page whose data
// cannot change any more (a finished run, an older page of history) stops polling.
//
// The API token, when the server wants one (the page's scheduler-auth meta says so), is
// asked for before any request and kept in sessionStorage: it lives as long as the tab, and
// no cookie exists that another site could make the browser send.
"use strict";

const TOKEN_KEY = "scheduler.token";
const REFRESH_MS = 1000;
const STRIP_LEN = 20;
const STATUSES = ["queued", "running", "succeeded", "failed", "skipped", "timed_out", "abandoned", "cancelled", "missed"];
const TRIGGERS = ["schedule", "manual", "catch-up", "recovery"];
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

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
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

function when(iso, opts) {
  if (!iso) return h("span", { class: "muted" }, (opts && opts.none) || "—");
  return h("time", { datetime: iso, title: iso }, absTime(iso), h("span", { class: "muted rel" }, ` (${relTime(iso)})`));
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

function say(text, isError) {
  flash.className = "flash" + (isError ? " error" : "");
  flash.setAttribute("role", isError ? "alert" : "status");
  flash.textContent = text;
}

function clearSay() { flash.textContent = ""; flash.className = "flash"; }

// confirmAction asks in a modal <dialog> (keyboard and screen-reader friendly) and resolves
// true only on Confirm.
function confirmAction(title, text, okLabel) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel || "Confirm";
  // The dialog's sentence is its description (aria-describedby), so a screen reader reads
  // what will happen, not only the title. Closed, it gives the focus back to its opener.
  const opener = document.activeElement;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => {
      if (opener && opener !== document.body && opener.isConnected) opener.focus();
      resolve(dlg.returnValue === "ok");
    }, { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

// act runs an action after confirmation and says what happened; a refusal (read-only token:
// 403) is shown as such, with the server's own title and detail.
async function act(title, text, okLabel, fn) {
  if (!(await confirmAction(title, text, okLabel))) return;
  try {
    const msg = await fn();
    say(msg, false);
  } catch (e) {
    if (e.status === 403) say(`Refused: ${okLabel} — ${e.message}`, true);
    else if (e.status !== 401) say(`Failed: ${okLabel} — ${e.message}`, true);
  }
  refreshNow();
}

// ---- token --------------------------------------------------------------------------------

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

// ---- overview -----------------------------------------------------------------------------

function overviewPage() {
  let leader = null; // the leader shown, for the step-down button
  const leaderEl = h("p", { id: "leader" }, "…");
  const stepDown = h("button", { type: "button", class: "danger", id: "step-down", "aria-disabled": "true" }, "Step down");
  const instancesEl = h("div");
  const jobsEl = h("div");
  replace(main,
    h("h1", { tabindex: "-1" }, "Overview"),
    h("section", { "aria-labelledby": "leader-h" }, h("h2", { id: "leader-h" }, "Leader"), leaderEl, stepDown),
    h("h2", { id: "jobs-h" }, "Jobs"), jobsEl,
    h("h2", {}, "Instances"), instancesEl);
  const strips = new Map(); // job -> {key, runs}

  stepDown.addEventListener("click", () => {
    const l = leader;
    if (!l || !isUsable(stepDown)) return;
    act("Step down the leader?",
      `${l.instance_id} resigns at once, as on shutdown; a waiting replica takes over and ${l.instance_id} stays up as a follower. Its running jobs are cancelled and recovered by the next leader.`,
      "Step down",
      async () => { await api("POST", "/v1/leader/step-down"); return `Asked ${l.instance_id} to step down.`; });
  });
  jobsEl.addEventListener("keydown", stripKeys);

  async function loadStrip(job) {
    const key = job.last_run ? `${job.last_run.id}:${job.last_run.status}` : "";
    const cached = strips.get(job.name);
    if (cached && cached.key === key) return;
    const { data } = await api("GET", `/v1/jobs/${encodeURIComponent(job.name)}/runs?limit=${STRIP_LEN}`);
    strips.set(job.name, { key, runs: data.runs });
  }

  // A strip is a list of links, oldest first as time reads, one tab stop (the newest run;
  // the arrow keys move along it) so twenty runs a row do not cost twenty Tab presses.
  function strip(name) {
    const s = strips.get(name);
    if (!s) return h("span", { class: "muted" }, "…");
    if (!s.runs.length) return h("span", { class: "muted" }, "no runs yet");
    const counts = {};
    for (const r of s.runs) counts[r.status] = (counts[r.status] || 0) + 1;
    const summary = Object.entries(counts).map(([k, v]) => `${v} ${k.replace("_", " ")}`).join(", ");
    const runs = [...s.runs].reverse();
    return h("ol", { class: "strip", "aria-label": `Last ${runs.length} runs, oldest first: ${summary}` },
      runs.map((r, i) => h("li", { "data-key": r.id },
        h("a", {
          href: `#/runs/${r.id}`, class: `s-${r.status}`, title: `run #${r.id}: ${r.status.replace("_", " ")}`,
          "aria-label": `run #${r.id}: ${r.status.replace("_", " ")}`, tabindex: i === runs.length - 1 ? "0" : "-1",
        }, SYMBOL[r.status] || "?"))));
  }

  async function refresh() {
    const [leaderRes, instances, jobs] = await Promise.allSettled([
      api("GET", "/v1/leader"), api("GET", "/v1/instances"), api("GET", "/v1/jobs")]);
    if (jobs.status === "rejected") throw jobs.reason;

    leader = leaderRes.status === "fulfilled" ? leaderRes.value.data : null;
    const l = leader;
    update(leaderEl, l
      ? [h("strong", { class: "mono" }, l.instance_id), h("span", { class: "badge leader" }, "leader"), ` · epoch ${l.epoch} · since `, when(l.since)]
      : "No leader elected yet: no job runs until a replica is elected.");
    usable(stepDown, !!l);

    const js = jobs.value.data.jobs;
    await Promise.allSettled(js.map(loadStrip));
    const focusedRun = document.activeElement && document.activeElement.closest(".strip") ? document.activeElement : null;
    update(jobsEl, table("stack jobs", ["Job", "Schedule", "Next run", "Last run", "Last 20"], js.map((j) =>
      h("tr", { "data-job": j.name, "data-key": j.name },
        td("Job", h("a", { href: `#/jobs/${encodeURIComponent(j.name)}` }, j.name), badges(j)),
        td("Schedule", j.schedule_text, h("div", { class: "muted mono" }, j.schedule)),
        td("Next run", j.next_run_at ? when(j.next_run_at) : h("span", { class: "muted" }, j.paused ? "paused" : j.enabled ? "—" : "disabled")),
        td("Last run", j.last_run
          ? [h("a", { href: `#/runs/${j.last_run.id}` }, status(j.last_run.status)), " ", h("span", { class: "muted" }, duration(j.last_run.duration_ms))]
          : h("span", { class: "muted" }, "never")),
        td("Last 20", strip(j.name))))));
    if (focusedRun && focusedRun.isConnected) rove(focusedRun);

    const list = instances.status === "fulfilled" ? instances.value.data.instances : [];
    update(instancesEl, table("stack", ["Instance", "Host", "Version", "Address", "Started", "Last heartbeat"], list.map((i) =>
      h("tr", { "data-key": i.instance_id },
        td("Instance", h("span", { class: "mono" }, i.instance_id), i.is_leader ? h("span", { class: "badge leader" }, "leader") : null,
          i.is_self ? h("span", { class: "muted" }, " (this page's replica)") : null),
        td("Host", i.host), td("Version", i.version), td("Address", i.http_addr || "—"),
        td("Started", when(i.started_at)), td("Last heartbeat", when(i.last_seen_at)))), "No instance has reported yet."));
  }
  return { refresh };
}

// rove makes link the strip's one tab stop.
function rove(link) {
  for (const a of link.closest(".strip").querySelectorAll("a")) a.setAttribute("tabindex", a === link ? "0" : "-1");
}

// stripKeys moves along a strip with the arrow keys, Home and End.
function stripKeys(ev) {
  const link = ev.target.closest && ev.target.closest(".strip a");
  if (!link) return;
  const links = [...link.closest(".strip").querySelectorAll("a")];
  const i = links.indexOf(link);
  const to = { ArrowLeft: i - 1, ArrowUp: i - 1, ArrowRight: i + 1, ArrowDown: i + 1, Home: 0, End: links.length - 1 }[ev.key];
  if (to === undefined || !links[to]) return;
  ev.preventDefault();
  rove(links[to]);
  links[to].focus();
}

// ---- job ----------------------------------------------------------------------------------

// jobFacts renders the job's schedule and next runs; before the job arrives (job null) it
// renders the same boxes with placeholders, so nothing moves when the data lands.
function jobFacts(job) {
  const v = (f) => (job ? f(job) : "…");
  const next = job ? job.next_runs || [] : ["", "", "", "", ""];
  return h("div", { class: "cards" },
    h("div", { class: "card" }, h("h2", {}, "Schedule"),
      h("dl", { class: "facts" },
        h("dt", {}, "When"), h("dd", { id: "schedule-text" }, v((j) => j.schedule_text)),
        h("dt", {}, "Expression"), h("dd", { class: "mono" }, v((j) => j.schedule)),
        h("dt", {}, "Time zone"), h("dd", {}, v((j) => j.time_zone)),
        h("dt", {}, "Timeout"), h("dd", {}, v((j) => j.timeout)),
        h("dt", {}, "Catch-up window"), h("dd", {}, v((j) => j.catchup)),
        h("dt", {}, "Minimum gap"), h("dd", {}, v((j) => j.min_gap)))),
    h("div", { class: "card" }, h("h2", {}, "Next runs"),
      next.length
        ? h("ol", { class: "next-runs", id: job ? "next-runs" : null }, next.map((t) => h("li", {}, t ? when(t) : "…")))
        : h("p", { class: "muted" }, job.paused ? "None while paused." : "None: the job is disabled.")));
}

function jobPage(name) {
  const path = `/v1/jobs/${encodeURIComponent(name)}`;
  // The heading holds the name from the address at once, so the actions below it do not
  // move when the job arrives; only the badges come later.
  const badgesEl = h("span");
  const facts = h("div");
  const historyEl = h("div");
  const statusSel = h("select", { id: "f-status", name: "status" }, h("option", { value: "" }, "any"), STATUSES.map((s) => h("option", { value: s }, s)));
  const triggerSel = h("select", { id: "f-trigger", name: "trigger" }, h("option", { value: "" }, "any"), TRIGGERS.map((s) => h("option", { value: s }, s)));
  const reason = h("input", { type: "text", id: "reason", name: "reason", maxlength: 500, placeholder: "why (kept in the audit log)" });
  const dry = h("input", { type: "checkbox", id: "dry-run", name: "dry_run" });
  const pauseBtn = h("button", { type: "button", id: "pause", "aria-disabled": "true" }, "Pause");
  const resumeBtn = h("button", { type: "button", id: "resume", "aria-disabled": "true" }, "Resume");
  let cursors = []; // cursors of the pages before the one shown; [] = newest page (live)
  let cursor = null;
  let nextCursor = null;
  const pager = newPager({
    newest: () => { cursors = []; cursor = null; },
    newer: () => { cursor = cursors.pop() || null; if (!cursors.length) cursor = null; },
    older: () => { cursors.push(cursor); cursor = nextCursor; },
  });

  const runNow = h("form", {
    class: "actions", "aria-label": "Run now",
    onsubmit: (ev) => {
      ev.preventDefault();
      const body = { params: { dry_run: dry.checked } };
      if (reason.value.trim()) body.reason = reason.value.trim();
      act(`Run ${name} now?`, dry.checked ? "A dry run counts what it would change and changes nothing." : "The job runs once now on the leader, besides its schedule.",
        "Run now", async () => {
          const { status: code, data } = await api("POST", `${path}/runs`, body);
          reason.value = "";
          return code === 202 ? `Queued run ${data.id}.` : `Run ${data.id} is already ${data.status}; no second run was queued.`;
        });
    },
  },
  h("label", { for: "reason" }, "Reason", reason),
  h("label", { class: "check", for: "dry-run" }, dry, "Dry run"),
  h("button", { type: "submit", class: "primary", id: "run-now" }, "Run now"),
  pauseBtn, resumeBtn);

  pauseBtn.addEventListener("click", () => isUsable(pauseBtn) && act(`Pause ${name}?`,
    "Scheduled and catch-up runs stop until it is resumed; Run now still works.", "Pause",
    async () => { await api("POST", `${path}/pause`); return `${name} is paused.`; }));
  resumeBtn.addEventListener("click", () => isUsable(resumeBtn) && act(`Resume ${name}?`,
    "Scheduled runs start again from the next slot.", "Resume",
    async () => { await api("POST", `${path}/resume`); return `${name} is resumed.`; }));

  const onFilter = () => { cursors = []; cursor = null; refreshNow(); };
  statusSel.addEventListener("change", onFilter);
  triggerSel.addEventListener("change", onFilter);

  replace(facts, jobFacts(null));
  replace(main,
    h("p", {}, h("a", { href: "#/" }, "← Overview")),
    h("h1", { tabindex: "-1" }, name, badgesEl), runNow, facts,
    h("h2", { id: "history-h" }, "History"),
    h("div", { class: "filters", role: "group", "aria-labelledby": "history-h" },
      h("label", { for: "f-status" }, "Status", statusSel),
      h("label", { for: "f-trigger" }, "Trigger", triggerSel)),
    historyEl, pager.el);

  async function refresh() {
    const q = new URLSearchParams({ limit: "25" });
    if (statusSel.value) q.set("status", statusSel.value);
    if (triggerSel.value) q.set("trigger", triggerSel.value);
    if (cursor) q.set("cursor", cursor);
    const [j, runs] = await Promise.all([api("GET", path), api("GET", `${path}/runs?${q}`)]);
    const job = j.data;
    update(badgesEl, badges(job));
    usable(pauseBtn, !job.paused);
    usable(resumeBtn, job.paused);
    update(facts, jobFacts(job));

    const rows = runs.data.runs.map((r) => h("tr", { "data-run": r.id, "data-status": r.status, "data-key": r.id },
      td("Run", h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)),
      td("Status", status(r.status)),
      td("Trigger", r.trigger),
      td("Slot / created", when(r.scheduled_at || r.created_at)),
      td("Duration", duration(r.duration_ms)),
      td("Reason", r.reason || r.error || "")));
    update(historyEl, table("stack history", ["Run", "Status", "Trigger", "Slot / created", "Duration", "Reason / error"], rows, "No runs match."));
    nextCursor = runs.data.next_cursor;
    pager.show(cursors.length > 0, !!nextCursor);
  }
  // Older pages do not change under the reader; only the newest one is live.
  return { refresh, live: () => cursors.length === 0 };
}

// newPager builds a history pager's buttons once; show only hides and shows them, so the
// focus stays on Older while the newest page refreshes.
function newPager(moves) {
  const go = (move) => () => { move(); refreshNow(); };
  const newest = h("button", { type: "button", hidden: true, onclick: go(moves.newest) }, "Newest");
  const newer = moves.newer ? h("button", { type: "button", hidden: true, onclick: go(moves.newer) }, "Newer") : null;
  const older = h("button", { type: "button", id: "older", hidden: true, onclick: go(moves.older) }, "Older");
  return {
    el: h("div", { class: "pager" }, newest, newer, older),
    show(back, more) {
      newest.hidden = !back;
      if (newer) newer.hidden = !back;
      older.hidden = !more;
    },
  };
}

// ---- run ----------------------------------------------------------------------------------

function statsView(stats) {
  if (!stats || typeof stats !== "object") return h("p", { class: "muted" }, "No counts.");
  const top = ["processed", "changed", "skipped_locked", "errors"].filter((k) => k in stats);
  const detail = stats.detail || {};
  const tenants = Object.keys(detail).filter((k) => k.startsWith("tenant:")).sort();
  const others = Object.keys(detail).filter((k) => !k.startsWith("tenant:")).sort();
  return [
    h("dl", { class: "facts", id: "stats" }, top.map((k) => [h("dt", {}, k.replace("_", " ")), h("dd", { class: "mono" }, stats[k])])),
    others.length ? [h("h3", {}, "Detail"), table("compact", ["Counter", "Count"], others.map((k) => h("tr", {}, h("td", {}, k), h("td", { class: "num" }, detail[k]))))] : null,
    tenants.length ? [h("h3", {}, "Per tenant"), table("compact", ["Tenant", "Count"], tenants.map((k) => h("tr", {}, h("td", { class: "mono" }, k.slice(7)), h("td", { class: "num" }, detail[k]))))] : null,
  ];
}

function runPage(id) {
  const body = h("div");
  let run = null; // the run shown, for the cancel button
  let active = true;
  replace(main, body);
  body.addEventListener("click", (ev) => {
    if (!ev.target.closest("#cancel") || !run) return;
    const r = run;
    act(`Cancel run #${r.id}?`, r.status === "queued" ? "It has not started and will not." : "The leader cancels the running job; work it committed stays.", "Cancel run",
      async () => { const res = await api("POST", `/v1/runs/${r.id}/cancel`); return res.status === 202 ? `Asked the leader to cancel run ${r.id}.` : `Run ${r.id} is cancelled.`; });
  });
  async function refresh() {
    const { data: r } = await api("GET", `/v1/runs/${encodeURIComponent(id)}`);
    run = r;
    active = r.status === "queued" || r.status === "running";
    const dt = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
    update(body,
      h("p", {}, h("a", { href: `#/jobs/${encodeURIComponent(r.job)}` }, `← ${r.job}`)),
      h("h1", { tabindex: "-1" }, `Run #${r.id} `, h("span", { id: "run-status" }, status(r.status))),
      active ? h("div", { class: "actions" }, h("button", { type: "button", class: "danger", id: "cancel" }, "Cancel run"),
        r.cancel_requested ? h("span", {}, "Cancel requested; waiting for the leader.") : null) : null,
      h("dl", { class: "facts" },
        dt("Job", h("a", { href: `#/jobs/${encodeURIComponent(r.job)}` }, r.job)),
        dt("Trigger", r.trigger),
        dt("Slot", when(r.scheduled_at, { none: "— (not a scheduled slot)" })),
        dt("Created", when(r.created_at)),
        dt("Started", when(r.started_at)),
        dt("Finished", when(r.finished_at)),
        dt("Duration", duration(r.duration_ms)),
        dt("Replica", r.instance_id ? h("span", { class: "mono" }, r.instance_id) : "—"),
        dt("Epoch", r.epoch ?? "—"),
        dt("Reason", r.reason || "—"),
        dt("Parameters", h("code", {}, JSON.stringify(r.params))),
        dt("Recovers", r.recovers_run_id ? h("a", { href: `#/runs/${r.recovers_run_id}` }, `run #${r.recovers_run_id}`) : "—")),
      r.error ? [h("h2", {}, "Error"), h("pre", { id: "run-error" }, r.error)] : null,
      h("h2", {}, "Counts"), statsView(r.stats));
  }
  // A finished run never changes again: its page stops asking.
  return { refresh, live: () => active };
}

// ---- locks and audit ----------------------------------------------------------------------

function locksPage() {
  const body = h("div");
  replace(main, h("h1", { tabindex: "-1" }, "Locks"),
    h("p", { class: "muted" }, "Advisory locks held or awaited now. Per-entity locks are transaction-scoped and go with their transaction; the leader lock goes with its session. Nothing here needs releasing by hand: step the leader down or cancel a run instead."),
    body);
  async function refresh() {
    const { data } = await api("GET", "/v1/locks");
    update(body, table("stack locks", ["Lock", "Held", "Instance", "PID", "Since", "Key"], data.locks.map((l) =>
      h("tr", { "data-key": `${l.pid}:${l.key}:${l.granted}` },
        td("Lock", l.name ? h("strong", {}, l.name) : "per-entity", l.meaning ? h("div", { class: "muted" }, l.meaning) : null),
        td("Held", l.granted ? "held" : "waiting"),
        td("Instance", h("span", { class: "mono" }, l.instance_id || l.application_name || "—")),
        td("PID", l.pid),
        td("Since", when(l.since)),
        td("Key", h("span", { class: "mono" }, l.key)))), "No advisory lock is held or awaited."));
  }
  return { refresh };
}

function auditPage() {
  const body = h("div");
  let cursors = [];
  let cursor = null;
  let nextCursor = null;
  const pager = newPager({
    newest: () => { cursors = []; cursor = null; },
    older: () => { cursors.push(cursor); cursor = nextCursor; },
  });
  replace(main, h("h1", { tabindex: "-1" }, "Audit"),
    h("p", { class: "muted" }, "Every action taken through the API or this dashboard: runs triggered and cancelled, jobs paused and resumed, leaders stepped down."),
    body, pager.el);
  async function refresh() {
    const q = new URLSearchParams({ limit: "50" });
    if (cursor) q.set("cursor", cursor);
    const { data } = await api("GET", `/v1/audit?${q}`);
    update(body, table("stack audit", ["When", "Action", "Job", "Run", "Token", "Reason", "Request", "Client"], data.actions.map((a) =>
      h("tr", { "data-key": a.id },
        td("When", when(a.at)),
        td("Action", h("strong", {}, a.action)),
        td("Job", a.job ? h("a", { href: `#/jobs/${encodeURIComponent(a.job)}` }, a.job) : "—"),
        td("Run", a.run_id ? h("a", { href: `#/runs/${a.run_id}` }, `#${a.run_id}`) : "—"),
        td("Token", a.token_kind),
        td("Reason", a.reason || "—"),
        td("Request", h("span", { class: "mono" }, a.request_id)),
        td("Client", h("span", { class: "mono" }, a.remote_addr)))), "No action recorded yet."));
    nextCursor = data.next_cursor;
    pager.show(cursors.length > 0, !!nextCursor);
  }
  return { refresh, live: () => cursors.length === 0 };
}

// ---- routing and refresh ------------------------------------------------------------------

function stopTimer() { if (timer) { clearTimeout(timer); timer = null; } }

function isLive(p) { return !p.live || p.live(); }

let inFlight = false;
async function refreshNow() {
  if (!page || inFlight) return;
  const current = page;
  const focused = document.activeElement;
  inFlight = true;
  try {
    await current.refresh();
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

// schedule ticks every second: a live page refreshes (while the tab is visible), a page
// that cannot change only moves its relative times on.
function schedule() {
  stopTimer();
  timer = setTimeout(async () => {
    if (page && isLive(page)) { if (!document.hidden) await refreshNow(); } else tickTimes();
    if (page) schedule();
  }, REFRESH_MS);
}

function route() {
  stopTimer();
  clearSay();
  if (AUTH === "bearer" && !sessionStorage.getItem(TOKEN_KEY)) {
    // Ask first: a request without the token would only be refused.
    askToken("This server needs an API token.");
    return;
  }
  const hash = location.hash.replace(/^#/, "") || "/";
  const parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  let nav = "overview";
  if (parts[0] === "jobs" && parts[1]) { page = jobPage(parts[1]); nav = ""; document.title = `${parts[1]} · scheduler`; }
  else if (parts[0] === "runs" && parts[1]) { page = runPage(parts[1]); nav = ""; document.title = `run ${parts[1]} · scheduler`; }
  else if (parts[0] === "locks") { page = locksPage(); nav = "locks"; document.title = "Locks · scheduler"; }
  else if (parts[0] === "audit") { page = auditPage(); nav = "audit"; document.title = "Audit · scheduler"; }
  else { page = overviewPage(); document.title = "scheduler"; }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === nav) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  refreshNow().then(() => { if (page) schedule(); });
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden && page && isLive(page)) refreshNow(); });
renderSession();
route();
