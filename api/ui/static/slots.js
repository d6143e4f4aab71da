// A job's slots: what became of each slot its schedule named over the last 24 hours and the
// last 7 days (GET …/slots), drawn as two strips, and the slots that went wrong listed below
// them as links to their runs, each with Re-run (POST /v1/runs/{id}/rerun).
//
// The strips are pictures, not controls: a day of a five-minute job is 288 slots, too many
// cells for a finger at 390 px. Each is one image to a screen reader, named by its counts;
// what needs a click (a failed or missed slot) is in the list, as links and buttons of full
// size. Each cell carries a symbol as well as a colour, so a gap reads without colour.
"use strict";

// A symbol per outcome: a run's status (core.js) and the slot's own outcomes.
const SLOT_SYMBOL = { ...SYMBOL, pending: "·", unrecorded: "?" };
// Worst first: a cell that stands for several slots shows the worst of them.
const SLOT_RANK = ["unrecorded", "failed", "timed_out", "abandoned", "missed", "cancelled", "skipped", "running", "queued", "pending", "succeeded"];
// The outcomes that are gaps: listed below the strips, with what to do about them.
const SLOT_PROBLEMS = new Set(["unrecorded", "failed", "timed_out", "abandoned", "missed"]);
const STRIP_CELLS = 150; // one cell per slot up to this many; more are drawn in buckets
const PROBLEMS_SHOWN = 20;
// The slots and notifications are read at most this often (and at once after an action):
// a week of slots is a bigger answer than the rest of the page.
const ACCT_EVERY_MS = 15000;
const DAY_MS = 86400000;

function outcomeWord(o) { return o.replace("_", " "); }

function rankOf(o) { const i = SLOT_RANK.indexOf(o); return i < 0 ? SLOT_RANK.length : i; }

// countsText says counts ({failed: 1, succeeded: 20}) worst first: "1 failed, 20 succeeded".
function countsText(counts) {
  return Object.keys(counts).sort((a, b) => rankOf(a) - rankOf(b)).map((o) => `${counts[o]} ${outcomeWord(o)}`).join(", ");
}

// cells groups slots (oldest first) into at most STRIP_CELLS cells of equal numbers of slots.
function cells(slots) {
  const per = Math.max(1, Math.ceil(slots.length / STRIP_CELLS));
  const out = [];
  for (let i = 0; i < slots.length; i += per) {
    const group = slots.slice(i, i + per);
    const counts = {};
    for (const s of group) counts[s.outcome] = (counts[s.outcome] || 0) + 1;
    const worst = Object.keys(counts).sort((a, b) => rankOf(a) - rankOf(b))[0];
    out.push({ from: group[0], to: group[group.length - 1], n: group.length, counts, worst });
  }
  return { per, cells: out };
}

function cellTitle(c) {
  if (c.n === 1) {
    const s = c.from;
    return `${absTime(s.scheduled_at)}: ${outcomeWord(s.outcome)}${s.run_id ? ` (run #${s.run_id})` : ""}${s.reason ? ` — ${s.reason}` : ""}`;
  }
  return `${absTime(c.from.scheduled_at)} to ${absTime(c.to.scheduled_at)}: ${c.n} slots, ${countsText(c.counts)}`;
}

function slotCell(outcome, title) {
  return h("span", { class: `cell o-${outcome}`, title, "data-outcome": outcome }, SLOT_SYMBOL[outcome] || "•");
}

// stripView draws the slots of one window (newest first, as the API lists them).
function stripView(key, heading, slots) {
  const counts = {};
  for (const s of slots) counts[s.outcome] = (counts[s.outcome] || 0) + 1;
  const said = slots.length ? `${slots.length} slots: ${countsText(counts)}` : "no slot was due";
  const { per, cells: cs } = cells([...slots].reverse());
  return h("div", { class: "slot-window", "data-window": key },
    h("h3", {}, heading),
    slots.length
      ? [h("div", { class: "slot-strip", role: "img", "aria-label": `${heading}, oldest to newest: ${said}` },
        cs.map((c) => slotCell(c.worst, cellTitle(c)))),
      h("p", { class: "slot-axis muted", "aria-hidden": "true" }, h("span", {}, "oldest"), h("span", {}, "now"))]
      : null,
    h("p", { class: "slot-counts" }, said, per > 1 ? h("span", { class: "muted" }, ` (each cell ${per} slots, showing the worst)`) : null));
}

function legendView(outcomes) {
  return h("ul", { class: "slot-legend", "aria-label": "Legend" },
    SLOT_RANK.filter((o) => outcomes.has(o)).map((o) => h("li", {}, slotCell(o, null), outcomeWord(o))));
}

// slotsSection is the job page's Slots part: built once, refreshed with each job's view.
function slotsSection(ns, name, path) {
  const why = whyNote("slots-why");
  const body = h("div", { id: "slots" });
  let job = null;
  let slots7 = null; // the week's slots, or null when the schedule names too many
  let slots1 = [];
  let note = null;
  let last = 0;

  body.addEventListener("click", (ev) => {
    const b = ev.target.closest("button.rerun");
    if (!b || !isUsable(b)) return;
    const id = b.dataset.run;
    act(`Re-run this slot of ${name}?`,
      `The slot of ${b.dataset.slot} runs again, with the same slot time and Idempotency-Key as run #${id}: a target that deduplicates by the key decides whether to apply it again.`,
      "Re-run slot", async (why) => {
        const { data } = await api("POST", `/v1/runs/${encodeURIComponent(id)}/rerun`, why ? { reason: why } : undefined);
        last = 0;
        return `Queued run ${data.id}, a re-run of the slot of ${b.dataset.slot}.`;
      }, "");
  });

  async function load() {
    const since = (ms) => new Date(Date.now() - ms).toISOString().replace(/\.\d+Z$/, "Z");
    note = null;
    try {
      slots7 = (await api("GET", `${path}/slots?since=${since(7 * DAY_MS)}`)).data.slots;
      const from = Date.now() - DAY_MS;
      slots1 = slots7.filter((s) => Date.parse(s.scheduled_at) > from);
      return;
    } catch (e) {
      if (e.status !== 422) throw e;
      slots7 = null;
    }
    try {
      slots1 = (await api("GET", `${path}/slots?since=${since(DAY_MS)}`)).data.slots;
      note = "The schedule names too many slots in 7 days to list them; the last 24 hours are shown.";
    } catch (e) {
      if (e.status !== 422) throw e;
      slots1 = [];
      note = "The schedule names too many slots in 24 hours to list them (GET …/slots takes a narrower window).";
    }
  }

  function problemRow(s) {
    const at = absTime(s.scheduled_at);
    return h("tr", { "data-key": s.scheduled_at, "data-outcome": s.outcome },
      td("Slot", when(s.scheduled_at)),
      td("Outcome", h("span", { class: `status s-${s.outcome}` }, `${SLOT_SYMBOL[s.outcome] || ""} ${outcomeWord(s.outcome)}`)),
      td("Run", s.run_id ? h("a", { href: hashFor(ns, `runs/${s.run_id}`) }, `#${s.run_id}`) : h("span", { class: "muted" }, "none")),
      td("Reason", s.reason || (s.outcome === "unrecorded" ? "no row: nothing ran (Backfill runs it)" : "")),
      td("Action", s.run_id
        ? h("button", {
          type: "button", class: "rerun", "data-run": s.run_id, "data-slot": at,
          "aria-label": `Re-run slot ${at}`, "aria-disabled": whyNotAct(ns, job) || !job ? "true" : "false",
          title: whyNotAct(ns, job), "aria-describedby": whyNotAct(ns, job) ? "slots-why" : null,
        }, "Re-run slot")
        : null));
  }

  function render() {
    const week = slots7 || [];
    const seen = new Set([...week, ...slots1].map((s) => s.outcome));
    const problems = (slots7 || slots1).filter((s) => SLOT_PROBLEMS.has(s.outcome));
    showWhy(why, problems.some((s) => s.run_id) ? whyNotAct(ns, job) : null);
    update(body,
      note ? h("p", { class: "muted" }, note) : null,
      h("div", { class: "slot-windows" },
        stripView("day", "Last 24 hours", slots1),
        slots7 ? stripView("week", "Last 7 days", week) : null),
      seen.size ? legendView(seen) : null,
      h("h3", { id: "problems-h" }, `Slots that went wrong (${problems.length})`),
      table("stack slot-problems", ["Slot", "Outcome", "Run", "Reason", "Action"], problems.slice(0, PROBLEMS_SHOWN).map(problemRow),
        "None: every slot due ran, or is running."),
      problems.length > PROBLEMS_SHOWN ? h("p", { class: "muted" }, `The newest ${PROBLEMS_SHOWN} are shown; the history below filters by status.`) : null);
  }

  return {
    el: h("section", { "aria-labelledby": "slots-h" }, h("h2", { id: "slots-h", tabindex: "-1" }, "Slots"), why, body),
    async refresh(j) {
      job = j;
      if (Date.now() - last >= ACCT_EVERY_MS) {
        await load();
        last = Date.now();
      }
      render();
    },
    again() { last = 0; },
  };
}
