// Who leads what (#/partitions): the replicas with how many partitions each holds, and the
// partitions' grid with each one's holder. Any token reads it (GET /v1/partitions).
"use strict";

// MARKS name the replicas on the grid: a letter as well as a colour, so the grid reads
// without colour (and in a screen reader, through each cell's label).
const MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const markOf = (i) => MARKS[i % MARKS.length] + (i >= MARKS.length ? String(Math.floor(i / MARKS.length)) : "");

function partitionsPage() {
  const intro = h("p", { class: "muted", id: "partitions-intro" });
  const alarm = h("div", { id: "partitions-unheld" });
  const replicasEl = h("div", { id: "partition-replicas" });
  const gridEl = h("div", { id: "partition-grid" });
  const listEl = h("div", { id: "partition-list" });
  replace(main, h("h1", { tabindex: "-1" }, "Partitions"), intro, alarm,
    h("section", { "aria-labelledby": "p-replicas-h" }, h("h2", { id: "p-replicas-h" }, "Replicas"), replicasEl),
    h("section", { "aria-labelledby": "p-grid-h" }, h("h2", { id: "p-grid-h" }, "Who holds each partition"), gridEl),
    // Every partition's term, one card each on a phone: folded there, so 64 cards do not
    // bury the page; open on a wide screen.
    h("details", { id: "partition-terms", open: matchMedia("(min-width: 721px)").matches },
      h("summary", {}, h("h2", { id: "p-list-h", class: "inline" }, "Terms"),
        h("span", { class: "muted" }, " holder, epoch, since, last renewal, jobs and hand-overs of each partition")), listEl));

  async function refresh() {
    const { data } = await api("GET", "/v1/partitions");
    const mark = new Map(data.replicas.map((r, i) => [r.instance_id, i]));
    // A holder no replica row names (its registration already gone) still gets a mark.
    for (const p of data.partitions) if (p.holder && !mark.has(p.holder)) mark.set(p.holder, mark.size);
    const unheld = data.partitions.filter((p) => !p.holder);
    update(intro, data.count === 1
      ? "One partition (SCHEDULER_PARTITIONS=1): the leader runs every job."
      : `${data.count} partitions. Runtime jobs hash by name onto them, and each is led by one replica under its own epoch. Partition 0 is the coordinator's, the leader's, which also runs the built-in jobs.`);
    update(alarm, unheld.length
      ? h("p", { class: "problem", role: "alert" }, h("strong", {}, `${unheld.length} partition${unheld.length === 1 ? " has" : "s have"} no holder: `),
        "their jobs do not run. A live replica takes a dead or paused holder's partitions over within the lease and a few seconds; if it lasts, check that the replicas run and are not all drained.")
      : null);
    update(replicasEl, table("stack", ["Replica", "Mark", "Partitions", "Share"], data.replicas.map((r) =>
      h("tr", { "data-key": r.instance_id },
        td("Replica", h("span", { class: "mono" }, r.instance_id),
          r.coordinator ? h("span", { class: "badge leader" }, "coordinator") : null,
          r.is_self ? h("span", { class: "muted" }, " (this page's replica)") : null),
        td("Mark", h("span", { class: `pmark ph${mark.get(r.instance_id) % 8}` }, markOf(mark.get(r.instance_id)))),
        td("Partitions", h("span", { class: "num" }, r.partitions)),
        td("Share", `${Math.round((100 * r.partitions) / data.count)} %`))), "No replica has registered yet."));
    update(gridEl, h("ol", { class: "pgrid", "aria-label": "Partitions and their holders" }, data.partitions.map((p) => {
      const i = p.holder ? mark.get(p.holder) : -1;
      const label = `partition ${p.partition}${p.coordinator ? " (coordinator)" : ""}: ${p.holder ? `held by ${p.holder}` : `no holder${p.last_holder ? `, last ${p.last_holder}` : ""}`}, ${p.jobs} job${p.jobs === 1 ? "" : "s"}`;
      return h("li", { "data-key": String(p.partition), class: `pcell ${i < 0 ? "unheld" : `ph${i % 8}`}${p.coordinator ? " coord" : ""}`, title: label, "aria-label": label },
        h("span", { class: "pnum" }, p.partition), h("span", { class: "pwho", "aria-hidden": "true" }, i < 0 ? "—" : markOf(i)));
    })));
    update(listEl, table("stack", ["Partition", "Holder", "Epoch", "Since", "Last renewed", "Jobs", "Hand-overs"], data.partitions.map((p) =>
      h("tr", { "data-key": String(p.partition) },
        td("Partition", p.partition, p.coordinator ? h("span", { class: "badge leader" }, "coordinator") : null),
        td("Holder", p.holder ? h("span", { class: "mono" }, p.holder)
          : h("strong", { class: "unheld-word" }, "none", p.last_holder ? h("span", { class: "muted" }, ` (was ${p.last_holder})`) : null)),
        td("Epoch", p.epoch), td("Since", when(p.since)), td("Last renewed", when(p.renewed_at)),
        td("Jobs", p.jobs), td("Hand-overs", p.coordinator ? "—" : p.handovers))), "No partition."));
  }
  return { refresh };
}
