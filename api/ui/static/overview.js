// The overview: the leader, a namespace's jobs a page at a time, the instances.
"use strict";

// The overview's filter and its page of the job list outlive the page, so coming back from
// a job keeps them; another namespace starts on its first page.
let jobFilter = "";
const jobPaging = { ns: null, cursors: [], cursor: null };
// The job list is read a page at a time: ten thousand jobs are 12 MB and half a second of
// the server's time as one answer, a hundred are a few milliseconds.
const JOBS_PER_PAGE = 100;

// jobMatches: every word of the filter is in the job's name, kind, target or labels.
function jobMatches(job, filter) {
  const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const hay = [job.name, KIND_WORD[job.kind] || "", job.target || "",
    ...Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`)].join("\n").toLowerCase();
  return words.every((w) => hay.includes(w));
}

function overviewPage(ns) {
  if (jobPaging.ns !== ns) {
    // Another namespace's jobs: its first page, unfiltered (a filter for one team's jobs
    // would hide another's).
    Object.assign(jobPaging, { ns, cursors: [], cursor: null });
    jobFilter = "";
  }
  let leader = null; // the leader shown, for the step-down button
  const leaderEl = h("p", { id: "leader" }, "…");
  const stepDown = h("button", { type: "button", class: "danger", id: "step-down", "aria-disabled": "true" }, "Step down");
  const leaderWhy = whyNote("leader-why");
  const instancesEl = h("div");
  const jobsEl = h("div");
  const filter = h("input", {
    type: "search", id: "job-filter", name: "filter", autocomplete: "off", spellcheck: "false",
    placeholder: "name, label, kind or target", "aria-describedby": "jobs-count",
  });
  filter.value = jobFilter;
  // The count says which jobs the page holds; after a move to another page it takes the
  // focus, so a screen reader says where the list now is.
  const countEl = h("p", { id: "jobs-count", class: "muted", role: "status", tabindex: "-1" });
  const newJob = h("a", { class: "button primary", id: "new-job" }, "New job");
  const jobsWhy = whyNote("jobs-why");
  let nextCursor = null;
  let focusCount = false;
  const move = (how) => () => {
    how();
    focusCount = true;
    refreshNow();
  };
  const first = h("button", { type: "button", id: "jobs-first", hidden: true, onclick: move(() => { jobPaging.cursors = []; jobPaging.cursor = null; }) }, "First page");
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
    h("section", { "aria-labelledby": "leader-h" }, h("h2", { id: "leader-h" }, "Leader"), leaderEl, stepDown, leaderWhy),
    h("h2", { id: "jobs-h" }, "Jobs"),
    h("div", { class: "filters" },
      h("div", { role: "search", "aria-label": "Jobs" }, h("label", { for: "job-filter" }, "Filter jobs", filter)),
      newJob),
    jobsWhy, countEl, jobsEl,
    pagerEl,
    h("h2", {}, "Instances"), instancesEl);
  const strips = new Map(); // job -> {key, runs}
  let jobs = null; // the page's jobs, so the filter narrows them at once
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
    const counts = {};
    for (const r of s.runs) counts[r.status] = (counts[r.status] || 0) + 1;
    const summary = Object.entries(counts).map(([k, v]) => `${v} ${k.replace("_", " ")}`).join(", ");
    const runs = [...s.runs].reverse();
    return h("ol", { class: "strip", "aria-label": `Last ${runs.length} runs, oldest first: ${summary}` },
      runs.map((r, i) => h("li", { "data-key": r.id },
        h("a", {
          href: hashFor(ns, `runs/${r.id}`), class: `s-${r.status}`, title: `run #${r.id}: ${r.status.replace("_", " ")}`,
          "aria-label": `run #${r.id}: ${r.status.replace("_", " ")}`, tabindex: i === runs.length - 1 ? "0" : "-1",
        }, SYMBOL[r.status] || "?"))));
  }

  function shownJobs() {
    return jobs.filter((j) => jobMatches(j, jobFilter));
  }

  // countText says which jobs the page holds and whether more pages exist; the filter
  // narrows the page shown, and says so when there are other pages.
  function countText(shown) {
    const n = jobs.length;
    const paged = jobPaging.cursors.length > 0 || !!nextCursor;
    const from = jobPaging.cursors.length * JOBS_PER_PAGE + 1;
    const range = n ? `jobs ${from}–${from + n - 1}` : "no jobs";
    const more = nextCursor ? "; more on the next page" : paged ? ", the last page" : "";
    const f = jobFilter.trim();
    if (!f) return paged ? `${range[0].toUpperCase()}${range.slice(1)}${more}.` : `${n} ${n === 1 ? "job" : "jobs"}.`;
    if (!paged) return `${shown.length} of ${n} jobs match “${f}”.`;
    return `${shown.length} of the ${n} jobs on this page (${range}) match “${f}”: the filter looks at this page only${more}.`;
  }

  function renderJobs() {
    const shown = shownJobs();
    update(countEl, countText(shown));
    const focusedRun = document.activeElement && document.activeElement.closest(".strip") ? document.activeElement : null;
    update(jobsEl, table("stack jobs", ["Job", "Schedule", "Next run", "Last run", "Last 20"], shown.map((j) =>
      h("tr", { "data-job": j.name, "data-key": j.name, "data-kind": j.kind },
        td("Job", h("a", { href: jobHash(ns, j.name) }, j.name), kindTag(j), badges(j),
          j.target ? h("div", { class: "target mono" }, j.target) : null,
          labelsText(j.labels) ? h("div", { class: "muted labels" }, labelsText(j.labels)) : null),
        td("Schedule", j.schedule_text, h("div", { class: "muted mono" }, j.schedule)),
        td("Next run", j.next_run_at ? when(j.next_run_at) : h("span", { class: "muted" }, j.paused ? "paused" : j.enabled ? "—" : "disabled")),
        td("Last run", j.last_run
          ? [h("a", { href: hashFor(ns, `runs/${j.last_run.id}`) }, status(j.last_run.status)), " ", h("span", { class: "muted" }, duration(j.last_run.duration_ms))]
          : h("span", { class: "muted" }, "never")),
        td("Last 20", strip(j.name)))), jobFilter.trim() ? "No job on this page matches the filter." : "No jobs."));
    if (focusedRun && focusedRun.isConnected) rove(focusedRun);
  }

  async function refresh() {
    const asked = jobPaging.cursor;
    const q = new URLSearchParams({ limit: String(JOBS_PER_PAGE) });
    if (asked) q.set("cursor", asked);
    const [leaderRes, instances, jobsRes] = await Promise.allSettled([
      api("GET", "/v1/leader"), api("GET", "/v1/instances"), api("GET", `${jobsPath(ns)}?${q}`)]);
    if (jobsRes.status === "rejected") throw jobsRes.reason;
    if (asked !== jobPaging.cursor) return; // moved to another page meanwhile: its refresh follows

    leader = leaderRes.status === "fulfilled" ? leaderRes.value.data : null;
    const l = leader;
    update(leaderEl, l
      ? [h("strong", { class: "mono" }, l.instance_id), h("span", { class: "badge leader" }, "leader"), ` · epoch ${l.epoch} · since `, when(l.since)]
      : "No leader elected yet: no job runs until a replica is elected.");
    gate(stepDown, !!l, whyNotAdmin("step down the leader"), leaderWhy);

    jobs = jobsRes.value.data.jobs;
    nextCursor = jobsRes.value.data.next_cursor || null;
    // Only the rows shown need their strip: a page of a hundred jobs costs at most a hundred
    // requests, and then only for the jobs whose last run changed.
    await Promise.allSettled(shownJobs().map(loadStrip));
    renderJobs();
    first.hidden = jobPaging.cursors.length < 2;
    prev.hidden = jobPaging.cursors.length === 0;
    next.hidden = !nextCursor;
    pagerEl.hidden = prev.hidden && next.hidden;
    if (focusCount || (document.activeElement && document.activeElement.hidden)) {
      focusCount = false;
      countEl.focus();
    }

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

