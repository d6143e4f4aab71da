// The overview: a namespace's health first (how many jobs fail, are paused, run; each a
// filter, and the failing ones by name), its jobs filtered and paged by the server, then the
// leader and the replicas.
"use strict";

// The overview's filters and its page of the job list outlive the page, so coming back from
// a job keeps them; another namespace starts on its first page, unfiltered.
const NO_FILTER = { q: "", status: "", kind: "", label: "" };
const jobFilter = { ...NO_FILTER, size: 100 };
const jobPaging = { ns: null, cursors: [], cursor: null };
// The job list is read a page at a time, filtered by the server (GET …/jobs?status=&kind=
// &label=&q=): ten thousand jobs are 12 MB as one answer, a hundred a few milliseconds.
const PAGE_SIZES = [25, 50, 100, 500];
// The health counts, each a filter of the list.
const HEALTH = [
  { status: "failing", word: "failing", symbol: "✗" },
  { status: "paused", word: "paused", symbol: "‖" },
  { status: "running", word: "running", symbol: "▶" },
];
// How many failing jobs the health panel names.
const FAILING_NAMED = 5;

// replicas are the cluster's replicas as last read (GET /v1/instances), which the page
// offers when its own replica stops answering (app.js, markStale).
let replicas = [];

function filterQuery() {
  const q = new URLSearchParams({ limit: String(jobFilter.size), counts: "true" });
  for (const k of ["q", "status", "kind"]) if (jobFilter[k].trim()) q.set(k, jobFilter[k].trim());
  for (const l of jobFilter.label.split(/[\s,]+/).filter(Boolean)) q.append("label", l);
  return q;
}

function isFiltered() { return ["q", "status", "kind", "label"].some((k) => jobFilter[k].trim()); }

function overviewPage(ns) {
  if (jobPaging.ns !== ns) {
    // Another namespace's jobs: its first page, unfiltered (a filter for one team's jobs
    // would hide another's).
    Object.assign(jobPaging, { ns, cursors: [], cursor: null });
    Object.assign(jobFilter, NO_FILTER);
  }
  let leader = null; // the leader shown, for the step-down button
  const healthEl = h("div", { class: "health", role: "group", "aria-labelledby": "health-h" });
  const failingEl = h("div", { id: "failing-now" });
  const leaderEl = h("p", { id: "leader" }, "…");
  const stepDown = h("button", { type: "button", class: "danger", id: "step-down", "aria-disabled": "true" }, "Step down");
  const leaderWhy = whyNote("leader-why");
  const instancesEl = h("div");
  const jobsEl = h("div");
  // A filter: its label, its control and what it takes, the hint its description.
  const field = (cls, id, label, control, hint) => h("div", { class: `filter ${cls}` },
    h("label", { for: id }, label), control, hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null);
  const words = h("input", {
    type: "search", id: "job-filter", name: "q", autocomplete: "off", spellcheck: "false", "aria-describedby": "job-filter-hint",
  });
  const statusSel = h("select", { id: "job-status", name: "status" }, h("option", { value: "" }, "any"),
    ["failing", "running", "paused", "disabled"].map((s) => h("option", { value: s }, s)));
  const kindSel = h("select", { id: "job-kind", name: "kind" }, h("option", { value: "" }, "any"),
    Object.entries(KIND_WORD).map(([k, w]) => h("option", { value: k }, w)));
  const labelIn = h("input", { type: "text", id: "job-label", name: "label", autocomplete: "off", spellcheck: "false", class: "mono", "aria-describedby": "job-label-hint" });
  const sizeSel = h("select", { id: "job-size", name: "size" }, PAGE_SIZES.map((n) => h("option", { value: String(n) }, String(n))));
  const controls = { q: words, status: statusSel, kind: kindSel, label: labelIn };
  const showFilter = () => {
    for (const [k, c] of Object.entries(controls)) if (c.value !== jobFilter[k]) c.value = jobFilter[k];
    sizeSel.value = String(jobFilter.size);
  };
  showFilter();
  // The count says which jobs the page holds; after a move to another page it takes the
  // focus, so a screen reader says where the list now is.
  const countEl = h("p", { id: "jobs-count", class: "muted", role: "status", tabindex: "-1" });
  const newJob = h("a", { class: "button primary", id: "new-job" }, "New job");
  const jobsWhy = whyNote("jobs-why");
  let nextCursor = null;
  let focusCount = false;
  const firstPage = () => { jobPaging.cursors = []; jobPaging.cursor = null; };
  const move = (how) => () => {
    how();
    focusCount = true;
    refreshNow();
  };
  const first = h("button", { type: "button", id: "jobs-first", hidden: true, onclick: move(firstPage) }, "First page");
  const prev = h("button", { type: "button", id: "jobs-prev", hidden: true, onclick: move(() => { jobPaging.cursor = jobPaging.cursors.pop() || null; }) }, "Previous page");
  const next = h("button", { type: "button", id: "jobs-next", hidden: true, onclick: move(() => { jobPaging.cursors.push(jobPaging.cursor); jobPaging.cursor = nextCursor; }) }, "Next page");
  // A landmark of its own, shown only when the list has more than one page.
  const pagerEl = h("nav", { class: "pager", "aria-label": "Pages of jobs", hidden: true }, first, prev, next);
  gate(stepDown, false, whyNotAdmin("step down the leader"), leaderWhy);
  showWhy(leaderWhy, whyNotAdmin("step down the leader"));
  gateLink(newJob, hashFor(ns, "new-job"), whyNotEdit(ns), jobsWhy);
  showWhy(jobsWhy, whyNotEdit(ns));
  replace(main,
    h("h1", { tabindex: "-1" }, ns === DEFAULT_NS ? "Overview" : `Overview of ${ns}`),
    h("section", { "aria-labelledby": "health-h", class: "health-box" },
      h("h2", { id: "health-h" }, "Health"), healthEl, failingEl),
    h("section", { "aria-labelledby": "jobs-h" },
      h("h2", { id: "jobs-h" }, "Jobs"),
      h("div", { class: "filters", role: "search", "aria-label": "Jobs" },
        field("words", "job-filter", "Find", words, "Words in the name, kind, target or labels"),
        field("", "job-status", "State", statusSel), field("", "job-kind", "Kind", kindSel),
        field("", "job-label", "Label", labelIn, "key=value, or a key"),
        field("", "job-size", "Per page", sizeSel), newJob),
      jobsWhy, countEl, jobsEl, pagerEl),
    h("section", { "aria-labelledby": "cluster-h" },
      h("h2", { id: "cluster-h" }, "Leader and replicas"),
      leaderEl, h("div", { class: "leader-actions" }, stepDown), leaderWhy, instancesEl));
  const strips = new Map(); // job -> {key, runs}
  let jobs = null; // the page's jobs
  let counts = null; // the namespace's health, with how many jobs the filters match
  let failing = [];

  // A change of filter goes back to the first page of what it matches.
  const refilter = () => {
    for (const [k, c] of Object.entries(controls)) jobFilter[k] = c.value;
    jobFilter.size = Number(sizeSel.value) || 100;
    firstPage();
    refreshNow();
  };
  for (const c of [words, labelIn]) c.addEventListener("input", refilter);
  for (const c of [statusSel, kindSel, sizeSel]) c.addEventListener("change", refilter);
  healthEl.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-status]");
    if (!b) return;
    jobFilter.status = jobFilter.status === b.dataset.status ? "" : b.dataset.status;
    showFilter();
    firstPage();
    refreshNow();
  });

  stepDown.addEventListener("click", () => {
    const l = leader;
    if (!l || !isUsable(stepDown)) return;
    act("Step down the leader?",
      `${l.instance_id} resigns at once, as on shutdown; a waiting replica takes over and ${l.instance_id} stays up as a follower. Its running jobs are cancelled and recovered by the next leader.`,
      "Step down",
      async (why) => { await api("POST", "/v1/leader/step-down", why ? { reason: why } : undefined); return `Asked ${l.instance_id} to step down.`; }, "");
  });
  jobsEl.addEventListener("keydown", stripKeys);

  async function loadStrip(job) {
    const key = job.last_run ? `${job.last_run.id}:${job.last_run.status}` : "";
    const cached = strips.get(job.name);
    if (cached && cached.key === key) return;
    if (!job.last_run) {
      // A job that never ran has no strip to ask for: a page of a hundred idle jobs costs
      // no hundred history reads (each of which, finding nothing, looks through every day).
      strips.set(job.name, { key, runs: [] });
      return;
    }
    const { data } = await api("GET", `${jobPath(ns, job.name)}/runs?limit=${STRIP_LEN}`);
    strips.set(job.name, { key, runs: data.runs });
  }

  // A strip is a list of links, oldest first as time reads, one tab stop (the newest run;
  // the arrow keys move along it) so twenty runs a row do not cost twenty Tab presses.
  function strip(name) {
    const s = strips.get(name);
    if (!s) return h("span", { class: "muted" }, "…");
    if (!s.runs.length) return h("span", { class: "muted" }, "no runs yet");
    const tally = {};
    for (const r of s.runs) tally[r.status] = (tally[r.status] || 0) + 1;
    const summary = Object.entries(tally).map(([k, v]) => `${v} ${k.replace("_", " ")}`).join(", ");
    const runs = [...s.runs].reverse();
    return h("ol", { class: "strip", "aria-label": `Last ${runs.length} runs, oldest first: ${summary}` },
      runs.map((r, i) => h("li", { "data-key": r.id },
        h("a", {
          href: hashFor(ns, `runs/${r.id}`), class: `s-${r.status}`, title: `run #${r.id}: ${r.status.replace("_", " ")}`,
          "aria-label": `run #${r.id}: ${r.status.replace("_", " ")}`, tabindex: i === runs.length - 1 ? "0" : "-1",
        }, SYMBOL[r.status] || "?"))));
  }

  function renderHealth() {
    const c = counts || { total: 0, failing: 0, paused: 0, running: 0 };
    update(healthEl,
      HEALTH.map((x) => h("button", {
        type: "button", class: `health-count h-${x.status}${c[x.status] ? " some" : ""}`, "data-status": x.status,
        "data-key": x.status, "aria-pressed": String(jobFilter.status === x.status),
      }, h("span", { class: "n" }, String(c[x.status])), ` ${x.symbol} ${x.word}`)),
      h("span", { class: "muted total", "data-key": "total" }, `of ${c.total} ${c.total === 1 ? "job" : "jobs"}`));
    update(failingEl, !c.failing ? h("p", { class: "muted" }, counts ? "No job is failing." : "…") : [
      h("p", { class: "failing-h" }, c.failing === 1 ? "Failing now:" : `Failing now (${c.failing}):`),
      h("ul", { class: "failing-list" }, failing.map((j) => h("li", { "data-key": j.name },
        h("a", { href: jobHash(ns, j.name) }, j.name), " ",
        j.last_run ? [h("a", { href: hashFor(ns, `runs/${j.last_run.id}`) }, status(j.last_run.status)), " ", when(j.last_run.finished_at || j.last_run.created_at)] : null))),
      c.failing > failing.length ? h("p", { class: "muted" }, `and ${c.failing - failing.length} more: “${c.failing} failing” lists them all.`) : null,
    ]);
  }

  // countText says which jobs the page holds, of how many match, and whether more follow.
  function countText() {
    const n = jobs.length;
    const matched = counts ? counts.matched : n;
    const total = counts ? counts.total : n;
    const from = jobPaging.cursors.length * jobFilter.size + 1;
    const range = `${from}–${from + n - 1}`;
    const more = nextCursor ? "; more on the next page" : "";
    if (!isFiltered()) {
      if (n === matched) return `${n} ${n === 1 ? "job" : "jobs"}.`;
      return `Jobs ${range} of ${matched}${more}.`;
    }
    if (!matched) return `No job of ${total} matches the filters.`;
    const of = `${matched} of ${total} ${total === 1 ? "job" : "jobs"} ${matched === 1 ? "matches" : "match"} the filters`;
    return n === matched ? `${of}.` : `${of}: ${range} shown${more}.`;
  }

  function renderJobs() {
    update(countEl, countText());
    const focusedRun = document.activeElement && document.activeElement.closest(".strip") ? document.activeElement : null;
    update(jobsEl, table("stack jobs", ["Job", "Schedule", "Next run", "Last run", "Last 20"], jobs.map((j) =>
      h("tr", { "data-job": j.name, "data-key": j.name, "data-kind": j.kind },
        td("Job", h("a", { href: jobHash(ns, j.name) }, j.name), kindTag(j), badges(j),
          j.target ? h("div", { class: "target mono" }, j.target) : null,
          labelsText(j.labels) ? h("div", { class: "muted labels" }, labelsText(j.labels)) : null),
        td("Schedule", j.schedule_text, h("div", { class: "muted mono" }, j.schedule)),
        td("Next run", j.next_run_at ? when(j.next_run_at, { zone: j.time_zone }) : h("span", { class: "muted" }, j.paused ? "paused" : j.enabled ? "—" : "disabled")),
        td("Last run", j.last_run
          ? [h("a", { href: hashFor(ns, `runs/${j.last_run.id}`) }, status(j.last_run.status)), " ", h("span", { class: "muted" }, duration(j.last_run.duration_ms))]
          : h("span", { class: "muted" }, "never")),
        td("Last 20", strip(j.name)))), isFiltered() ? "No job matches the filters." : "No jobs."));
    if (focusedRun && focusedRun.isConnected) rove(focusedRun);
  }

  async function refresh() {
    const asked = jobPaging.cursor;
    const askedFilter = JSON.stringify(jobFilter);
    const q = filterQuery();
    if (asked) q.set("cursor", asked);
    const path = jobsPath(ns);
    const [leaderRes, instances, jobsRes] = await Promise.allSettled([
      api("GET", "/v1/leader"), api("GET", "/v1/instances"), api("GET", `${path}?${q}`)]);
    if (jobsRes.status === "rejected") throw jobsRes.reason;
    // The failing jobs by name, when some are: a healthy namespace costs no second read of
    // every job's state.
    const failingCount = (jobsRes.value.data.counts || {}).failing;
    const failingRes = failingCount
      ? await api("GET", `${path}?status=failing&limit=${FAILING_NAMED}`).then((v) => ({ status: "fulfilled", value: v }), () => ({ status: "rejected" }))
      : { status: "fulfilled", value: { data: { jobs: [] } } };
    // Moved to another page or filter meanwhile: its refresh follows.
    if (asked !== jobPaging.cursor || askedFilter !== JSON.stringify(jobFilter)) return;

    leader = leaderRes.status === "fulfilled" ? leaderRes.value.data : null;
    const l = leader;
    update(leaderEl, l
      ? [h("strong", { class: "mono" }, l.instance_id), h("span", { class: "badge leader" }, "leader"), ` · epoch ${l.epoch} · since `, when(l.since)]
      : "No leader elected yet: no job runs until a replica is elected.");
    gate(stepDown, !!l, whyNotAdmin("step down the leader"), leaderWhy);

    jobs = jobsRes.value.data.jobs;
    counts = jobsRes.value.data.counts || null;
    nextCursor = jobsRes.value.data.next_cursor || null;
    if (failingRes.status === "fulfilled") failing = failingRes.value.data.jobs;
    // Only the rows shown need their strip: a page of a hundred jobs costs at most a hundred
    // requests, and then only for the jobs whose last run changed.
    await Promise.allSettled(jobs.map(loadStrip));
    renderHealth();
    renderJobs();
    first.hidden = jobPaging.cursors.length < 2;
    prev.hidden = jobPaging.cursors.length === 0;
    next.hidden = !nextCursor;
    pagerEl.hidden = prev.hidden && next.hidden;
    if (focusCount || (document.activeElement && document.activeElement.hidden)) {
      focusCount = false;
      countEl.focus();
    }

    if (instances.status === "fulfilled") replicas = instances.value.data.instances;
    update(instancesEl, table("stack", ["Instance", "Host", "Version", "Address", "Started", "Last heartbeat"], replicas.map((i) =>
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
