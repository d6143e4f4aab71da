// The overview: the leader, the jobs, the instances.
"use strict";

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

