// A run's page and the locks.
"use strict";

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

// nextAttemptView says when a run waiting out a retry's backoff tries again: "next attempt at
// 12:04:31 UTC (in 12 s)". The relative part is ticked like every other time.
function nextAttemptView(r) {
  if (r.status !== "running" || !r.next_attempt_at) return null;
  const d = new Date(r.next_attempt_at);
  const clock = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
  return h("p", { class: "next-attempt", id: "next-attempt", role: "status" },
    `Attempt ${(r.attempts || []).length} failed; waiting to retry: `,
    h("strong", {}, "next attempt at ",
      h("time", { datetime: r.next_attempt_at, title: absTime(r.next_attempt_at) }, clock,
        h("span", { class: "rel" }, ` (${relTime(r.next_attempt_at)})`))));
}

function runPage(ns, id) {
  const body = h("div");
  let run = null; // the run shown, for the cancel button
  let active = true;
  // builtin says whether the run's job is built in (an admin's alone to act on), once asked:
  // the run does not say, its job does.
  let builtin = null;
  replace(main, body);
  body.addEventListener("click", (ev) => {
    const button = ev.target.closest("#cancel");
    if (!button || !run || !isUsable(button)) return;
    const r = run;
    act(`Cancel run #${r.id}?`, r.status === "queued" ? "It has not started and will not." : "The leader cancels the running job; work it committed stays.", "Cancel run",
      async (why) => {
        const res = await api("POST", `/v1/runs/${r.id}/cancel`, why ? { reason: why } : undefined);
        return res.status === 202 ? `Asked the leader to cancel run ${r.id}.` : `Run ${r.id} is cancelled.`;
      }, "");
  });
  async function refresh() {
    const { data: r } = await api("GET", `/v1/runs/${encodeURIComponent(id)}`);
    run = r;
    active = r.status === "queued" || r.status === "running";
    const rns = r.namespace || DEFAULT_NS;
    adoptNamespace(rns, `runs/${encodeURIComponent(id)}`);
    if (active && builtin === null && !isAdmin() && mayEdit(rns) && rns === DEFAULT_NS) {
      try {
        builtin = (await api("GET", jobPath(rns, r.job))).data.kind === "builtin";
      } catch (e) {
        if (e.status !== 404) throw e;
        builtin = false; // a deleted runtime job's run
      }
    }
    const whyCancel = whyNotAct(rns, builtin ? { kind: "builtin" } : null);
    const dt = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
    update(body,
      h("p", {}, h("a", { href: jobHash(rns, r.job) }, `← ${r.job}`)),
      h("h1", { tabindex: "-1" }, `Run #${r.id} `, h("span", { id: "run-status" }, status(r.status))),
      active ? h("div", { class: "actions" },
        h("button", {
          type: "button", class: "danger", id: "cancel", "aria-disabled": whyCancel ? "true" : "false",
          title: whyCancel, "aria-describedby": whyCancel ? "cancel-why" : null,
        }, "Cancel run"),
        r.cancel_requested ? h("span", {}, "Cancel requested; waiting for the leader.") : null,
        whyCancel ? h("p", { class: "why-not", id: "cancel-why" }, whyCancel) : null) : null,
      nextAttemptView(r), // what a waiting run's reader asks first, so near the top
      h("dl", { class: "facts" },
        dt("Job", h("a", { href: jobHash(rns, r.job) }, r.job)),
        rns !== DEFAULT_NS ? dt("Namespace", rns) : null,
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
        dt("Recovers", r.recovers_run_id ? h("a", { href: hashFor(rns, `runs/${r.recovers_run_id}`) }, `run #${r.recovers_run_id}`) : "—"),
        r.parent_run_ids ? dt("Came from", runLinks(rns, r.parent_run_ids, "run-parents")) : null,
        r.caused_run_ids ? dt("Caused", runLinks(rns, r.caused_run_ids, "run-caused")) : null,
        r.definition_version ? dt("Definition", `version ${r.definition_version}`) : null),
      r.error ? [h("h2", {}, "Error"), h("pre", { id: "run-error" }, r.error)] : null,
      attemptsView(r.attempts),
      h("h2", {}, "Counts"), statsView(r.stats));
  }
  // A finished run never changes again: its page stops asking.
  return { refresh, live: () => active };
}

// ---- locks ----------------------------------------------------------------------------

function locksPage() {
  const body = h("div");
  if (!mayRead(DEFAULT_NS)) {
    // GET /v1/locks is namespace default's to read, where the cluster's own jobs live.
    replace(main, h("h1", { tabindex: "-1" }, "Locks"),
      h("p", { class: "problem", role: "note" }, `The locks are the cluster's, which a viewer of namespace default reads; your token is ${tokenIs()}.`));
    return { refresh: async () => {}, live: () => false };
  }
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

// runLinks links runs of namespace ns by id: the parent runs a child's run came from, or
// the child runs a run caused (after).
function runLinks(ns, ids, id) {
  return h("span", { id }, ids.map((r, i) => [i ? ", " : null, h("a", { href: hashFor(ns, `runs/${r}`) }, `run #${r}`)]));
}
