// Every namespace at once, for an admin who looks after every team (#/all): per namespace,
// how many of its jobs fail, are paused or run, and the failing jobs by name, each linked to
// its page in its own namespace. One request answers it all:
// GET /v1/jobs?namespace=*&status=failing&counts=true (namespace_counts, and the failing
// jobs across teams).
"use strict";

// How many failing jobs the page names; the counts say how many more there are.
const ALL_FAILING_NAMED = 100;

function allPage() {
  replace(main, h("h1", { tabindex: "-1" }, "All namespaces"));
  if (!isAdmin()) {
    main.append(h("p", { class: "problem", role: "note" },
      `Only an admin sees every namespace at once; your token is ${tokenIs()}. The namespace picker opens the ones it may read.`));
    return { refresh: async () => {}, live: () => false };
  }
  const countsEl = h("div", { id: "ns-health" });
  const failingEl = h("div", { id: "all-failing" });
  main.append(
    h("p", { class: "muted" }, "Each namespace's jobs by state, and every failing job: its last run failed, timed out or was abandoned."),
    // The failing jobs first: what to look at, before a narrow screen's namespace cards.
    h("section", { "aria-labelledby": "all-failing-h" }, h("h2", { id: "all-failing-h" }, "Failing jobs"), failingEl),
    h("section", { "aria-labelledby": "ns-health-h" }, h("h2", { id: "ns-health-h" }, "Namespaces"), countsEl));

  async function refresh() {
    const q = new URLSearchParams({ namespace: "*", status: "failing", counts: "true", limit: String(ALL_FAILING_NAMED) });
    const { data } = await api("GET", `/v1/jobs?${q}`);
    // Namespaces without jobs have no counts; they are listed too, with none.
    const byNs = new Map((session.namespaces || []).map((ns) => [ns, { namespace: ns, total: 0, failing: 0, paused: 0, running: 0 }]));
    for (const c of data.namespace_counts || []) byNs.set(c.namespace, c);
    const rows = [...byNs.values()].sort((a, b) => (b.failing - a.failing) || a.namespace.localeCompare(b.namespace));
    const n = (c, state) => h("span", { class: `health-n h-${state}${c[state] ? " some" : ""}` }, String(c[state]));
    update(countsEl, table("stack ns-health", ["Namespace", "Failing", "Paused", "Running", "Jobs"], rows.map((c) =>
      h("tr", { "data-key": c.namespace },
        td("Namespace", h("a", { href: hashFor(c.namespace, "") }, c.namespace)),
        td("Failing", n(c, "failing")), td("Paused", n(c, "paused")), td("Running", n(c, "running")),
        td("Jobs", String(c.total)))), "No namespace has jobs yet."));
    const jobs = data.jobs || [];
    const total = data.counts ? data.counts.failing : jobs.length;
    update(failingEl, !jobs.length ? h("p", { class: "muted" }, "No job is failing.") : [
      h("ul", { class: "failing-list" }, jobs.map((j) => h("li", { "data-key": `${j.namespace}/${j.name}` },
        h("span", { class: "muted" }, `${j.namespace} / `), h("a", { href: jobHash(j.namespace, j.name) }, j.name), " ",
        j.last_run ? [h("a", { href: hashFor(j.namespace, `runs/${j.last_run.id}`) }, status(j.last_run.status)), " ",
          when(j.last_run.finished_at || j.last_run.created_at)] : null))),
      total > jobs.length ? h("p", { class: "muted" }, `and ${total - jobs.length} more: each namespace's overview lists its own.`) : null,
    ]);
  }
  return { refresh };
}
