// The scheduler's dashboard: a few pages over the public /v1 API, no framework and no build.
//
// Pages are hash routes (#/, #/jobs/NAME, #/jobs/NAME/edit, #/new-job, #/runs/ID, #/locks,
// #/audit) so every link is a real link and the server serves one file. (A job may be named
// "new", so the new job's form is not under #/jobs/.) Each page builds its controls once and then
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

// The kind of a job, as a word: built-in jobs are compiled in, the others defined at runtime.
const KIND_WORD = { builtin: "built-in", http: "HTTP", sql: "SQL" };

function isRuntime(job) { return !!job && (job.kind === "http" || job.kind === "sql"); }

function kindTag(job) {
  if (!job.kind) return null; // a replica older than runtime jobs
  return h("span", { class: `badge kind kind-${job.kind}`, "data-badge": "kind" }, KIND_WORD[job.kind] || job.kind);
}

function labelsText(labels) {
  return Object.keys(labels || {}).sort().map((k) => `${k}=${labels[k]}`).join(" · ");
}

// The overview's filter outlives the page, so coming back from a job keeps it.
let jobFilter = "";
// The overview shows at most this many jobs at once; the filter finds the others.
const MAX_JOB_ROWS = 100;

// jobMatches: every word of the filter is in the job's name, kind, target or labels.
function jobMatches(job, filter) {
  const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const hay = [job.name, KIND_WORD[job.kind] || "", job.target || "",
    ...Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`)].join("\n").toLowerCase();
  return words.every((w) => hay.includes(w));
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
//
// The close event is a queued task: after Escape, Chromium may deliver it only once the
// dialog has been opened again. So each question answers only to a close that finds the
// dialog closed, and a new question ends the one before it (as declined), or a late close
// would answer both: the action done twice, or a Confirm lost.
let confirmPending = null; // ends the question the dialog asks now
function confirmAction(title, text, okLabel) {
  const dlg = document.getElementById("confirm");
  if (confirmPending) confirmPending(false);
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel || "Confirm";
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
      end(dlg.returnValue === "ok");
    };
    confirmPending = end;
    dlg.addEventListener("close", onClose);
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
    sayFailure(okLabel, e);
  }
  refreshNow();
}

function sayFailure(what, e) {
  if (e.status === 403) say(`Refused: ${what} — ${e.message}`, true);
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
  const filter = h("input", {
    type: "search", id: "job-filter", name: "filter", autocomplete: "off", spellcheck: "false",
    placeholder: "name, label, kind or target", "aria-describedby": "jobs-count",
  });
  filter.value = jobFilter;
  const countEl = h("p", { id: "jobs-count", class: "muted", role: "status" });
  replace(main,
    h("h1", { tabindex: "-1" }, "Overview"),
    h("section", { "aria-labelledby": "leader-h" }, h("h2", { id: "leader-h" }, "Leader"), leaderEl, stepDown),
    h("h2", { id: "jobs-h" }, "Jobs"),
    h("div", { class: "filters" },
      h("div", { role: "search", "aria-label": "Jobs" }, h("label", { for: "job-filter" }, "Filter jobs", filter)),
      h("a", { class: "button primary", href: "#/new-job", id: "new-job" }, "New job")),
    countEl, jobsEl,
    h("h2", {}, "Instances"), instancesEl);
  const strips = new Map(); // job -> {key, runs}
  let jobs = null; // the last list, so the filter narrows it at once
  filter.addEventListener("input", () => {
    jobFilter = filter.value;
    if (jobs) renderJobs();
    refreshNow(); // the strips of rows the filter brought in
  });

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

  function shownJobs() {
    const matching = jobs.filter((j) => jobMatches(j, jobFilter));
    return { matching, shown: matching.slice(0, MAX_JOB_ROWS) };
  }

  function renderJobs() {
    const { matching, shown } = shownJobs();
    const n = jobs.length;
    update(countEl, matching.length === n
      ? `${n} ${n === 1 ? "job" : "jobs"}`
      : `${matching.length} of ${n} jobs match “${jobFilter.trim()}”`,
    shown.length < matching.length ? `; the first ${shown.length} are shown: narrow the filter to find the others.` : ".");
    const focusedRun = document.activeElement && document.activeElement.closest(".strip") ? document.activeElement : null;
    update(jobsEl, table("stack jobs", ["Job", "Schedule", "Next run", "Last run", "Last 20"], shown.map((j) =>
      h("tr", { "data-job": j.name, "data-key": j.name, "data-kind": j.kind },
        td("Job", h("a", { href: `#/jobs/${encodeURIComponent(j.name)}` }, j.name), kindTag(j), badges(j),
          j.target ? h("div", { class: "target mono" }, j.target) : null,
          labelsText(j.labels) ? h("div", { class: "muted labels" }, labelsText(j.labels)) : null),
        td("Schedule", j.schedule_text, h("div", { class: "muted mono" }, j.schedule)),
        td("Next run", j.next_run_at ? when(j.next_run_at) : h("span", { class: "muted" }, j.paused ? "paused" : j.enabled ? "—" : "disabled")),
        td("Last run", j.last_run
          ? [h("a", { href: `#/runs/${j.last_run.id}` }, status(j.last_run.status)), " ", h("span", { class: "muted" }, duration(j.last_run.duration_ms))]
          : h("span", { class: "muted" }, "never")),
        td("Last 20", strip(j.name)))), jobFilter.trim() ? "No job matches the filter." : "No jobs."));
    if (focusedRun && focusedRun.isConnected) rove(focusedRun);
  }

  async function refresh() {
    const [leaderRes, instances, jobsRes] = await Promise.allSettled([
      api("GET", "/v1/leader"), api("GET", "/v1/instances"), api("GET", "/v1/jobs")]);
    if (jobsRes.status === "rejected") throw jobsRes.reason;

    leader = leaderRes.status === "fulfilled" ? leaderRes.value.data : null;
    const l = leader;
    update(leaderEl, l
      ? [h("strong", { class: "mono" }, l.instance_id), h("span", { class: "badge leader" }, "leader"), ` · epoch ${l.epoch} · since `, when(l.since)]
      : "No leader elected yet: no job runs until a replica is elected.");
    usable(stepDown, !!l);

    jobs = jobsRes.value.data.jobs;
    // Only the rows shown need their strip: a thousand runtime jobs cost no thousand requests.
    await Promise.allSettled(shownJobs().shown.map(loadStrip));
    renderJobs();

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
        ? h("ol", { class: "next-runs", id: job ? "next-runs" : null }, next.map((t) => h("li", {}, t ? when(t) : "…", dstNote(job, t))))
        : h("p", { class: "muted" }, job.finished ? "None: its schedule is over (finished)." : job.paused ? "None while paused." : "None: the job is disabled."),
      clockChanges(job)),
    isRuntime(job) ? definitionCard(job) : null);
}

// dstNote says how a clock change moved or doubled the run at t (next_runs_dst), if it did.
function dstNote(job, t) {
  const m = ((job && job.next_runs_dst) || []).find((x) => x.at === t);
  return m ? h("span", { class: "muted" }, ` — ${m.change}: ${m.note}`) : null;
}

// clockChanges lists what the clock changes of the next year do to the schedule (warnings).
function clockChanges(job) {
  const list = (job && job.warnings) || [];
  return list.length
    ? [h("h3", {}, "Clock changes"), h("ul", { class: "warnings" }, list.map((w) => h("li", {}, w)))]
    : null;
}

// definitionCard shows what a runtime job does. Every value is text the job's author
// wrote: it goes into text nodes only (h), never into markup.
function definitionCard(job) {
  const d = job.definition || {};
  const http = d.http;
  const dt = (k, v, id) => [h("dt", {}, k), h("dd", { id }, v)];
  const auth = http && http.auth
    ? (http.auth.bearer_secret ? `bearer token from secret ${http.auth.bearer_secret}` : `${http.auth.header} from secret ${http.auth.header_secret}`)
    : null;
  return h("div", { class: "card wide" }, h("h2", {}, "Definition"),
    job.definition_error ? h("p", { class: "problem", role: "note" }, `✗ This definition no longer passes the check, so the job does not run: ${job.definition_error}`) : null,
    h("dl", { class: "facts" },
      dt("Kind", KIND_WORD[job.kind]),
      dt("Target", h("span", { class: "mono target" }, job.target || "—"), "job-target"),
      dt("Description", job.description ? h("span", { class: "prose" }, job.description) : h("span", { class: "muted" }, "—"), "job-description"),
      dt("Labels", labelsText(job.labels) || h("span", { class: "muted" }, "—")),
      dt("Version", job.version ?? "—"),
      dt("Overlap", job.overlap === "queue-one" ? "queue one run behind a running one" : "skip a slot while a run is still running"),
      http ? [
        dt("Headers", Object.keys(http.headers || {}).length ? h("span", { class: "mono" }, Object.keys(http.headers).sort().join(", ")) : "—"),
        dt("Authentication", auth || "none"),
        dt("Signing", http.signing_secret ? `Standard Webhooks signature, secret ${http.signing_secret}` : "none"),
        dt("Success", (http.success || []).length ? http.success.join(", ") : "any 2xx status"),
        dt("Attempts", d.retry ? `${d.retry.max_attempts}, backing off ${d.retry.initial_backoff} to ${d.retry.max_backoff}` : "—"),
        dt("Attempt timeout", http.timeout || "—"),
      ] : null));
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
  // A runtime job's own actions; a built-in job's definition is compiled in, so it has none.
  const editLink = h("a", { class: "button", id: "edit", href: `#/jobs/${encodeURIComponent(name)}/edit`, hidden: true }, "Edit");
  const deleteBtn = h("button", { type: "button", class: "danger", id: "delete", hidden: true }, "Delete");
  let version = null;
  let cursors = []; // cursors of the pages before the one shown; [] = newest page (live)
  let cursor = null;
  let nextCursor = null;
  const pager = newPager({
    newest: () => { cursors = []; cursor = null; },
    newer: () => { cursor = cursors.pop() || null; if (!cursors.length) cursor = null; },
    older: () => { cursors.push(cursor); cursor = nextCursor; },
  });

  const runNow = h("form", {
    class: "actions", "aria-label": "Job actions",
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
  pauseBtn, resumeBtn, h("span", { class: "spacer" }), editLink, deleteBtn);

  deleteBtn.addEventListener("click", async () => {
    if (!(await confirmAction(`Delete ${name}?`,
      `${name} stops at once: no run of it is scheduled any more and its definition is removed. Its runs stay in the history. This cannot be undone.`,
      "Delete job"))) return;
    try {
      // If-Match: a job someone changed since this page showed it is not deleted unseen.
      await api("DELETE", path, undefined, version ? { "If-Match": `"${version}"` } : undefined);
      navigate("#/", `Deleted ${name}.`);
    } catch (e) {
      if (e.status === 412) say(`Not deleted: someone else changed ${name} since this page showed it; look at it again, then delete it.`, true);
      else sayFailure("Delete job", e);
      refreshNow();
    }
  });

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
    update(badgesEl, kindTag(job), badges(job));
    editLink.hidden = deleteBtn.hidden = !isRuntime(job);
    version = job.version ?? null;
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

// ---- a runtime job's form -------------------------------------------------------------------

const HTTP_METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD"];
const SECRET_HINT = "A secret's NAME, never its value: each replica reads the value from SCHEDULER_SECRET_<NAME>.";
// How long the form waits after the last keystroke before it asks the server for a preview.
const PREVIEW_DEBOUNCE_MS = 700;

// The zones the browser knows, offered as suggestions; the server decides what is valid.
function timeZones() {
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  return zones.includes("UTC") ? zones : ["UTC", ...zones];
}

// parseLines reads "Name: value" (or "key=value") lines into an object; bad lines become errors
// of field, worded as the server words its own.
function parseLines(text, field, seps, what, errors) {
  const out = {};
  const seen = new Map();
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (!line) return;
    const at = Math.min(...seps.map((s) => line.indexOf(s)).filter((n) => n >= 0));
    if (!Number.isFinite(at) || at === 0) {
      errors.push({ field, detail: `line ${i + 1} is not ${what}` });
      return;
    }
    const key = line.slice(0, at).trim();
    const lower = key.toLowerCase();
    if (seen.has(lower)) {
      errors.push({ field, detail: `line ${i + 1} sets ${key} again (line ${seen.get(lower)} set it first)` });
      return;
    }
    seen.set(lower, i + 1);
    out[key] = line.slice(at + 1).trim();
  });
  return out;
}

function wholeNumber(text, field, errors) {
  const t = text.trim();
  if (t === "") return undefined;
  if (!/^\d+$/.test(t)) { errors.push({ field, detail: `“${t}” is not a whole number` }); return undefined; }
  return Number(t);
}

// jobFormPage is the form that creates a runtime job (name null) or replaces one. It sends
// the definition as the API takes it; Preview sends it with ?dry_run=true, which checks it
// and answers the job it would be (its next five runs among the rest) without storing it.
// The server's validation errors name fields by path ("http.url", "http.headers.X-Token"):
// each lands beside the input that fills that path, and those the form has no input for are
// listed at the top.
function jobFormPage(name) {
  const editing = name !== null;
  const path = editing ? `/v1/jobs/${encodeURIComponent(name)}` : "/v1/jobs";
  const fields = new Map(); // definition path -> {path, label, input, hint, err, box, prefix}
  const aliases = new Map(); // further paths whose errors an input shows
  const touched = new Set(); // paths edited since the form opened
  let base = {}; // the definition being edited, so nothing the form does not show is lost
  let version = null;
  let loaded = !editing;
  let saving = false;
  let refused = false; // a read-only token: the server refuses every write, previews included
  let previewSeq = 0;
  let debounce = null;

  function field(path, label, control, opts = {}) {
    const id = "jf-" + path.replace(/[^a-z0-9]+/gi, "-");
    control.id = id;
    control.name = path;
    const hint = opts.hint ? h("p", { class: "hint", id: `${id}-hint` }, opts.hint) : null;
    const err = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
    const f = { path, label, input: control, hint, err, prefix: !!opts.prefix, box: null };
    describe(f, false);
    const check = control.type === "checkbox";
    const lab = h("label", { for: id }, check ? [control, " "] : null, label,
      opts.optional ? h("span", { class: "muted" }, " (optional)") : null);
    f.box = h("div", { class: `field${check ? " check" : ""}${opts.full ? " full" : ""}`, "data-field": path },
      lab, check ? null : control, hint, err);
    fields.set(path, f);
    for (const a of opts.aliases || []) aliases.set(a, f);
    return f.box;
  }

  // describe ties the input to its error (read first) and its hint.
  function describe(f, invalid) {
    const ids = [invalid ? f.err.id : null, f.hint ? f.hint.id : null].filter(Boolean);
    if (ids.length) f.input.setAttribute("aria-describedby", ids.join(" "));
    else f.input.removeAttribute("aria-describedby");
    if (invalid) f.input.setAttribute("aria-invalid", "true");
    else f.input.removeAttribute("aria-invalid");
  }

  const text = (attrs) => h("input", { type: "text", autocomplete: "off", spellcheck: "false", ...attrs });
  const area = (attrs) => h("textarea", { spellcheck: "false", rows: 3, ...attrs });
  const select = (options, attrs) => h("select", attrs || {}, options.map(([v, t]) => h("option", { value: v }, t)));

  const nameIn = text({ required: true, maxlength: 63, readonly: editing || null });
  const scheduleIn = text({ required: true, class: "mono", placeholder: "*/5 * * * *" });
  const tzIn = text({ list: "jf-zones", placeholder: "UTC" });
  const descIn = area({ rows: 2, maxlength: 1000, spellcheck: "true" });
  const labelsIn = area({ rows: 2, class: "mono", placeholder: "team=billing" });
  const kindIn = select([["http", "HTTP call"], ["sql", "SQL statements"]]);
  const enabledIn = h("input", { type: "checkbox", checked: true });
  const timeoutIn = text({ placeholder: "1m", class: "short" });
  const overlapIn = select([["skip", "skip the slot"], ["queue-one", "queue one run behind it"]]);
  const methodIn = select(HTTP_METHODS.map((m) => [m, m]));
  const urlIn = h("input", { type: "url", autocomplete: "off", spellcheck: "false", class: "mono", placeholder: "https://billing.internal/reports/daily" });
  const headersIn = area({ class: "mono", placeholder: "Content-Type: application/json" });
  const bodyIn = area({ class: "mono", rows: 4 });
  const authIn = select([["", "none"], ["bearer", "bearer token (Authorization: Bearer …)"], ["header", "a header of your choice"]]);
  const authHeaderIn = text({ placeholder: "X-Api-Key" });
  const authSecretIn = text({ class: "mono", placeholder: "BILLING_TOKEN" });
  const signingIn = text({ class: "mono", placeholder: "BILLING_SIGNING" });
  const successIn = text({ placeholder: "any 2xx", inputmode: "numeric" });
  const attemptsIn = text({ placeholder: "3", inputmode: "numeric", class: "short" });
  const attemptTimeoutIn = text({ placeholder: "30s", class: "short" });
  const initialBackoffIn = text({ placeholder: "1s", class: "short" });
  const maxBackoffIn = text({ placeholder: "1m", class: "short" });
  const sqlTargetIn = text({ class: "mono short", placeholder: "APP" });
  const statementsIn = area({ class: "mono", rows: 6, placeholder: "REFRESH MATERIALIZED VIEW daily_totals" });
  const catchupIn = text({ placeholder: "one period", class: "short" });
  const minGapIn = text({ placeholder: "0s", class: "short" });
  const jitterIn = text({ placeholder: "0s", class: "short" });
  const pauseAfterIn = text({ placeholder: "0", inputmode: "numeric", class: "short" });

  const authHeaderBox = field("http.auth.header", "Header name", authHeaderIn, { hint: "The header that carries the secret's value." });
  const authSecretBox = field("http.auth.bearer_secret", "Secret name", authSecretIn, { hint: SECRET_HINT, aliases: ["http.auth.header_secret"] });
  const httpSet = h("fieldset", { class: "kind-fields", id: "jf-http" }, h("legend", {}, "HTTP call"),
    h("div", { class: "grid" },
      field("http.method", "Method", methodIn),
      field("http.url", "URL", urlIn, { full: true, hint: "http:// or https://. Private and loopback addresses are refused unless an operator allows them (SCHEDULER_HTTP_ALLOW)." }),
      field("http.headers", "Headers", headersIn, { full: true, optional: true, prefix: true,
        hint: "One per line, as Name: value. No credentials here: headers are stored and shown as written; use Authentication below." }),
      field("http.body", "Body", bodyIn, { full: true, optional: true }),
      field("http.auth", "Authentication", authIn, { prefix: true }),
      authHeaderBox, authSecretBox,
      field("http.signing_secret", "Signing secret name", signingIn, { optional: true,
        hint: "Signs each call as Standard Webhooks do. " + SECRET_HINT }),
      field("http.success", "Success statuses", successIn, { optional: true, hint: "e.g. 200, 204. Empty: any 2xx status." }),
      field("retry.max_attempts", "Attempts", attemptsIn, { aliases: ["retry"], hint: "Calls per run, the first included; 1: no retry. Empty: 3." }),
      field("retry.initial_backoff", "First retry after", initialBackoffIn, { hint: "Doubles at each retry. Empty: 1s." }),
      field("retry.max_backoff", "Longest wait", maxBackoffIn, { hint: "Empty: 1m." }),
      field("http.timeout", "Attempt timeout", attemptTimeoutIn, { hint: "One call's limit. Empty: 30s, or the job's timeout if shorter." })));
  const sqlSet = h("fieldset", { class: "kind-fields", id: "jf-sql", hidden: true }, h("legend", {}, "SQL statements"),
    h("div", { class: "grid" },
      field("sql.target", "Target", sqlTargetIn, { hint: "The database and login an operator declared for SQL jobs (SCHEDULER_SQL_TARGET_<NAME>), such as APP." }),
      field("sql.statements", "Statements", statementsIn, { full: true,
        hint: "Run in the target with its login, in one transaction; each slot commits once." })));
  const more = h("details", { class: "more" }, h("summary", {}, "More settings: catch-up, gap, jitter, automatic pause"),
    h("div", { class: "grid" },
      field("catchup", "Catch-up window", catchupIn, { hint: "Slots missed while no replica led run late if still this recent; 0s: never. Empty: one period of the schedule." }),
      field("min_gap", "Minimum gap", minGapIn, { hint: "The least time between the end of a run and the start of the next." }),
      field("jitter", "Jitter", jitterIn, { hint: "Spreads the calls of jobs on the same slot: each starts at a fixed offset below this." }),
      field("pause_after_failures", "Pause after failures", pauseAfterIn, { hint: "Pause the job after this many failed runs in a row. Empty or 0: never." })));

  const problems = h("div", { class: "form-problems", id: "form-problems", tabindex: "-1", hidden: true });
  const previewBtn = h("button", { type: "button", id: "preview-btn" }, "Preview");
  const saveBtn = h("button", { type: "submit", class: "primary", id: "save", "aria-disabled": loaded ? "false" : "true" }, editing ? "Save changes" : "Create job");
  const previewStatus = h("p", { id: "preview-status", role: "status" },
    "Preview checks the job on the server and shows its next runs; nothing is saved.");
  const previewEl = h("div", { id: "preview" });

  const form = h("form", { class: "job-form", novalidate: true, "aria-labelledby": "form-h" },
    problems,
    h("div", { class: "grid" },
      field("name", "Name", nameIn, { hint: editing
        ? "A job's name cannot change: to rename it, create a job under the new name and delete this one."
        : "1 to 63 lower-case letters, digits and -, e.g. daily-report." }),
      field("kind", "Kind", kindIn, { aliases: ["http", "sql"] }),
      field("schedule", "Schedule", scheduleIn, { hint: "Cron (\"0 2 * * *\"; 6 fields with seconds first), \"@every 10m\", or \"@at 2026-12-01T09:00:00Z\" for one run; several separated by \";\" run at each." }),
      field("time_zone", "Time zone", tzIn, { optional: true, hint: "The zone of the schedule's times, e.g. Europe/Paris. Empty: UTC." }),
      field("description", "Description", descIn, { full: true, optional: true }),
      field("labels", "Labels", labelsIn, { optional: true, prefix: true, hint: "One per line, key=value. The overview's filter finds jobs by them." }),
      field("timeout", "Timeout", timeoutIn, { hint: "A run's limit, every attempt included. Empty: 1m." }),
      field("overlap", "When a slot comes while a run is still running", overlapIn),
      field("enabled", "Enabled: its slots run", enabledIn, { hint: "Unchecked, the job is kept but does not run." })),
    httpSet, sqlSet, more,
    h("datalist", { id: "jf-zones" }, timeZones().map((z) => h("option", { value: z }))),
    h("div", { class: "buttons form-buttons" },
      h("a", { href: editing ? `#/jobs/${encodeURIComponent(name)}` : "#/", class: "button" }, "Cancel"),
      previewBtn, saveBtn));

  replace(main,
    h("p", {}, editing ? h("a", { href: `#/jobs/${encodeURIComponent(name)}` }, `← ${name}`) : h("a", { href: "#/" }, "← Overview")),
    h("h1", { tabindex: "-1", id: "form-h" }, editing ? `Edit ${name}` : "New job"),
    h("div", { class: "editor" }, form,
      h("aside", { class: "preview", "aria-labelledby": "preview-h" }, h("h2", { id: "preview-h" }, "Preview"), previewStatus, previewEl)));

  function showKind() {
    httpSet.hidden = kindIn.value !== "http";
    sqlSet.hidden = kindIn.value !== "sql";
    authHeaderBox.hidden = authIn.value !== "header";
    authSecretBox.hidden = authIn.value === "";
  }
  kindIn.addEventListener("change", showKind);
  authIn.addEventListener("change", showKind);

  function fill(d) {
    base = d;
    nameIn.value = d.name || "";
    scheduleIn.value = Array.isArray(d.schedule) ? d.schedule.join("; ") : d.schedule || "";
    tzIn.value = d.time_zone || "";
    descIn.value = d.description || "";
    labelsIn.value = Object.keys(d.labels || {}).sort().map((k) => `${k}=${d.labels[k]}`).join("\n");
    kindIn.value = d.sql ? "sql" : "http";
    enabledIn.checked = d.enabled !== false;
    timeoutIn.value = d.timeout || "";
    overlapIn.value = d.overlap || "skip";
    catchupIn.value = d.catchup || "";
    minGapIn.value = d.min_gap || "";
    jitterIn.value = d.jitter || "";
    pauseAfterIn.value = d.pause_after_failures ? String(d.pause_after_failures) : "";
    const hp = d.http || {};
    methodIn.value = hp.method || "POST";
    urlIn.value = hp.url || "";
    headersIn.value = Object.keys(hp.headers || {}).sort().map((k) => `${k}: ${hp.headers[k]}`).join("\n");
    bodyIn.value = hp.body || "";
    const auth = hp.auth || {};
    authIn.value = auth.bearer_secret ? "bearer" : auth.header ? "header" : "";
    authHeaderIn.value = auth.header || "";
    authSecretIn.value = auth.bearer_secret || auth.header_secret || "";
    signingIn.value = hp.signing_secret || "";
    successIn.value = (hp.success || []).join(", ");
    attemptTimeoutIn.value = hp.timeout || "";
    const r = d.retry || {};
    attemptsIn.value = r.max_attempts ? String(r.max_attempts) : "";
    initialBackoffIn.value = r.initial_backoff || "";
    maxBackoffIn.value = r.max_backoff || "";
    sqlTargetIn.value = (d.sql && d.sql.target) || "";
    statementsIn.value = (d.sql && d.sql.statements) || "";
    if (d.catchup || d.min_gap || d.jitter || d.pause_after_failures) more.open = true;
    showKind();
  }

  // readForm builds the definition the API takes; what cannot be parsed here (a header line
  // without a colon) comes back as errors worded as the server's.
  function readForm() {
    const errors = [];
    const d = structuredClone(base);
    const set = (obj, k, v) => { if (v === undefined || v === "") delete obj[k]; else obj[k] = v; };
    d.name = nameIn.value.trim();
    // A list of schedules is written with ";" between them, which no cron expression holds.
    const specs = scheduleIn.value.split(";").map((x) => x.trim()).filter(Boolean);
    d.schedule = specs.length > 1 ? specs : scheduleIn.value.trim();
    set(d, "time_zone", tzIn.value.trim());
    set(d, "description", descIn.value.trim());
    const labels = parseLines(labelsIn.value, "labels", ["=", ":"], "key=value", errors);
    set(d, "labels", Object.keys(labels).length ? labels : undefined);
    d.enabled = enabledIn.checked;
    set(d, "timeout", timeoutIn.value.trim());
    d.overlap = overlapIn.value;
    set(d, "catchup", catchupIn.value.trim());
    set(d, "min_gap", minGapIn.value.trim());
    set(d, "jitter", jitterIn.value.trim());
    set(d, "pause_after_failures", wholeNumber(pauseAfterIn.value, "pause_after_failures", errors));
    if (kindIn.value === "http") {
      delete d.sql;
      const hp = { ...(d.http || {}) };
      hp.method = methodIn.value;
      hp.url = urlIn.value.trim();
      const headers = parseLines(headersIn.value, "http.headers", [":"], "Name: value", errors);
      set(hp, "headers", Object.keys(headers).length ? headers : undefined);
      set(hp, "body", bodyIn.value);
      set(hp, "timeout", attemptTimeoutIn.value.trim());
      const secret = authSecretIn.value.trim();
      if (authIn.value === "bearer") hp.auth = { bearer_secret: secret };
      else if (authIn.value === "header") hp.auth = { header: authHeaderIn.value.trim(), header_secret: secret };
      else delete hp.auth;
      set(hp, "signing_secret", signingIn.value.trim());
      const success = [];
      for (const s of successIn.value.split(/[\s,]+/).filter(Boolean)) {
        if (/^\d+$/.test(s)) success.push(Number(s));
        else errors.push({ field: "http.success", detail: `“${s}” is not a status: write numbers such as 200, 204` });
      }
      set(hp, "success", success.length ? success : undefined);
      d.http = hp;
      const attempts = wholeNumber(attemptsIn.value, "retry.max_attempts", errors);
      const initial = initialBackoffIn.value.trim();
      const longest = maxBackoffIn.value.trim();
      if (attempts === undefined && !initial && !longest) delete d.retry;
      else {
        d.retry = { max_attempts: attempts ?? 3 };
        set(d.retry, "initial_backoff", initial);
        set(d.retry, "max_backoff", longest);
      }
    } else {
      delete d.http;
      delete d.retry; // a SQL job commits once: it has no retries
      d.sql = { target: sqlTargetIn.value.trim(), statements: statementsIn.value };
    }
    return { def: d, errors };
  }

  // fieldFor finds the input that shows the errors of path, and what of the path it leaves
  // unsaid ("X-Token" of "http.headers.X-Token"); null when no input shows it now.
  function fieldFor(p) {
    let hit = fields.get(p) || aliases.get(p) ? { f: fields.get(p) || aliases.get(p), rest: "" } : null;
    if (!hit) {
      for (const f of fields.values()) if (f.prefix && p.startsWith(f.path + ".")) hit = { f, rest: p.slice(f.path.length + 1) };
    }
    if (!hit && /^schedule\[\d+\]$/.test(p) && fields.get("schedule")) hit = { f: fields.get("schedule"), rest: p };
    if (hit && hit.f.box.closest("[hidden]")) return null;
    return hit;
  }

  function clearErrors() {
    for (const f of fields.values()) {
      f.err.hidden = true;
      f.err.textContent = "";
      describe(f, false);
    }
    problems.hidden = true;
    replace(problems);
  }

  // showErrors puts each error beside its input and the others at the top. only, when set,
  // keeps those of the fields it names (a preview while typing shows no error yet about a
  // field not filled in). Returns how many it showed.
  function showErrors(list, only) {
    // What is already shown stays shown until fixed, touched or not.
    const shown = new Set([...fields.values()].filter((f) => !f.err.hidden).map((f) => f.path));
    const topShown = !problems.hidden;
    clearErrors();
    const byField = new Map();
    const top = [];
    for (const e of list) {
      const detail = e.detail || e.message || "is invalid";
      const hit = fieldFor(e.field || "");
      if (hit && only && !only.has(hit.f.path) && !shown.has(hit.f.path)) continue;
      if (!hit && only && !topShown) continue;
      if (!hit) { top.push(e); continue; }
      if (!byField.has(hit.f)) byField.set(hit.f, []);
      byField.get(hit.f).push(hit.rest ? `${hit.rest}: ${detail}` : detail);
    }
    for (const [f, msgs] of byField) {
      f.err.textContent = `✗ ${msgs.join(" · ")}`;
      f.err.hidden = false;
      describe(f, true);
      const d = f.box.closest("details");
      if (d) d.open = true;
    }
    // In the order they appear, as the focus will go through them.
    const marked = [...fields.values()].filter((f) => byField.has(f)).sort((a, b) =>
      a.input.compareDocumentPosition(b.input) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1);
    if (top.length || marked.length) {
      problems.hidden = false;
      const n = top.length + [...byField.values()].reduce((a, m) => a + m.length, 0);
      replace(problems,
        h("h2", {}, n === 1 ? "1 problem to fix" : `${n} problems to fix`),
        top.length ? h("ul", { id: "form-problems-top" }, top.map((e) =>
          h("li", {}, e.field ? [h("code", {}, e.field), ": "] : null, e.detail || e.message || ""))) : null,
        marked.length ? h("p", {}, top.length ? "And beside their fields: " : "Beside their fields: ",
          marked.map((f, i) => [i ? ", " : "", h("a", {
            href: `#${f.input.id}`, onclick: (ev) => { ev.preventDefault(); f.input.focus(); },
          }, f.label)]), ".") : null);
    }
    return top.length + byField.size;
  }

  // problem shows one message at the top, for a refusal that is about no field.
  function problem(text, extra) {
    clearErrors();
    problems.hidden = false;
    replace(problems, h("p", {}, `✗ ${text}`), extra || null);
  }

  function ifMatch() { return editing && version !== null ? { "If-Match": `"${version}"` } : undefined; }

  function showPreview(v) {
    const next = v.next_runs || [];
    update(previewStatus, `✓ The server accepts this job${editing ? "" : "; it is not created until you save it"}.`);
    replace(previewEl,
      h("dl", { class: "facts" },
        h("dt", {}, "When"), h("dd", { id: "preview-when" }, v.schedule_text || v.schedule),
        h("dt", {}, "Target"), h("dd", { class: "mono target" }, v.target || "—")),
      h("h3", {}, "Next five runs"),
      next.length
        ? h("ol", { class: "next-runs", id: "preview-runs" }, next.map((t) => h("li", {}, when(t), dstNote(v, t))))
        : h("p", { class: "muted" }, v.enabled === false ? "None: the job would be disabled." : "None to come."),
      clockChanges(v));
  }

  // failure shows why the server refused a preview or a save. A save's failure moves the
  // focus to what needs fixing: the first marked input, else the list at the top.
  function failure(e, what, focus, auto) {
    let marked = 0;
    if (e.status === 409 && e.body && String(e.body.type || "").endsWith("/job-exists") && !(e.body.errors || []).length) {
      e.body.errors = [{ field: "name", detail: e.body.detail || e.body.title }];
    }
    if ((e.status === 422 || e.status === 409 || e.status === 400) && e.body && Array.isArray(e.body.errors) && e.body.errors.length) {
      marked = showErrors(e.body.errors, auto ? touched : null);
      const n = e.body.errors.length;
      update(previewStatus, `✗ ${n === 1 ? "1 problem" : `${n} problems`}: ${auto && !marked ? "Preview lists them" : "see the marked fields"}.`);
    } else if (e.status === 412) {
      const reload = h("button", { type: "button", id: "reload-job", onclick: () => { loaded = false; refreshNow(); } }, "Reload the job");
      problem(`Someone else changed this job since you opened it; reload it to see their version, then make your changes again. ${what} did nothing.`, reload);
      update(previewStatus, "✗ Someone else changed this job.");
    } else if (e.status === 403) {
      refused = true;
      problem(`Refused: ${e.message}`);
      update(previewStatus, "✗ Refused.");
    } else if (e.status !== 401) {
      problem(`${what} failed — ${e.message}`);
      update(previewStatus, `✗ ${what} failed.`);
    }
    if (e.status === 422 || e.status === 412 || e.status === 403) replace(previewEl);
    if (focus) {
      const first = form.querySelector('[aria-invalid="true"]');
      (first || problems).focus();
    }
  }

  async function preview(auto) {
    clearTimeout(debounce);
    if (!loaded) return;
    const { def, errors } = readForm();
    const seq = ++previewSeq;
    if (errors.length) {
      showErrors(errors, auto ? touched : null);
      update(previewStatus, `✗ ${errors.length === 1 ? "1 problem" : `${errors.length} problems`}: see the marked fields.`);
      return;
    }
    if (!auto) update(previewStatus, "Checking…");
    try {
      const res = editing
        ? await api("PUT", `${path}?dry_run=true`, def, ifMatch())
        : await api("POST", "/v1/jobs?dry_run=true", def);
      if (seq !== previewSeq) return; // an older answer than the one shown
      clearErrors();
      showPreview(res.data);
    } catch (e) {
      if (seq === previewSeq) failure(e, "Preview", false, auto);
    }
  }

  async function save() {
    clearTimeout(debounce);
    if (!loaded || saving) return;
    previewSeq++; // a preview still on its way would only repeat what this says
    const { def, errors } = readForm();
    if (errors.length) {
      showErrors(errors, null);
      (form.querySelector('[aria-invalid="true"]') || problems).focus();
      return;
    }
    saving = true;
    usable(saveBtn, false);
    try {
      const res = editing ? await api("PUT", path, def, ifMatch()) : await api("POST", path, def);
      const v = res.data && res.data.version;
      navigate(`#/jobs/${encodeURIComponent(def.name)}`,
        editing ? `Saved ${def.name}${v ? ` (version ${v})` : ""}.` : `Created ${def.name}.`);
    } catch (e) {
      failure(e, editing ? "Saving" : "Creating the job", true, false);
    } finally {
      saving = false;
      usable(saveBtn, loaded);
    }
  }

  form.addEventListener("submit", (ev) => { ev.preventDefault(); save(); });
  previewBtn.addEventListener("click", () => preview(false));
  const edited = (ev) => {
    const box = ev.target.closest && ev.target.closest("[data-field]");
    if (box) touched.add(box.dataset.field);
    clearTimeout(debounce);
    if (!refused) debounce = setTimeout(() => preview(true), PREVIEW_DEBOUNCE_MS);
  };
  form.addEventListener("input", edited);
  form.addEventListener("change", edited);
  showKind();

  // The form is filled once; refreshing it would overwrite what is being typed. Reload
  // (after a 412) fills it again from the server.
  async function refresh() {
    if (loaded) return;
    const { data: job } = await api("GET", path);
    if (!isRuntime(job)) {
      replace(main, h("p", {}, h("a", { href: `#/jobs/${encodeURIComponent(name)}` }, `← ${name}`)),
        h("h1", { tabindex: "-1" }, `${name} cannot be edited`),
        h("p", {}, `${name} is a built-in job: its definition is compiled into the scheduler. Its schedule, timeout and catch-up are set with SCHEDULER_JOB_<NAME>_* variables on the replicas.`));
      loaded = true;
      return;
    }
    version = job.version ?? null;
    clearErrors();
    replace(previewEl);
    update(previewStatus, `Version ${version ?? "?"} as stored. Preview checks your changes; nothing is saved until you save.`);
    fill(job.definition || {});
    loaded = true;
    usable(saveBtn, true);
  }
  return { refresh, live: () => false };
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

// attemptsView lists an HTTP job's calls. A response body is whatever the target sent,
// HTML and script included: it is shown as the text of a <pre>, never parsed as markup.
function attemptsView(attempts) {
  if (!attempts || !attempts.length) return null;
  const dt = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
  const outcome = (a) => {
    if (a.status_code === null || a.status_code === undefined) return h("span", { class: "status s-failed" }, "✗ no answer");
    const ok = a.status_code >= 200 && a.status_code < 300 && !a.error;
    return h("span", { class: `status ${ok ? "s-succeeded" : "s-failed"}` }, `${ok ? "✓" : "✗"} HTTP ${a.status_code}`);
  };
  return [
    h("h2", { id: "attempts-h" }, `Attempts (${attempts.length})`),
    h("ol", { class: "attempts", id: "attempts", "aria-labelledby": "attempts-h" }, attempts.map((a) =>
      h("li", { class: "attempt", "data-key": a.attempt, "data-attempt": a.attempt },
        h("h3", {}, `Attempt ${a.attempt} `, outcome(a)),
        h("dl", { class: "facts" },
          dt("Started", when(a.started_at)),
          dt("Duration", duration(a.duration_ms)),
          a.error ? dt("Error", h("span", { class: "attempt-error" }, a.error)) : null),
        a.body
          ? [h("p", { class: "muted body-h", id: `attempt-${a.attempt}-body` }, `Response body of attempt ${a.attempt} (its first 4 KiB)`),
            // A region of its own: it scrolls, so the keyboard must reach it.
            h("div", { class: "body-wrap", role: "region", tabindex: "0", "aria-labelledby": `attempt-${a.attempt}-body` },
              h("pre", { class: "body" }, a.body))]
          : h("p", { class: "muted" }, "No response body.")))),
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
        dt("Recovers", r.recovers_run_id ? h("a", { href: `#/runs/${r.recovers_run_id}` }, `run #${r.recovers_run_id}`) : "—"),
        r.definition_version ? dt("Definition", `version ${r.definition_version}`) : null),
      r.error ? [h("h2", {}, "Error"), h("pre", { id: "run-error" }, r.error)] : null,
      attemptsView(r.attempts),
      h("h2", {}, "Counts"), statsView(r.stats));
  }
  // A finished run never changes again: its page stops asking.
  return { refresh, live: () => active };
}

// ---- locks and audit ----------------------------------------------------------------------

function locksPage() {
  const body = h("div");
  replace(main, h("h1", { tabindex: "-1" }, "Locks"),
    h("p", { class: "muted" }, "Locks held or awaited now: advisory locks, and the scheduler's own row locks (table scheduler_locks). Per-entity and row locks are transaction-scoped and go with their transaction; the leader lock goes with its session. Nothing here needs releasing by hand: step the leader down or cancel a run instead."),
    body);
  async function refresh() {
    const { data } = await api("GET", "/v1/locks");
    update(body, table("stack locks", ["Lock", "Held", "Instance", "PID", "Since", "Key"], data.locks.map((l) =>
      h("tr", { "data-key": `${l.kind}:${l.pid}:${l.key || l.name}:${l.granted}` },
        td("Lock", l.name ? h("strong", {}, l.name) : "per-entity", l.meaning ? h("div", { class: "muted" }, l.meaning) : null),
        td("Held", l.granted ? "held" : "waiting"),
        td("Instance", h("span", { class: "mono" }, l.instance_id || l.application_name || "—")),
        td("PID", l.pid),
        td("Since", when(l.since)),
        td("Key", l.key ? h("span", { class: "mono" }, l.key) : "row"))), "No lock is held or awaited."));
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
    h("p", { class: "muted" }, "Every action taken through the API or this dashboard: runs triggered and cancelled, jobs created, changed, deleted, paused and resumed, leaders stepped down."),
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
