// A job's page: its schedule, definition, actions and history.
"use strict";

// OVERLAP_WORDS say what each overlap policy does, for the definition card.
const OVERLAP_WORDS = {
  skip: () => "skip a slot while a run is still running",
  "queue-one": () => "queue one run behind a running one",
  replace: () => "cancel the running run and run the slot",
  allow: (d) => `run up to ${d.max_concurrent} at once; skip a slot past them`,
};

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
        h("dt", {}, "Minimum gap"), h("dd", {}, v((j) => j.min_gap)),
        chainFacts(job))),
    h("div", { class: "card" }, h("h2", {}, "Next runs"),
      next.length
        ? h("ol", { class: "next-runs", id: job ? "next-runs" : null }, next.map((t) => h("li", {}, t ? when(t, { zone: job && job.time_zone }) : "…", dstNote(job, t))))
        : h("p", { class: "muted" }, job.finished ? "None: its schedule is over (finished)."
          : job.paused ? "None while paused."
          : job.after && !job.schedule ? "None of its own: it runs after its parents succeed."
          : "None: the job is disabled."),
      clockChanges(job)));
}

// chainFacts names a job's parents (after) and children, each a link to its page: the jobs
// whose success runs it, and the jobs its success runs.
function chainFacts(job) {
  if (!job) return null;
  const links = (id, names) => h("dd", { id }, names.map((n, i) => [i ? ", " : null, h("a", { href: jobHash(job.namespace, n) }, n)]));
  return [
    job.after && job.after.length ? [h("dt", {}, "After"), links("job-after", job.after)] : null,
    job.children && job.children.length ? [h("dt", {}, "Runs before"), links("job-children", job.children)] : null,
  ];
}

// BODY_SHOWN caps the body a definition shows before "Show all": a long body would push
// everything below it away.
const BODY_SHOWN = 600;

// headersView lists an HTTP job's own headers as written, "Name: value", one a line. They
// hold no secret: a secret goes in auth or signing_secret, which name it only.
function headersView(headers) {
  const names = Object.keys(headers || {}).sort();
  if (!names.length) return "—";
  return h("ul", { class: "plain mono", id: "job-headers" }, names.map((k) => h("li", { "data-key": k }, `${k}: ${headers[k]}`)));
}

// bodyView shows the body the job sends, as text; a long one shows its start and a button
// that shows the rest (showAll), unless shown. Whether it is shown is the page's to keep:
// every refresh renders the card afresh, and the body stays as the operator left it. The
// button's showAll is the page's own, the same on every render, so that whichever render's
// button the page kept, it acts on the page.
function bodyView(body, shown, showAll) {
  if (!body) return h("span", { class: "muted" }, "none");
  const long = body.length > BODY_SHOWN && !shown;
  // Focusable from a script (tabindex -1), so that Show all can hand it the focus.
  const pre = h("pre", { class: "def-body", id: "job-body", tabindex: "-1", "data-full": long ? "false" : "true" },
    long ? `${body.slice(0, BODY_SHOWN)}…` : body);
  if (!long) return pre;
  const more = h("button", { type: "button", class: "link", id: "job-body-all", "aria-controls": "job-body", onclick: showAll },
    `Show all ${body.length} characters`);
  return [pre, more];
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
function definitionCard(job, bodyShown, showBody) {
  const d = job.definition || {};
  const http = d.http;
  const dt = (k, v, id) => [h("dt", {}, k), h("dd", { id }, v)];
  const auth = http && http.auth
    ? (http.auth.oidc ? `OIDC token signed by the scheduler for audience ${http.auth.oidc.audience}`
      : http.auth.bearer_secret ? `bearer token from secret ${http.auth.bearer_secret}` : `${http.auth.header} from secret ${http.auth.header_secret}`)
    : null;
  return h("section", { class: "card", id: "definition", "aria-labelledby": "definition-h" },
    h("h2", { id: "definition-h", tabindex: "-1" }, "Definition"),
    job.definition_error ? h("p", { class: "problem", role: "note" }, `✗ This definition no longer passes the check, so the job does not run: ${job.definition_error}`) : null,
    h("dl", { class: "facts" },
      dt("Kind", KIND_WORD[job.kind]),
      dt("Target", h("span", { class: "mono target" }, job.target || "—"), "job-target"),
      dt("Description", job.description ? h("span", { class: "prose" }, job.description) : h("span", { class: "muted" }, "—"), "job-description"),
      dt("Labels", labelsText(job.labels) || h("span", { class: "muted" }, "—")),
      dt("Version", job.version ?? "—"),
      dt("Overlap", OVERLAP_WORDS[job.overlap] ? OVERLAP_WORDS[job.overlap](job.definition || {}) : OVERLAP_WORDS.skip()),
      http ? [
        dt("Headers", headersView(http.headers)),
        dt("Body", bodyView(http.body, bodyShown, showBody)),
        dt("Authentication", auth || "none"),
        dt("Signing", http.signing_secret ? `Standard Webhooks signature, secret ${http.signing_secret}` : "none"),
        dt("Success", (http.success || []).length ? http.success.join(", ") : "any 2xx status"),
        dt("Attempts", d.retry ? `${d.retry.max_attempts}, backing off ${d.retry.initial_backoff} to ${d.retry.max_backoff}` : "—"),
        dt("Attempt timeout", http.timeout || "—"),
      ] : null,
      d.river ? [
        dt("River args", h("pre", { class: "mono" }, JSON.stringify(d.river.args || {}, null, 2)), "job-river-args"),
        dt("Unique", d.river.unique ? "yes: no job while one of the same kind, args and queue waits or runs" : "no: one job every slot"),
      ] : null,
      d.nats ? [
        dt("Subject", h("span", { class: "mono" }, d.nats.subject), "job-nats-subject"),
        dt("Server", d.nats.url ? h("span", { class: "mono" }, d.nats.url) : `the URL in secret ${d.nats.url_secret}`),
        dt("Message", bodyView(d.nats.body, bodyShown, showBody)),
        dt("Message id", "the slot's key (Nats-Msg-Id), so the stream keeps one message per slot"),
        dt("Attempts", d.retry ? `${d.retry.max_attempts}, backing off ${d.retry.initial_backoff} to ${d.retry.max_backoff}` : "—"),
      ] : null));
}

// builtinCard is a built-in job's Definition: its work is compiled in, and the replica's
// configuration sets what the Schedule card shows.
function builtinCard(job) {
  return h("section", { class: "card", id: "definition", "aria-labelledby": "definition-h" },
    h("h2", { id: "definition-h", tabindex: "-1" }, "Definition"),
    h("p", {}, `${job.name} is built in: what it does is compiled into the scheduler, and its schedule, timeout, catch-up window and minimum gap (Schedule, above) come from the replicas' configuration (SCHEDULER_JOB_<NAME>_*), so it is not edited here.`));
}

function jobPage(ns, name) {
  const path = jobPath(ns, name);
  // The heading holds the name from the address at once, so the actions below it do not
  // move when the job arrives; only the badges come later.
  const badgesEl = h("span");
  const facts = h("div");
  const definitionEl = h("div");
  const historyEl = h("div");
  const statusSel = h("select", { id: "f-status", name: "status" }, h("option", { value: "" }, "any"), STATUSES.map((s) => h("option", { value: s }, s)));
  const triggerSel = h("select", { id: "f-trigger", name: "trigger" }, h("option", { value: "" }, "any"), TRIGGERS.map((s) => h("option", { value: s }, s)));
  const reason = h("input", { type: "text", id: "reason", name: "reason", maxlength: 500, placeholder: "why (kept in the audit log)" });
  const dry = h("input", { type: "checkbox", id: "dry-run", name: "dry_run" });
  const runNowBtn = h("button", { type: "submit", class: "primary", id: "run-now" }, "Run now");
  const pauseBtn = h("button", { type: "button", id: "pause", "aria-disabled": "true" }, "Pause");
  const resumeBtn = h("button", { type: "button", id: "resume", "aria-disabled": "true" }, "Resume");
  // A runtime job's own actions; a built-in job's definition is compiled in, so it has none.
  const editLink = h("a", { class: "button", id: "edit", hidden: true }, "Edit");
  const deleteBtn = h("button", { type: "button", class: "danger", id: "delete", hidden: true }, "Delete");
  const why = whyNote("job-why");
  // What became of its slots, its backfill and its notifications (slots.js, backfill.js, notify.js).
  const slotsPart = slotsSection(ns, name, path);
  const backfillPart = backfillSection(ns, name, path);
  const notifyPart = notifySection(ns, path);
  let version = null;
  let gone = false; // the job is deleted (or was never there)
  // The job as last shown, and whether its whole body is shown (bodyView).
  let shownJob = null;
  let bodyShown = false;
  const showDefinition = () => update(definitionEl, isRuntime(shownJob) ? definitionCard(shownJob, bodyShown, showBody) : builtinCard(shownJob));
  const showBody = () => {
    bodyShown = true;
    showDefinition();
    const pre = document.getElementById("job-body");
    if (pre) pre.focus();
  };
  let deletion; // its delete's audit row (null: none found), once asked
  let cursors = []; // cursors of the pages before the one shown; [] = newest page (live)
  let cursor = null;
  let nextCursor = null;
  const pager = newPager({
    newest: () => { cursors = []; cursor = null; },
    newer: () => { cursor = cursors.pop() || null; if (!cursors.length) cursor = null; },
    older: () => { cursors.push(cursor); cursor = nextCursor; },
  });

  // powers marks the actions the token may not take. Before the job arrives its kind is
  // unknown, so only the namespace's grant can say why, and nothing acts yet: a built-in
  // job's button must not work for the moment an editor's would.
  function powers(job) {
    const whyAct = whyNotAct(ns, job);
    const whyEdit = whyNotEdit(ns);
    gate(runNowBtn, !!job, whyAct, why);
    gate(pauseBtn, !!job && !job.paused, whyAct, why);
    gate(resumeBtn, !!job && job.paused, whyAct, why);
    gateLink(editLink, jobHash(ns, name, "/edit"), whyEdit, why);
    gate(deleteBtn, true, whyEdit, why);
    reason.disabled = dry.disabled = !!whyAct;
    showWhy(why, whyAct);
  }
  // Every action asks why in its confirmation, starting from the Reason field; the reason
  // goes with the action into the audit log.
  const asked = () => reason.value.trim();
  const body = (why) => (why ? { reason: why } : undefined);

  const runNow = h("form", {
    class: "actions", "aria-label": "Job actions",
    onsubmit: (ev) => {
      ev.preventDefault();
      if (!isUsable(runNowBtn)) return;
      const params = { dry_run: dry.checked };
      act(`Run ${name} now?`, dry.checked ? "A dry run counts what it would change and changes nothing." : "The job runs once now on the leader, besides its schedule.",
        "Run now", async (why) => {
          const { status: code, data } = await api("POST", `${path}/runs`, { params, ...body(why) });
          reason.value = "";
          const run = h("a", { href: hashFor(ns, `runs/${data.id}`), id: "queued-run" }, `run ${data.id}`);
          return code === 202 ? ["Queued ", run, "."] : ["Not queued: ", run, ` is already ${data.status}; no second run was queued.`];
        }, asked());
    },
  },
  h("label", { for: "reason" }, "Reason", reason),
  h("label", { class: "check", for: "dry-run" }, dry, "Dry run"),
  runNowBtn, pauseBtn, resumeBtn, h("span", { class: "spacer" }), editLink, deleteBtn, why);

  deleteBtn.addEventListener("click", async () => {
    if (!isUsable(deleteBtn)) return;
    const answer = await confirmAction(`Delete ${name}?`,
      `${name} stops at once: no run of it is scheduled any more and its definition is removed. Its runs stay in the history. This cannot be undone.`,
      "Delete job", asked());
    if (!answer) return;
    try {
      // If-Match: a job someone changed since this page showed it is not deleted unseen.
      await api("DELETE", path, undefined, { ...(version ? { "If-Match": `"${version}"` } : {}), ...reasonHeader(answer.reason) });
      navigate(hashFor(ns, ""), `Deleted ${name}.`);
    } catch (e) {
      if (e.status === 412) say(`Not deleted: someone else changed ${name} since this page showed it; look at it again, then delete it.`, true);
      else sayFailure("Delete job", e);
      refreshNow();
    }
  });

  const setPaused = (paused) => async (why) => {
    await api("POST", `${path}/${paused ? "pause" : "resume"}`, body(why));
    reason.value = "";
    return `${name} is ${paused ? "paused" : "resumed"}.`;
  };
  pauseBtn.addEventListener("click", () => isUsable(pauseBtn) && act(`Pause ${name}?`,
    "Scheduled and catch-up runs stop until it is resumed; Run now still works.", "Pause", setPaused(true), asked()));
  resumeBtn.addEventListener("click", () => isUsable(resumeBtn) && act(`Resume ${name}?`,
    "Scheduled runs start again from the next slot.", "Resume", setPaused(false), asked()));

  const onFilter = () => { cursors = []; cursor = null; refreshNow(); };
  statusSel.addEventListener("change", onFilter);
  triggerSel.addEventListener("change", onFilter);

  // What an operator looks for first comes first: the slots and the history, then the
  // definition, the backfill and the notifications; the links reach each from the top.
  const toc = onThisPage(jobHash(ns, name), [["History", "history-h"], ["Slots", "slots-h"],
    ["Definition", "definition-h"], ["Backfill", "backfill"], ["Notifications", "notify-h"]]);
  powers(null);
  replace(facts, jobFacts(null));
  replace(main,
    h("p", {}, h("a", { href: hashFor(ns, "") }, ns === DEFAULT_NS ? "← Overview" : `← Overview of ${ns}`)),
    h("h1", { tabindex: "-1" }, name, badgesEl), runNow, toc.el, facts, slotsPart.el,
    h("section", { id: "history", "aria-labelledby": "history-h" },
      h("h2", { id: "history-h", tabindex: "-1" }, "History"),
      h("div", { class: "filters", role: "group", "aria-labelledby": "history-h" },
        h("label", { for: "f-status" }, "Status", statusSel),
        h("label", { for: "f-trigger" }, "Trigger", triggerSel)),
      historyEl, pager.el),
    definitionEl, backfillPart.el, notifyPart.el);

  async function refresh() {
    const q = new URLSearchParams({ limit: "25" });
    if (statusSel.value) q.set("status", statusSel.value);
    if (triggerSel.value) q.set("trigger", triggerSel.value);
    if (cursor) q.set("cursor", cursor);
    // A deleted job answers 404; its runs still answer while it has any.
    const [j, runs] = await Promise.all([orGone(api("GET", path)), orGone(api("GET", `${path}/runs?${q}`))]);
    const job = j && j.data;
    if (!job) {
      if (deletion === undefined) deletion = await lastDeletion(ns, name);
      gone = true;
      runNow.hidden = slotsPart.el.hidden = backfillPart.el.hidden = notifyPart.el.hidden = true;
      update(definitionEl);
      toc.el.hidden = true; // a deleted job's page is its card and its history
      update(badgesEl, deletion ? h("span", { class: "badge deleted", "data-badge": "deleted" }, "deleted") : null);
      update(facts, deletedCard(ns, name, deletion));
      showHistory(runs ? runs.data : { runs: [], next_cursor: null });
      return;
    }
    gone = false;
    deletion = undefined;
    runNow.hidden = slotsPart.el.hidden = backfillPart.el.hidden = notifyPart.el.hidden = false;
    update(badgesEl, kindTag(job), badges(job));
    editLink.hidden = deleteBtn.hidden = !isRuntime(job);
    version = job.version ?? null;
    powers(job);
    update(facts, jobFacts(job));
    toc.el.hidden = false;
    await Promise.all([slotsPart.refresh(job), backfillPart.refresh(job), notifyPart.refresh(job)]);
    showHistory(runs.data);
    shownJob = job;
    showDefinition();
  }

  function showHistory(data) {
    const rows = data.runs.map((r) => h("tr", { "data-run": r.id, "data-status": r.status, "data-key": r.id },
      td("Run", h("a", { href: hashFor(ns, `runs/${r.id}`) }, `#${r.id}`)),
      td("Status", status(r.status)),
      td("Trigger", r.trigger),
      td("Slot / created", when(r.scheduled_at || r.created_at)),
      td("Duration", duration(r.duration_ms)),
      td("Reason", r.reason || r.error || "")));
    update(historyEl, table("stack history", ["Run", "Status", "Trigger", "Slot / created", "Duration", "Reason / error"], rows, "No runs match."));
    nextCursor = data.next_cursor;
    pager.show(cursors.length > 0, !!nextCursor);
  }
  // Older pages do not change under the reader; only the newest one is live. A deleted job
  // changes no more: its page stops asking.
  return { refresh, live: () => cursors.length === 0 && !gone };
}

// onThisPage builds the links to a long page's sections, by their headings' ids: a link
// moves the focus to its heading (the page's address stays the page's own, href, so the
// hash router is not asked). Every job has each section, so the links never change, and
// nothing below them moves when the job arrives.
function onThisPage(href, sections) {
  const links = [];
  for (const [label, id] of sections) {
    links.push(h("li", {}, h("a", {
      href, "data-section": id,
      onclick: (ev) => {
        ev.preventDefault();
        const el = document.getElementById(id);
        if (!el) return;
        if (el.tagName === "DETAILS") el.open = true;
        const target = el.tagName === "DETAILS" ? el.querySelector("summary") : el;
        if (!target.hasAttribute("tabindex") && target.tagName !== "SUMMARY") target.setAttribute("tabindex", "-1");
        target.focus({ preventScroll: true });
        target.scrollIntoView({ block: "start" });
      },
    }, label)));
  }
  return {
    el: h("nav", { class: "on-page", "aria-labelledby": "on-page-h" },
      h("span", { class: "muted", id: "on-page-h" }, "On this page:"), h("ul", {}, links)),
  };
}

// orGone is the answer of a request, or null when it is a 404.
async function orGone(request) {
  try {
    return await request;
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

// lastDeletion is the audit row of the job's last delete, or null (none, or its namespace's
// audit log is not this token's to read).
async function lastDeletion(ns, name) {
  const q = new URLSearchParams({ namespace: ns, job: name, action: "delete", limit: "1" });
  try {
    return (await api("GET", `/v1/audit?${q}`)).data.actions[0] || null;
  } catch (e) {
    if (e.status === 403) return null;
    throw e;
  }
}

// reasonHeader is the X-Reason header of a job's create, change or delete, whose body is
// the definition (or none): percent-encoded, as the API reads it.
function reasonHeader(reason) {
  return reason ? { "X-Reason": encodeURIComponent(reason) } : {};
}

// actor names who acted in an audit row: the token's name and kind, or its kind alone.
function actor(a) {
  return a.token_name ? `${a.token_name} (${a.token_kind})` : a.token_kind;
}

// deletedCard says when, by whom and why the job was deleted, and shows what it was.
function deletedCard(ns, name, del) {
  const dt = (k, v, id) => [h("dt", {}, k), h("dd", { id }, v)];
  const before = del && del.detail && del.detail.before;
  return h("div", { class: "cards" }, h("div", { class: "card wide", id: "deleted" },
    h("h2", {}, del ? "Deleted" : "Not defined"),
    del
      ? h("dl", { class: "facts" },
        dt("When", when(del.at), "deleted-at"),
        dt("By", actor(del), "deleted-by"),
        dt("Reason", del.reason || h("span", { class: "muted" }, "none given"), "deleted-reason"),
        dt("Request", h("span", { class: "mono" }, del.request_id)))
      : h("p", {}, `No job named ${name} is defined in namespace ${ns}, and the audit log has no deletion of one.`),
    h("p", {}, del ? "Its runs stay in the history below. " : null,
      h("a", { href: `${hashFor(ns, "audit")}?${new URLSearchParams({ job: name })}`, id: "job-audit" }, `Every action on ${name}`)),
    before ? [h("h3", {}, "Its last definition"), h("pre", { id: "last-definition" }, JSON.stringify(before, null, 2))] : null));
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

