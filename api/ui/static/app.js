// The scheduler's dashboard: a few pages over the public /v1 API, no framework and no build.
//
// Pages are hash routes (#/, #/jobs/NAME, #/runs/ID, #/locks, #/audit) so every link is a
// real link and the server serves one file. Each page renders its controls once and then
// refreshes only its data every second while the tab is visible, so a run finishing or a
// new leader shows within two seconds without losing what the operator is typing. A refresh
// patches the page in place (patch): nodes that did not change stay, so keyboard focus and
// a screen reader's place survive it.
//
// The API token, when the server wants one, is asked for in the page and kept in
// sessionStorage: it lives as long as the tab, and no cookie exists that another site could
// make the browser send.
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
let page = null; // the current page: {refresh(), stop?()}
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
    // no-cache: the browser revalidates its copy (If-None-Match) and the replica answers 304
    // without a body when nothing changed, which is most polls.
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
    if (k.startsWith("on")) el[k] = v; // a property, which patch carries over to a kept node
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function nodes(children) {
  return children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c))));
}

// replace builds el's content anew: for a page's first render.
function replace(el, ...children) { el.replaceChildren(...nodes(children)); }

// patch makes el's content look like children while keeping every node that is the same as
// before (same tag, and same key: id, data-job or data-run), updating its attributes, text
// and handlers: a refresh that changed nothing touches nothing, and the control that has
// focus keeps it.
function patch(el, ...children) { morphChildren(el, nodes(children)); }

const HANDLERS = ["onclick", "onsubmit", "onchange", "oninput"];

function keyOf(n) {
  return n.nodeType === Node.ELEMENT_NODE ? n.nodeName + "#" + (n.id || n.dataset.job || n.dataset.run || "") : "";
}

function morphChildren(parent, next) {
  const keyed = new Map();
  for (const c of parent.childNodes) if (keyOf(c).length > c.nodeName.length + 1) keyed.set(keyOf(c), c);
  let cur = parent.firstChild;
  for (const n of next) {
    const k = keyOf(n);
    let o = null;
    if (k.length > n.nodeName.length + 1) o = keyed.get(k) || null;
    else if (cur && cur.nodeName === n.nodeName && keyOf(cur) === k) o = cur;
    if (!o) { parent.insertBefore(n, cur); continue; }
    keyed.delete(k);
    morph(o, n);
    if (o === cur) cur = cur.nextSibling;
    else parent.insertBefore(o, cur);
  }
  while (cur) { const rest = cur.nextSibling; cur.remove(); cur = rest; }
}

function morph(o, n) {
  if (o.nodeType !== Node.ELEMENT_NODE) {
    if (o.nodeValue !== n.nodeValue) o.nodeValue = n.nodeValue;
    return;
  }
  for (const a of [...o.attributes]) if (!n.hasAttribute(a.name)) o.removeAttribute(a.name);
  for (const a of n.attributes) if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
  for (const ev of HANDLERS) if (o[ev] !== n[ev]) o[ev] = n[ev];
  morphChildren(o, [...n.childNodes]);
}

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
  return h("time", { datetime: iso, title: iso }, absTime(iso), h("span", { class: "muted" }, ` (${relTime(iso)})`));
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
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

// refocus gives focus back to the control that opened a dialog once the page has caught up
// with the action, or, when the action disabled it (Pause), to fallback.
function refocus(opener, fallback) {
  const target = opener && opener.isConnected && !opener.disabled ? opener : fallback;
  if (target && target.isConnected && !target.disabled) target.focus();
}

// act runs an action after confirmation and says what happened; a refusal (read-only token:
// 403) is shown as such, with the server's own title and detail.
async function act(title, text, okLabel, fn, fallback) {
  const opener = document.activeElement;
  if (!(await confirmAction(title, text, okLabel))) { refocus(opener); return; }
  try {
    const msg = await fn();
    say(msg, false);
  } catch (e) {
    if (e.status === 403) say(`Refused: ${okLabel} — ${e.message}`, true);
    else if (e.status !== 401) say(`Failed: ${okLabel} — ${e.message}`, true);
  }
  await refreshNow();
  refocus(opener, fallback && fallback());
}

// ---- token --------------------------------------------------------------------------------

function renderSession() {
  const el = document.getElementById("session");
  if (sessionStorage.getItem(TOKEN_KEY)) {
    replace(el, "Using an API token for this tab · ",
      h("button", { type: "button", onclick: () => { sessionStorage.removeItem(TOKEN_KEY); start(); } }, "Forget token"));
  } else {
    replace(el);
  }
}

function askToken(why) {
  stopTimer();
  page = null;
  if (main.dataset.view === "token") return; // already asking: keep what is being typed
  main.dataset.view = "token";
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true, size: 40 });
  replace(main,
    h("h1", {}, "API token"),
    h("p", {}, why),
    h("p", { class: "muted" }, "The token (SCHEDULER_API_TOKEN, or the read-only SCHEDULER_API_READ_TOKEN) is kept for this tab only and sent as an Authorization header; closing the tab forgets it."),
    h("form", {
      class: "actions", onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        delete main.dataset.view;
        renderSession();
        route();
      },
    }, h("label", { for: "token" }, "Token", input), h("button", { class: "primary", type: "submit", id: "use-token" }, "Use token")));
  input.focus();
}

// ---- overview -----------------------------------------------------------------------------

function overviewPage() {
  const leaderEl = h("section", { "aria-labelledby": "leader-h" });
  const instancesEl = h("div");
  const jobsEl = h("div");
  replace(main,
    h("h1", {}, "Overview"),
    leaderEl,
    h("h2", { id: "jobs-h" }, "Jobs"), jobsEl,
    h("h2", {}, "Instances"), instancesEl);
  const strips = new Map(); // job -> {key, runs}

  async function loadStrip(job) {
    const key = job.last_run ? `${job.last_run.id}:${job.last_run.status}` : "";
    const cached = strips.get(job.name);
    if (cached && cached.key === key) return;
    const { data } = await api("GET", `/v1/jobs/${encodeURIComponent(job.name)}/runs?limit=${STRIP_LEN}`);
    strips.set(job.name, { key, runs: data.runs });
  }

  function strip(name) {
    const s = strips.get(name);
    if (!s) return h("span", { class: "muted" }, "…");
    if (!s.runs.length) return h("span", { class: "muted" }, "no runs yet");
    const counts = {};
    for (const r of s.runs) counts[r.status] = (counts[r.status] || 0) + 1;
    const summary = Object.entries(counts).map(([k, v]) => `${v} ${k.replace("_", " ")}`).join(", ");
    // Oldest on the left, as time reads.
    // Out of the tab order (twenty stops a row would drown the page's controls), but each
    // run is a link a screen reader lists and reads by its label.
    const cells = [...s.runs].reverse().map((r) =>
      h("a", { href: `#/runs/${r.id}`, class: `s-${r.status}`, title: `run ${r.id}: ${r.status}`, "aria-label": `run ${r.id}: ${r.status.replace("_", " ")}`, tabindex: "-1" }, SYMBOL[r.status] || "?"));
    return h("span", { class: "strip", role: "group", "aria-label": `last ${s.runs.length} runs: ${summary}` }, cells);
  }

  async function refresh() {
    const [leader, instances, jobs] = await Promise.allSettled([
      api("GET", "/v1/leader"), api("GET", "/v1/instances"), api("GET", "/v1/jobs")]);
    if (jobs.status === "rejected") throw jobs.reason;

    const l = leader.status === "fulfilled" ? leader.value.data : null;
    patch(leaderEl,
      h("h2", { id: "leader-h" }, "Leader"),
      l ? h("p", { id: "leader" },
        h("strong", { class: "mono" }, l.instance_id), h("span", { class: "badge leader" }, "leader"),
        ` · epoch ${l.epoch} · since `, when(l.since))
        : h("p", { id: "leader" }, "No leader elected yet: no job runs until a replica is elected."),
      h("button", {
        type: "button", class: "danger", id: "step-down", disabled: !l,
        onclick: () => act("Step down the leader?",
          `${l.instance_id} resigns at once, as on shutdown; a waiting replica takes over and ${l.instance_id} stays up as a follower. Its running jobs are cancelled and recovered by the next leader.`,
          "Step down",
          async () => { await api("POST", "/v1/leader/step-down"); return `Asked ${l.instance_id} to step down.`; }),
      }, "Step down"));

    const js = jobs.value.data.jobs;
    await Promise.allSettled(js.map(loadStrip));
    patch(jobsEl, table("stack jobs", ["Job", "Schedule", "Next run", "Last run", "Last 20"], js.map((j) =>
      h("tr", { "data-job": j.name },
        td("Job", h("a", { href: `#/jobs/${encodeURIComponent(j.name)}` }, j.name), badges(j)),
        td("Schedule", j.schedule_text, h("div", { class: "muted mono" }, j.schedule)),
        td("Next run", j.next_run_at ? when(j.next_run_at) : h("span", { class: "muted" }, j.paused ? "paused" : j.enabled ? "—" : "disabled")),
        td("Last run", j.last_run
          ? [h("a", { href: `#/runs/${j.last_run.id}` }, status(j.last_run.status)), " ", h("span", { class: "muted" }, duration(j.last_run.duration_ms))]
          : h("span", { class: "muted" }, "never")),
        td("Last 20", strip(j.name))))));

    const list = instances.status === "fulfilled" ? instances.value.data.instances : [];
    patch(instancesEl, table("stack", ["Instance", "Host", "Version", "Address", "Started", "Last heartbeat"], list.map((i) =>
      h("tr", {},
        td("Instance", h("span", { class: "mono" }, i.instance_id), i.is_leader ? h("span", { class: "badge leader" }, "leader") : null,
          i.is_self ? h("span", { class: "muted" }, " (this page's replica)") : null),
        td("Host", i.host), td("Version", i.version), td("Address", i.http_addr || "—"),
        td("Started", when(i.started_at)), td("Last heartbeat", when(i.last_seen_at)))), "No instance has reported yet."));
  }
  return { refresh };
}

// ---- job ----------------------------------------------------------------------------------

function jobPage(name) {
  const path = `/v1/jobs/${encodeURIComponent(name)}`;
  const head = h("div");
  const facts = h("div");
  const historyEl = h("div");
  const pager = h("div", { class: "pager" });
  const statusSel = h("select", { id: "f-status", name: "status" }, h("option", { value: "" }, "any"), STATUSES.map((s) => h("option", { value: s }, s)));
  const triggerSel = h("select", { id: "f-trigger", name: "trigger" }, h("option", { value: "" }, "any"), TRIGGERS.map((s) => h("option", { value: s }, s)));
  const reason = h("input", { type: "text", id: "reason", name: "reason", maxlength: 500, placeholder: "why (kept in the audit log)" });
  const dry = h("input", { type: "checkbox", id: "dry-run", name: "dry_run" });
  const pauseBtn = h("button", { type: "button", id: "pause" }, "Pause");
  const resumeBtn = h("button", { type: "button", id: "resume" }, "Resume");
  let cursors = []; // cursors of the pages before the one shown; [] = newest page (live)
  let cursor = null;
  let job = null;

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

  pauseBtn.addEventListener("click", () => act(`Pause ${name}?`,
    "Scheduled and catch-up runs stop until it is resumed; Run now still works.", "Pause",
    async () => { await api("POST", `${path}/pause`); return `${name} is paused.`; }, () => resumeBtn));
  resumeBtn.addEventListener("click", () => act(`Resume ${name}?`,
    "Scheduled runs start again from the next slot.", "Resume",
    async () => { await api("POST", `${path}/resume`); return `${name} is resumed.`; }, () => pauseBtn));

  const onFilter = () => { cursors = []; cursor = null; refreshNow(); };
  statusSel.addEventListener("change", onFilter);
  triggerSel.addEventListener("change", onFilter);

  patch(head, h("h1", {}, name));
  replace(main,
    h("p", {}, h("a", { href: "#/" }, "← Overview")),
    head, runNow, facts,
    h("h2", { id: "history-h" }, "History"),
    h("div", { class: "filters", role: "group", "aria-labelledby": "history-h" },
      h("label", { for: "f-status" }, "Status", statusSel),
      h("label", { for: "f-trigger" }, "Trigger", triggerSel)),
    historyEl, pager);

  async function refresh() {
    const q = new URLSearchParams({ limit: "25" });
    if (statusSel.value) q.set("status", statusSel.value);
    if (triggerSel.value) q.set("trigger", triggerSel.value);
    if (cursor) q.set("cursor", cursor);
    const [j, runs] = await Promise.all([api("GET", path), api("GET", `${path}/runs?${q}`)]);
    job = j.data;
    patch(head, h("h1", {}, name, badges(job)));
    pauseBtn.disabled = job.paused;
    resumeBtn.disabled = !job.paused;
    patch(facts, h("div", { class: "cards" },
      h("div", { class: "card" }, h("h2", {}, "Schedule"),
        h("dl", { class: "facts" },
          h("dt", {}, "When"), h("dd", { id: "schedule-text" }, job.schedule_text),
          h("dt", {}, "Expression"), h("dd", { class: "mono" }, job.schedule),
          h("dt", {}, "Time zone"), h("dd", {}, job.time_zone),
          h("dt", {}, "Timeout"), h("dd", {}, job.timeout),
          h("dt", {}, "Catch-up window"), h("dd", {}, job.catchup),
          h("dt", {}, "Minimum gap"), h("dd", {}, job.min_gap))),
      h("div", { class: "card" }, h("h2", {}, "Next runs"),
        job.next_runs && job.next_runs.length
          ? h("ol", { class: "next-runs", id: "next-runs" }, job.next_runs.map((t) => h("li", {}, when(t))))
          : h("p", { class: "muted" }, job.paused ? "None while paused." : "None: the job is disabled."))));

    const rows = runs.data.runs.map((r) => h("tr", { "data-run": r.id, "data-status": r.status },
      td("Run", h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)),
      td("Status", status(r.status)),
      td("Trigger", r.trigger),
      td("Slot / created", when(r.scheduled_at || r.created_at)),
      td("Duration", duration(r.duration_ms)),
      td("Reason", r.reason || r.error || "")));
    patch(historyEl, table("stack history", ["Run", "Status", "Trigger", "Slot / created", "Duration", "Reason / error"], rows, "No runs match."));
    patch(pager,
      cursors.length ? h("button", { type: "button", id: "newest", onclick: () => { cursors = []; cursor = null; refreshNow(); } }, "Newest") : null,
      cursors.length ? h("button", { type: "button", id: "newer", onclick: () => { cursor = cursors.pop() || null; if (!cursors.length) cursor = null; refreshNow(); } }, "Newer") : null,
      runs.data.next_cursor ? h("button", { type: "button", id: "older", onclick: () => { cursors.push(cursor); cursor = runs.data.next_cursor; refreshNow(); } }, "Older") : null);
  }
  // Older pages do not change under the reader; only the newest one is live.
  return { refresh, live: () => cursors.length === 0 };
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
  let active = true; // until the first answer says otherwise
  replace(main, body);
  async function refresh() {
    const { data: r } = await api("GET", `/v1/runs/${encodeURIComponent(id)}`);
    active = r.status === "queued" || r.status === "running";
    const dt = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
    patch(body,
      h("p", {}, h("a", { href: `#/jobs/${encodeURIComponent(r.job)}` }, `← ${r.job}`)),
      h("h1", {}, `Run #${r.id} `, h("span", { id: "run-status" }, status(r.status))),
      active ? h("div", { class: "actions" }, h("button", {
        type: "button", class: "danger", id: "cancel",
        onclick: () => act(`Cancel run #${r.id}?`, r.status === "queued" ? "It has not started and will not." : "The leader cancels the running job; work it committed stays.", "Cancel run",
          async () => { const res = await api("POST", `/v1/runs/${r.id}/cancel`); return res.status === 202 ? `Asked the leader to cancel run ${r.id}.` : `Run ${r.id} is cancelled.`; }),
      }, "Cancel run"), r.cancel_requested ? h("span", {}, "Cancel requested; waiting for the leader.") : null) : null,
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
  // A finished run does not change: it is not polled any more.
  return { refresh, live: () => active };
}

// ---- locks and audit ----------------------------------------------------------------------

function locksPage() {
  const body = h("div");
  replace(main, h("h1", {}, "Locks"),
    h("p", { class: "muted" }, "Advisory locks held or awaited now. Per-entity locks are transaction-scoped and go with their transaction; the leader lock goes with its session. Nothing here needs releasing by hand: step the leader down or cancel a run instead."),
    body);
  async function refresh() {
    const { data } = await api("GET", "/v1/locks");
    patch(body, table("stack locks", ["Lock", "Held", "Instance", "PID", "Since", "Key"], data.locks.map((l) =>
      h("tr", {},
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
  const pager = h("div", { class: "pager" });
  let cursors = [];
  let cursor = null;
  replace(main, h("h1", {}, "Audit"),
    h("p", { class: "muted" }, "Every action taken through the API or this dashboard: runs triggered and cancelled, jobs paused and resumed, leaders stepped down."),
    body, pager);
  async function refresh() {
    const q = new URLSearchParams({ limit: "50" });
    if (cursor) q.set("cursor", cursor);
    const { data } = await api("GET", `/v1/audit?${q}`);
    patch(body, table("stack audit", ["When", "Action", "Job", "Run", "Token", "Reason", "Request", "Client"], data.actions.map((a) =>
      h("tr", {},
        td("When", when(a.at)),
        td("Action", h("strong", {}, a.action)),
        td("Job", a.job ? h("a", { href: `#/jobs/${encodeURIComponent(a.job)}` }, a.job) : "—"),
        td("Run", a.run_id ? h("a", { href: `#/runs/${a.run_id}` }, `#${a.run_id}`) : "—"),
        td("Token", a.token_kind),
        td("Reason", a.reason || "—"),
        td("Request", h("span", { class: "mono" }, a.request_id)),
        td("Client", h("span", { class: "mono" }, a.remote_addr)))), "No action recorded yet."));
    patch(pager,
      cursors.length ? h("button", { type: "button", id: "audit-newest", onclick: () => { cursors = []; cursor = null; refreshNow(); } }, "Newest") : null,
      data.next_cursor ? h("button", { type: "button", id: "audit-older", onclick: () => { cursors.push(cursor); cursor = data.next_cursor; refreshNow(); } }, "Older") : null);
  }
  return { refresh, live: () => cursors.length === 0 };
}

// ---- routing and refresh ------------------------------------------------------------------

function stopTimer() { if (timer) { clearTimeout(timer); timer = null; } }

let inFlight = false;
async function refreshNow() {
  if (!page || inFlight) return;
  const current = page;
  inFlight = true;
  try {
    await current.refresh();
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

function schedule() {
  stopTimer();
  timer = setTimeout(async () => {
    if (!document.hidden && page && (!page.live || page.live())) await refreshNow();
    if (page) schedule();
  }, REFRESH_MS);
}

function route() {
  stopTimer();
  clearSay();
  delete main.dataset.view;
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

// start asks the replica (/healthz, open to all) whether /v1 wants a token, so that a page
// without one asks for it instead of learning it from 401 answers.
async function start() {
  renderSession();
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    try {
      const res = await fetch("/healthz", { cache: "no-store" });
      if (res.ok && (await res.json()).token_required) { askToken("This server needs an API token."); return; }
    } catch (e) { /* unreachable: route() says so */ }
  }
  route();
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshNow(); });
start();
