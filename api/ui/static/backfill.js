// A job's backfill: the slots of a window run again (POST …/backfill), first as a dry run
// that lists them, then for real, its progress read from GET /v1/backfills/{id} until it
// ends, and Cancel (POST /v1/backfills/{id}/cancel) while it runs.
"use strict";

const BACKFILL_LISTED = 50;

// utcInput is an ISO instant as a datetime-local input's value, read as UTC.
function utcInput(ms) { return new Date(ms).toISOString().slice(0, 16); }

function fromUtcInput(v) { return v ? `${v.length === 16 ? v + ":00" : v}Z` : null; }

function backfillSection(ns, name, path) {
  const since = h("input", { type: "datetime-local", id: "bf-since", name: "since", required: true, step: 60 });
  const until = h("input", { type: "datetime-local", id: "bf-until", name: "until", required: true, step: 60 });
  const only = h("select", { id: "bf-only", name: "only" },
    h("option", { value: "missed" }, "missed and unrecorded slots"),
    h("option", { value: "failed" }, "failed slots"),
    h("option", { value: "all" }, "every slot not redone yet"));
  const previewBtn = h("button", { type: "submit", id: "bf-preview" }, "Preview");
  const startBtn = h("button", { type: "button", class: "primary", id: "bf-start" }, "Start backfill");
  const cancelBtn = h("button", { type: "button", class: "danger", id: "bf-cancel", hidden: true }, "Cancel backfill");
  const why = whyNote("bf-why");
  const result = h("div", { id: "bf-result", "aria-live": "polite" });
  let job = null;
  let backfill = null; // the backfill this page started, as last read
  let preview = null; // the dry run's answer, while the form is unchanged

  const now = Date.now();
  since.value = utcInput(now - DAY_MS);
  until.value = utcInput(now);
  const request = (dry) => ({ since: fromUtcInput(since.value), until: fromUtcInput(until.value), only: only.value, dry_run: dry });
  for (const el of [since, until, only]) el.addEventListener("change", () => { preview = null; render(); });

  const form = h("form", {
    class: "actions backfill", "aria-label": "Backfill",
    onsubmit: async (ev) => {
      ev.preventDefault();
      if (!isUsable(previewBtn)) return;
      try {
        preview = (await api("POST", `${path}/backfill`, request(true))).data;
        render();
      } catch (e) {
        sayFailure("Preview backfill", e);
      }
    },
  },
  h("label", { for: "bf-since" }, "From (UTC)", since),
  h("label", { for: "bf-until" }, "To (UTC)", until),
  h("label", { for: "bf-only" }, "Slots", only),
  previewBtn, startBtn, why);

  startBtn.addEventListener("click", () => {
    if (!isUsable(startBtn)) return;
    const n = preview ? ` (${preview.slots.length} slots at the preview)` : "";
    act(`Backfill ${name}?`, `The ${only.selectedOptions[0].textContent} from ${since.value} to ${until.value} UTC run again, oldest first, one at a time${n}.`,
      "Start backfill", async () => {
        const { status: code, data } = await api("POST", `${path}/backfill`, request(false));
        preview = null;
        if (code !== 202) return "Nothing to backfill: no slot in that window is chosen.";
        backfill = data;
        return `Backfill ${data.id} started: ${data.slots.length} slots.`;
      });
  });
  cancelBtn.addEventListener("click", () => isUsable(cancelBtn) && act(`Cancel backfill ${backfill.id}?`,
    "No more of its slots are queued, and the run it queued last is cancelled.", "Cancel backfill", async () => {
      backfill = (await api("POST", `/v1/backfills/${backfill.id}/cancel`)).data;
      return `Backfill ${backfill.id} is cancelled.`;
    }));

  function render() {
    const whyAct = whyNotAct(ns, job);
    gate(previewBtn, !!job, whyAct, why);
    gate(startBtn, !!job && !(backfill && backfill.state === "running"), whyAct, why);
    gate(cancelBtn, true, whyAct, why);
    since.disabled = until.disabled = only.disabled = !!whyAct;
    showWhy(why, whyAct);
    cancelBtn.hidden = !(backfill && backfill.state === "running");
    const listed = (slots) => h("ol", { class: "bf-slots" }, slots.slice(0, BACKFILL_LISTED).map((t) => h("li", {}, when(t))),
      slots.length > BACKFILL_LISTED ? h("li", { class: "muted" }, `and ${slots.length - BACKFILL_LISTED} more`) : null);
    update(result,
      preview ? h("div", { id: "bf-preview-list" },
        h("p", {}, preview.slots.length ? `${preview.slots.length} slot${preview.slots.length === 1 ? "" : "s"} would run (dry run, nothing queued):` : "No slot in that window would run."),
        preview.slots.length ? listed(preview.slots) : null) : null,
      backfill ? h("div", { id: "bf-progress", "data-state": backfill.state },
        h("p", {}, h("strong", {}, `Backfill ${backfill.id}: ${backfill.state}`),
          ` — ${backfill.done} of ${backfill.slots.length} slots queued`,
          backfill.run_id ? [", the last as ", h("a", { href: hashFor(ns, `runs/${backfill.run_id}`) }, `run #${backfill.run_id}`)] : null),
        h("progress", { max: String(backfill.slots.length || 1), value: String(backfill.done), "aria-label": `Backfill ${backfill.id} progress` })) : null);
  }

  render();
  return {
    el: h("details", { class: "more", id: "backfill" }, h("summary", {}, "Backfill: run past slots again"),
      h("p", { class: "muted" }, "Runs the slots of a window again, oldest first, each under its own slot time and Idempotency-Key. Preview lists them without running anything."),
      form, result, h("div", {}, cancelBtn)),
    async refresh(j) {
      job = j;
      if (backfill && backfill.state === "running") backfill = (await api("GET", `/v1/backfills/${backfill.id}`)).data;
      render();
    },
  };
}
