// A runtime job's form: create, preview, replace.
"use strict";

const HTTP_METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD"];
const SECRET_HINT = "A secret's NAME, never its value: each replica reads the value from SCHEDULER_SECRET_<NAME>.";
// How long the form waits after the last keystroke before it asks the server for a preview.
const PREVIEW_DEBOUNCE_MS = 700;

// The zones the browser knows, offered as suggestions; the server decides what is valid.
function timeZones() {
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  return zones.includes("UTC") ? zones : ["UTC", ...zones];
}

// parseLines reads "Name: value" (or "key=value") lines into an object; bad lines become errors
// of field, worded as the server words its own.
function parseLines(text, field, seps, what, errors) {
  const out = {};
  const seen = new Map();
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (!line) return;
    const at = Math.min(...seps.map((s) => line.indexOf(s)).filter((n) => n >= 0));
    if (!Number.isFinite(at) || at === 0) {
      errors.push({ field, detail: `line ${i + 1} is not ${what}` });
      return;
    }
    const key = line.slice(0, at).trim();
    const lower = key.toLowerCase();
    if (seen.has(lower)) {
      errors.push({ field, detail: `line ${i + 1} sets ${key} again (line ${seen.get(lower)} set it first)` });
      return;
    }
    seen.set(lower, i + 1);
    out[key] = line.slice(at + 1).trim();
  });
  return out;
}

function wholeNumber(text, field, errors) {
  const t = text.trim();
  if (t === "") return undefined;
  if (!/^\d+$/.test(t)) { errors.push({ field, detail: `“${t}” is not a whole number` }); return undefined; }
  return Number(t);
}

// jobFormPage is the form that creates a runtime job (name null) or replaces one. It sends
// the definition as the API takes it; Preview sends it with ?dry_run=true, which checks it
// and answers the job it would be (its next five runs among the rest) without storing it.
// The server's validation errors name fields by path ("http.url", "http.headers.X-Token"):
// each lands beside the input that fills that path, and those the form has no input for are
// listed at the top.
function jobFormPage(ns, name) {
  const editing = name !== null;
  const path = editing ? jobPath(ns, name) : jobsPath(ns);
  // A token that may not change the namespace reads the definition here, and its Preview
  // and Save say why they are unavailable (a preview is a write the server checks too).
  const whyEdit = whyNotEdit(ns);
  const why = whyNote("form-why");
  const fields = new Map(); // definition path -> {path, label, input, hint, err, box, prefix}
  const aliases = new Map(); // further paths whose errors an input shows
  const touched = new Set(); // paths edited since the form opened
  let base = {}; // the definition being edited, so nothing the form does not show is lost
  let version = null;
  let loaded = !editing;
  let saving = false;
  let refused = !!whyEdit; // the server refuses this token every write, previews included
  let previewSeq = 0;
  let debounce = null;

  function field(path, label, control, opts = {}) {
    const id = "jf-" + path.replace(/[^a-z0-9]+/gi, "-");
    control.id = id;
    control.name = path;
    const hint = opts.hint ? h("p", { class: "hint", id: `${id}-hint` }, opts.hint) : null;
    const err = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
    const f = { path, label, input: control, hint, err, prefix: !!opts.prefix, box: null };
    describe(f, false);
    const check = control.type === "checkbox";
    const lab = h("label", { for: id }, check ? [control, " "] : null, label,
      opts.optional ? h("span", { class: "muted" }, " (optional)") : null);
    f.box = h("div", { class: `field${check ? " check" : ""}${opts.full ? " full" : ""}`, "data-field": path },
      lab, check ? null : control, hint, err);
    fields.set(path, f);
    for (const a of opts.aliases || []) aliases.set(a, f);
    return f.box;
  }

  // describe ties the input to its error (read first) and its hint.
  function describe(f, invalid) {
    const ids = [invalid ? f.err.id : null, f.hint ? f.hint.id : null].filter(Boolean);
    if (ids.length) f.input.setAttribute("aria-describedby", ids.join(" "));
    else f.input.removeAttribute("aria-describedby");
    if (invalid) f.input.setAttribute("aria-invalid", "true");
    else f.input.removeAttribute("aria-invalid");
  }

  const text = (attrs) => h("input", { type: "text", autocomplete: "off", spellcheck: "false", ...attrs });
  const area = (attrs) => h("textarea", { spellcheck: "false", rows: 3, ...attrs });
  const select = (options, attrs) => h("select", attrs || {}, options.map(([v, t]) => h("option", { value: v }, t)));

  const nameIn = text({ required: true, maxlength: 63, readonly: editing || null });
  const scheduleIn = text({ required: true, class: "mono", placeholder: "e.g. */5 * * * *" });
  const tzIn = text({ list: "jf-zones", placeholder: "empty: UTC" });
  const descIn = area({ rows: 2, maxlength: 1000, spellcheck: "true" });
  const labelsIn = area({ rows: 2, class: "mono", placeholder: "e.g. team=billing" });
  const kindIn = select([["http", "HTTP call"], ["sql", "SQL statements"], ["river", "River job"], ["nats", "NATS JetStream message"]]);
  const enabledIn = h("input", { type: "checkbox", checked: true });
  const timeoutIn = text({ placeholder: "empty: 1m", class: "short" });
  const overlapIn = select([["skip", "skip the slot"], ["queue-one", "queue one run behind it"],
    ["replace", "cancel the running run and run the slot"], ["allow", "run it too, up to a number at once"]]);
  const maxConcurrentIn = text({ placeholder: "e.g. 3", inputmode: "numeric", class: "short" });
  const methodIn = select(HTTP_METHODS.map((m) => [m, m]));
  const urlIn = h("input", { type: "url", autocomplete: "off", spellcheck: "false", class: "mono", placeholder: "e.g. https://billing.internal/reports/daily" });
  const headersIn = area({ class: "mono", placeholder: "e.g. Content-Type: application/json" });
  const bodyIn = area({ class: "mono", rows: 4 });
  const authIn = select([["", "none"], ["bearer", "bearer token (Authorization: Bearer …)"], ["header", "a header of your choice"],
    ["oidc", "OIDC token signed by the scheduler"]]);
  const authHeaderIn = text({ placeholder: "e.g. X-Api-Key" });
  const authAudienceIn = text({ placeholder: "e.g. billing" });
  const authSecretIn = text({ class: "mono", placeholder: "e.g. BILLING_TOKEN" });
  const signingIn = text({ class: "mono", placeholder: "e.g. BILLING_SIGNING" });
  const successIn = text({ placeholder: "empty: any 2xx", inputmode: "numeric" });
  const attemptsIn = text({ placeholder: "empty: 3", inputmode: "numeric", class: "short" });
  const attemptTimeoutIn = text({ placeholder: "empty: 30s", class: "short" });
  const initialBackoffIn = text({ placeholder: "empty: 1s", class: "short" });
  const maxBackoffIn = text({ placeholder: "empty: 1m", class: "short" });
  const sqlTargetIn = text({ class: "mono short", placeholder: "e.g. APP" });
  const statementsIn = area({ class: "mono", rows: 6, placeholder: "e.g. REFRESH MATERIALIZED VIEW daily_totals" });
  const riverTargetIn = text({ class: "mono short", placeholder: "e.g. APP" });
  const riverKindIn = text({ class: "mono", placeholder: "e.g. send_invoices" });
  const riverQueueIn = text({ class: "mono short", placeholder: "empty: default" });
  const riverArgsIn = area({ class: "mono", rows: 4, placeholder: "e.g. {\"region\": \"eu\"}" });
  const riverUniqueIn = h("input", { type: "checkbox" });
  const natsURLIn = text({ class: "mono", placeholder: "e.g. nats://nats.internal:4222" });
  const natsSecretIn = text({ class: "mono", placeholder: "e.g. ORDERS_NATS" });
  const natsSubjectIn = text({ class: "mono", placeholder: "e.g. orders.daily-report" });
  const natsBodyIn = area({ class: "mono", rows: 4 });
  const catchupIn = text({ placeholder: "empty: one period", class: "short" });
  const minGapIn = text({ placeholder: "empty: 0s", class: "short" });
  const jitterIn = text({ placeholder: "empty: 0s", class: "short" });
  const pauseAfterIn = text({ placeholder: "empty: 0", inputmode: "numeric", class: "short" });

  const authHeaderBox = field("http.auth.header", "Header name", authHeaderIn, { hint: "The header that carries the secret's value." });
  const authSecretBox = field("http.auth.bearer_secret", "Secret name", authSecretIn, { hint: SECRET_HINT, aliases: ["http.auth.header_secret"] });
  const authAudienceBox = field("http.auth.oidc.audience", "Audience", authAudienceIn,
    { hint: "The aud the target's verifier expects; each attempt sends a token the scheduler signs, which the target verifies through /.well-known/openid-configuration." });
  const httpSet = h("fieldset", { class: "kind-fields", id: "jf-http" }, h("legend", {}, "HTTP call"),
    h("div", { class: "grid" },
      field("http.method", "Method", methodIn),
      field("http.url", "URL", urlIn, { full: true, hint: "http:// or https://. Private and loopback addresses are refused unless an operator allows them (SCHEDULER_HTTP_ALLOW)." }),
      field("http.headers", "Headers", headersIn, { full: true, optional: true, prefix: true,
        hint: "One per line, as Name: value. No credentials here: headers are stored and shown as written; use Authentication below." }),
      field("http.body", "Body", bodyIn, { full: true, optional: true }),
      field("http.auth", "Authentication", authIn, { prefix: true }),
      authHeaderBox, authSecretBox, authAudienceBox,
      field("http.signing_secret", "Signing secret name", signingIn, { optional: true,
        hint: "Signs each call as Standard Webhooks do. " + SECRET_HINT }),
      field("http.success", "Success statuses", successIn, { optional: true, hint: "e.g. 200, 204. Empty: any 2xx status." }),
      field("retry.max_attempts", "Attempts", attemptsIn, { aliases: ["retry"], hint: "Calls per run, the first included; 1: no retry. Empty: 3." }),
      field("retry.initial_backoff", "First retry after", initialBackoffIn, { hint: "Doubles at each retry. Empty: 1s." }),
      field("retry.max_backoff", "Longest wait", maxBackoffIn, { hint: "Empty: 1m." }),
      field("http.timeout", "Attempt timeout", attemptTimeoutIn, { hint: "One call's limit. Empty: 30s, or the job's timeout if shorter." })));
  const sqlSet = h("fieldset", { class: "kind-fields", id: "jf-sql", hidden: true }, h("legend", {}, "SQL statements"),
    h("div", { class: "grid" },
      field("sql.target", "Target", sqlTargetIn, { hint: "The database and login an operator declared for SQL jobs (SCHEDULER_SQL_TARGET_<NAME>), such as APP." }),
      field("sql.statements", "Statements", statementsIn, { full: true,
        hint: "Run in the target with its login, in one transaction; each slot commits once." })));
  const riverSet = h("fieldset", { class: "kind-fields", id: "jf-river", hidden: true }, h("legend", {}, "River job"),
    h("div", { class: "grid" },
      field("river.target", "Target", riverTargetIn, { hint: "The SQL target whose database holds River's tables, such as APP; the job is inserted with its login." }),
      field("river.kind", "Kind", riverKindIn, { hint: "What the River worker is registered for: its args type's Kind()." }),
      field("river.queue", "Queue", riverQueueIn, { optional: true, hint: "River's queue. Empty: default." }),
      field("river.args", "Args", riverArgsIn, { full: true, optional: true, hint: "The River job's args, a JSON object. Empty: {}." }),
      field("river.unique", "Unique: no job while a like one waits or runs", riverUniqueIn, { optional: true,
        hint: "Each slot inserts one River job, once, with its key in the job's metadata; unique also skips a slot whose job would wait beside one of the same kind, args and queue." })));
  // A NATS job publishes one message per slot, its Nats-Msg-Id the slot's key.
  const natsSet = h("fieldset", { class: "kind-fields", id: "jf-nats", hidden: true }, h("legend", {}, "NATS JetStream message"),
    h("div", { class: "grid" },
      field("nats.url", "Server URL", natsURLIn, { full: true, optional: true,
        hint: "nats:// or tls://, without credentials. Private and loopback addresses are refused unless an operator allows them (SCHEDULER_HTTP_ALLOW)." }),
      field("nats.url_secret", "Or: secret holding the URL", natsSecretIn, { optional: true,
        hint: "For a URL with credentials (nats://user:password@host:4222). " + SECRET_HINT }),
      field("nats.subject", "Subject", natsSubjectIn, { hint: "One literal subject a stream captures; no * or >." }),
      field("nats.body", "Message", natsBodyIn, { full: true, optional: true })));
  const more = h("details", { class: "more" }, h("summary", {}, "More settings: catch-up, gap, jitter, automatic pause"),
    h("div", { class: "grid" },
      field("catchup", "Catch-up window", catchupIn, { hint: "Slots missed while no replica led run late if still this recent; 0s: never. Empty: one period of the schedule." }),
      field("min_gap", "Minimum gap", minGapIn, { hint: "The least time between the end of a run and the start of the next." }),
      field("jitter", "Jitter", jitterIn, { hint: "Spreads the calls of jobs on the same slot: each starts at a fixed offset below this." }),
      field("pause_after_failures", "Pause after failures", pauseAfterIn, { hint: "Pause the job after this many failed runs in a row. Empty or 0: never." })));

  const problems = h("div", { class: "form-problems", id: "form-problems", tabindex: "-1", hidden: true });
  const previewBtn = h("button", { type: "button", id: "preview-btn" }, "Preview");
  const saveBtn = h("button", { type: "submit", form: "job-form", class: "primary", id: "save", "aria-disabled": loaded ? "false" : "true" }, editing ? "Save changes" : "Create job");
  const previewStatus = h("p", { id: "preview-status", role: "status" },
    "Preview checks the job on the server and shows its next runs; nothing is saved.");
  const previewEl = h("div", { id: "preview" });
  // Why: kept in the audit log with the change (the X-Reason header).
  const reasonIn = h("input", { type: "text", id: "jf-reason", name: "reason", maxlength: 500, autocomplete: "off", "aria-describedby": "jf-reason-hint" });

  const form = h("form", { class: "job-form", id: "job-form", novalidate: true, "aria-labelledby": "form-h" },
    problems,
    h("div", { class: "grid" },
      field("name", "Name", nameIn, { hint: editing
        ? "A job's name cannot change: to rename it, create a job under the new name and delete this one."
        : "1 to 63 lower-case letters, digits and -, e.g. daily-report." }),
      field("kind", "Kind", kindIn, { aliases: ["http", "sql", "river"] }),
      field("schedule", "Schedule", scheduleIn, { hint: "Cron (\"0 2 * * *\"; 6 fields with seconds first), \"@every 10m\", or \"@at 2026-12-01T09:00:00Z\" for one run; several separated by \";\" run at each." }),
      field("time_zone", "Time zone", tzIn, { optional: true, hint: "The zone of the schedule's times, e.g. Europe/Paris. Empty: UTC." }),
      field("description", "Description", descIn, { full: true, optional: true }),
      field("labels", "Labels", labelsIn, { optional: true, prefix: true, hint: "One per line, key=value. The overview's filter finds jobs by them." }),
      field("timeout", "Timeout", timeoutIn, { hint: "A run's limit, every attempt included. Empty: 1m." }),
      field("overlap", "When a slot comes while a run is still running", overlapIn),
      field("max_concurrent", "Runs at once", maxConcurrentIn, { optional: true, hint: "With \"run it too\" only: how many runs at once, 1 to 50; the slot past them is skipped." }),
      field("enabled", "Enabled: its slots run", enabledIn, { hint: "Unchecked, the job is kept but does not run." })),
    httpSet, sqlSet, riverSet, natsSet, more,
    h("datalist", { id: "jf-zones" }, timeZones().map((z) => h("option", { value: z }))),
    h("div", { class: "field form-reason" },
      h("label", { for: "jf-reason" }, "Reason", h("span", { class: "muted" }, " (optional)")), reasonIn,
      h("p", { class: "hint", id: "jf-reason-hint" }, `Why you ${editing ? "change" : "create"} this job; kept in the audit log with the change.`)));
  // The buttons follow the preview (Save is the form's by its form attribute): on a phone,
  // where the preview comes below the fields, it is read before Save, not after it.
  const buttons = h("div", { class: "buttons form-buttons" },
    h("a", { href: editing ? jobHash(ns, name) : hashFor(ns, ""), class: "button" }, "Cancel"),
    previewBtn, saveBtn);

  gate(previewBtn, true, whyEdit, why);
  gate(saveBtn, loaded, whyEdit, why);
  showWhy(why, whyEdit);
  replace(main,
    h("p", {}, editing ? h("a", { href: jobHash(ns, name) }, `← ${name}`) : h("a", { href: hashFor(ns, "") }, ns === DEFAULT_NS ? "← Overview" : `← Overview of ${ns}`)),
    h("h1", { tabindex: "-1", id: "form-h" }, editing ? `Edit ${name}` : ns === DEFAULT_NS ? "New job" : `New job in ${ns}`),
    why,
    h("div", { class: "editor" }, form,
      h("aside", { class: "preview", "aria-labelledby": "preview-h" }, h("h2", { id: "preview-h" }, "Preview"), previewStatus, previewEl),
      buttons));

  function showKind() {
    httpSet.hidden = kindIn.value !== "http";
    sqlSet.hidden = kindIn.value !== "sql";
    riverSet.hidden = kindIn.value !== "river";
    natsSet.hidden = kindIn.value !== "nats";
    authHeaderBox.hidden = authIn.value !== "header";
    authSecretBox.hidden = authIn.value === "" || authIn.value === "oidc";
    authAudienceBox.hidden = authIn.value !== "oidc";
  }
  kindIn.addEventListener("change", showKind);
  authIn.addEventListener("change", showKind);

  function fill(d) {
    base = d;
    nameIn.value = d.name || "";
    scheduleIn.value = Array.isArray(d.schedule) ? d.schedule.join("; ") : d.schedule || "";
    tzIn.value = d.time_zone || "";
    descIn.value = d.description || "";
    labelsIn.value = Object.keys(d.labels || {}).sort().map((k) => `${k}=${d.labels[k]}`).join("\n");
    kindIn.value = d.sql ? "sql" : d.river ? "river" : d.nats ? "nats" : "http";
    enabledIn.checked = d.enabled !== false;
    timeoutIn.value = d.timeout || "";
    overlapIn.value = d.overlap || "skip";
    maxConcurrentIn.value = d.max_concurrent ? String(d.max_concurrent) : "";
    catchupIn.value = d.catchup || "";
    minGapIn.value = d.min_gap || "";
    jitterIn.value = d.jitter || "";
    pauseAfterIn.value = d.pause_after_failures ? String(d.pause_after_failures) : "";
    const hp = d.http || {};
    methodIn.value = hp.method || "POST";
    urlIn.value = hp.url || "";
    headersIn.value = Object.keys(hp.headers || {}).sort().map((k) => `${k}: ${hp.headers[k]}`).join("\n");
    bodyIn.value = hp.body || "";
    const auth = hp.auth || {};
    authIn.value = auth.oidc ? "oidc" : auth.bearer_secret ? "bearer" : auth.header ? "header" : "";
    authAudienceIn.value = auth.oidc ? auth.oidc.audience || "" : "";
    authHeaderIn.value = auth.header || "";
    authSecretIn.value = auth.bearer_secret || auth.header_secret || "";
    signingIn.value = hp.signing_secret || "";
    successIn.value = (hp.success || []).join(", ");
    attemptTimeoutIn.value = hp.timeout || "";
    const r = d.retry || {};
    attemptsIn.value = r.max_attempts ? String(r.max_attempts) : "";
    initialBackoffIn.value = r.initial_backoff || "";
    maxBackoffIn.value = r.max_backoff || "";
    sqlTargetIn.value = (d.sql && d.sql.target) || "";
    statementsIn.value = (d.sql && d.sql.statements) || "";
    const rv = d.river || {};
    riverTargetIn.value = rv.target || "";
    riverKindIn.value = rv.kind || "";
    riverQueueIn.value = rv.queue || "";
    riverArgsIn.value = rv.args && Object.keys(rv.args).length ? JSON.stringify(rv.args, null, 2) : "";
    riverUniqueIn.checked = !!rv.unique;
    const np = d.nats || {};
    natsURLIn.value = np.url || "";
    natsSecretIn.value = np.url_secret || "";
    natsSubjectIn.value = np.subject || "";
    natsBodyIn.value = np.body || "";
    if (d.catchup || d.min_gap || d.jitter || d.pause_after_failures) more.open = true;
    showKind();
  }

  // readForm builds the definition the API takes; what cannot be parsed here (a header line
  // without a colon) comes back as errors worded as the server's.
  function readForm() {
    const errors = [];
    const d = structuredClone(base);
    const set = (obj, k, v) => { if (v === undefined || v === "") delete obj[k]; else obj[k] = v; };
    d.name = nameIn.value.trim();
    // A list of schedules is written with ";" between them, which no cron expression holds.
    const specs = scheduleIn.value.split(";").map((x) => x.trim()).filter(Boolean);
    d.schedule = specs.length > 1 ? specs : scheduleIn.value.trim();
    set(d, "time_zone", tzIn.value.trim());
    set(d, "description", descIn.value.trim());
    const labels = parseLines(labelsIn.value, "labels", ["=", ":"], "key=value", errors);
    set(d, "labels", Object.keys(labels).length ? labels : undefined);
    d.enabled = enabledIn.checked;
    set(d, "timeout", timeoutIn.value.trim());
    d.overlap = overlapIn.value;
    set(d, "max_concurrent", wholeNumber(maxConcurrentIn.value, "max_concurrent", errors));
    set(d, "catchup", catchupIn.value.trim());
    set(d, "min_gap", minGapIn.value.trim());
    set(d, "jitter", jitterIn.value.trim());
    set(d, "pause_after_failures", wholeNumber(pauseAfterIn.value, "pause_after_failures", errors));
    if (kindIn.value === "nats") {
      delete d.http;
      delete d.sql;
      delete d.river;
      const np = { subject: natsSubjectIn.value.trim() };
      set(np, "url", natsURLIn.value.trim());
      set(np, "url_secret", natsSecretIn.value.trim());
      set(np, "body", natsBodyIn.value);
      d.nats = np; // its retries are kept as they were (the defaults for a new job)
    } else if (kindIn.value === "http") {
      delete d.sql;
      delete d.nats;
      delete d.river;
      const hp = { ...(d.http || {}) };
      hp.method = methodIn.value;
      hp.url = urlIn.value.trim();
      const headers = parseLines(headersIn.value, "http.headers", [":"], "Name: value", errors);
      set(hp, "headers", Object.keys(headers).length ? headers : undefined);
      set(hp, "body", bodyIn.value);
      set(hp, "timeout", attemptTimeoutIn.value.trim());
      const secret = authSecretIn.value.trim();
      if (authIn.value === "bearer") hp.auth = { bearer_secret: secret };
      else if (authIn.value === "header") hp.auth = { header: authHeaderIn.value.trim(), header_secret: secret };
      else if (authIn.value === "oidc") hp.auth = { oidc: { audience: authAudienceIn.value.trim() } };
      else delete hp.auth;
      set(hp, "signing_secret", signingIn.value.trim());
      const success = [];
      for (const s of successIn.value.split(/[\s,]+/).filter(Boolean)) {
        if (/^\d+$/.test(s)) success.push(Number(s));
        else errors.push({ field: "http.success", detail: `“${s}” is not a status: write numbers such as 200, 204` });
      }
      set(hp, "success", success.length ? success : undefined);
      d.http = hp;
      const attempts = wholeNumber(attemptsIn.value, "retry.max_attempts", errors);
      const initial = initialBackoffIn.value.trim();
      const longest = maxBackoffIn.value.trim();
      if (attempts === undefined && !initial && !longest) delete d.retry;
      else {
        d.retry = { max_attempts: attempts ?? 3 };
        set(d.retry, "initial_backoff", initial);
        set(d.retry, "max_backoff", longest);
      }
    } else if (kindIn.value === "sql") {
      delete d.http;
      delete d.river;
      delete d.nats;
      delete d.retry; // a SQL job commits once: it has no retries
      d.sql = { target: sqlTargetIn.value.trim(), statements: statementsIn.value };
    } else {
      delete d.http;
      delete d.sql;
      delete d.nats;
      delete d.retry; // a River job's insert commits once: River retries the job itself
      d.river = { target: riverTargetIn.value.trim(), kind: riverKindIn.value.trim() };
      set(d.river, "queue", riverQueueIn.value.trim());
      if (riverArgsIn.value.trim()) {
        try {
          d.river.args = JSON.parse(riverArgsIn.value);
        } catch (e) {
          d.river.args = riverArgsIn.value; // sent as text, which the server refuses on river.args
          errors.push({ field: "river.args", detail: `not JSON: ${e.message}; write an object such as {"region": "eu"}` });
        }
      }
      if (riverUniqueIn.checked) d.river.unique = true;
    }
    return { def: d, errors };
  }

  // fieldFor finds the input that shows the errors of path, and what of the path it leaves
  // unsaid ("X-Token" of "http.headers.X-Token"); null when no input shows it now.
  function fieldFor(p) {
    let hit = fields.get(p) || aliases.get(p) ? { f: fields.get(p) || aliases.get(p), rest: "" } : null;
    if (!hit) {
      for (const f of fields.values()) if (f.prefix && p.startsWith(f.path + ".")) hit = { f, rest: p.slice(f.path.length + 1) };
    }
    if (!hit && /^schedule\[\d+\]$/.test(p) && fields.get("schedule")) hit = { f: fields.get("schedule"), rest: p };
    if (hit && hit.f.box.closest("[hidden]")) return null;
    return hit;
  }

  function clearErrors() {
    for (const f of fields.values()) {
      f.err.hidden = true;
      f.err.textContent = "";
      describe(f, false);
    }
    problems.hidden = true;
    replace(problems);
  }

  // showErrors puts each error beside its input and the others at the top. only, when set,
  // keeps those of the fields it names (a preview while typing shows no error yet about a
  // field not filled in). Returns how many it showed.
  function showErrors(list, only) {
    // What is already shown stays shown until fixed, touched or not.
    const shown = new Set([...fields.values()].filter((f) => !f.err.hidden).map((f) => f.path));
    const topShown = !problems.hidden;
    clearErrors();
    const byField = new Map();
    const top = [];
    for (const e of list) {
      const detail = e.detail || e.message || "is invalid";
      const hit = fieldFor(e.field || "");
      if (hit && only && !only.has(hit.f.path) && !shown.has(hit.f.path)) continue;
      if (!hit && only && !topShown) continue;
      if (!hit) { top.push(e); continue; }
      if (!byField.has(hit.f)) byField.set(hit.f, []);
      byField.get(hit.f).push(hit.rest ? `${hit.rest}: ${detail}` : detail);
    }
    for (const [f, msgs] of byField) {
      f.err.textContent = `✗ ${msgs.join(" · ")}`;
      f.err.hidden = false;
      describe(f, true);
      const d = f.box.closest("details");
      if (d) d.open = true;
    }
    // In the order they appear, as the focus will go through them.
    const marked = [...fields.values()].filter((f) => byField.has(f)).sort((a, b) =>
      a.input.compareDocumentPosition(b.input) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1);
    if (top.length || marked.length) {
      problems.hidden = false;
      const n = top.length + [...byField.values()].reduce((a, m) => a + m.length, 0);
      replace(problems,
        h("h2", {}, n === 1 ? "1 problem to fix" : `${n} problems to fix`),
        top.length ? h("ul", { id: "form-problems-top" }, top.map((e) =>
          h("li", {}, e.field ? [h("code", {}, e.field), ": "] : null, e.detail || e.message || ""))) : null,
        marked.length ? h("p", {}, top.length ? "And beside their fields: " : "Beside their fields: ",
          marked.map((f, i) => [i ? ", " : "", h("a", {
            href: `#${f.input.id}`, onclick: (ev) => { ev.preventDefault(); f.input.focus(); },
          }, f.label)]), ".") : null);
    }
    return top.length + byField.size;
  }

  // problem shows one message at the top, for a refusal that is about no field.
  function problem(text, extra) {
    clearErrors();
    problems.hidden = false;
    replace(problems, h("p", {}, `✗ ${text}`), extra || null);
  }

  function ifMatch() { return editing && version !== null ? { "If-Match": `"${version}"` } : undefined; }

  function showPreview(v) {
    const next = v.next_runs || [];
    update(previewStatus, `✓ The server accepts this job${editing ? "" : "; it is not created until you save it"}.`);
    replace(previewEl,
      h("dl", { class: "facts" },
        h("dt", {}, "When"), h("dd", { id: "preview-when" }, v.schedule_text || v.schedule),
        h("dt", {}, "Target"), h("dd", { class: "mono target" }, v.target || "—")),
      h("h3", {}, "Next five runs"),
      next.length
        ? h("ol", { class: "next-runs", id: "preview-runs" }, next.map((t) => h("li", {}, when(t), dstNote(v, t))))
        : h("p", { class: "muted" }, v.enabled === false ? "None: the job would be disabled." : "None to come."),
      clockChanges(v));
  }

  // failure shows why the server refused a preview or a save. A save's failure moves the
  // focus to what needs fixing: the first marked input, else the list at the top.
  function failure(e, what, focus, auto) {
    let marked = 0;
    if (e.status === 409 && e.body && String(e.body.type || "").endsWith("/job-exists") && !(e.body.errors || []).length) {
      e.body.errors = [{ field: "name", detail: e.body.detail || e.body.title }];
    }
    if ((e.status === 422 || e.status === 409 || e.status === 400) && e.body && Array.isArray(e.body.errors) && e.body.errors.length) {
      marked = showErrors(e.body.errors, auto ? touched : null);
      const n = e.body.errors.length;
      update(previewStatus, `✗ ${n === 1 ? "1 problem" : `${n} problems`}: ${auto && !marked ? "Preview lists them" : "see the marked fields"}.`);
    } else if (e.status === 412) {
      const reload = h("button", { type: "button", id: "reload-job", onclick: () => { loaded = false; refreshNow(); } }, "Reload the job");
      problem(`Someone else changed this job since you opened it; reload it to see their version, then make your changes again. ${what} did nothing.`, reload);
      update(previewStatus, "✗ Someone else changed this job.");
    } else if (e.status === 403) {
      refused = true;
      problem(`Refused: ${e.message}`);
      reloadPowers();
      update(previewStatus, "✗ Refused.");
    } else if (e.status !== 401) {
      problem(`${what} failed — ${e.message}`);
      update(previewStatus, `✗ ${what} failed.`);
    }
    if (e.status === 422 || e.status === 412 || e.status === 403) replace(previewEl);
    if (focus) {
      const first = form.querySelector('[aria-invalid="true"]');
      (first || problems).focus();
    }
  }

  async function preview(auto) {
    clearTimeout(debounce);
    if (!loaded || whyEdit) return;
    const { def, errors } = readForm();
    const seq = ++previewSeq;
    if (errors.length) {
      showErrors(errors, auto ? touched : null);
      update(previewStatus, `✗ ${errors.length === 1 ? "1 problem" : `${errors.length} problems`}: see the marked fields.`);
      return;
    }
    if (!auto) update(previewStatus, "Checking…");
    try {
      const res = editing
        ? await api("PUT", `${path}?dry_run=true`, def, ifMatch())
        : await api("POST", `${jobsPath(ns)}?dry_run=true`, def);
      if (seq !== previewSeq) return; // an older answer than the one shown
      clearErrors();
      showPreview(res.data);
    } catch (e) {
      if (seq === previewSeq) failure(e, "Preview", false, auto);
    }
  }

  async function save() {
    clearTimeout(debounce);
    if (!loaded || saving || whyEdit) return;
    previewSeq++; // a preview still on its way would only repeat what this says
    const { def, errors } = readForm();
    if (errors.length) {
      showErrors(errors, null);
      (form.querySelector('[aria-invalid="true"]') || problems).focus();
      return;
    }
    saving = true;
    gate(saveBtn, false, whyEdit, why);
    try {
      const why = reasonHeader(reasonIn.value.trim());
      const res = editing ? await api("PUT", path, def, { ...ifMatch(), ...why }) : await api("POST", path, def, why);
      const v = res.data && res.data.version;
      navigate(jobHash(ns, def.name),
        editing ? `Saved ${def.name}${v ? ` (version ${v})` : ""}.` : `Created ${def.name}.`);
    } catch (e) {
      failure(e, editing ? "Saving" : "Creating the job", true, false);
    } finally {
      saving = false;
      gate(saveBtn, loaded, whyEdit, why);
    }
  }

  form.addEventListener("submit", (ev) => { ev.preventDefault(); save(); });
  previewBtn.addEventListener("click", () => preview(false));
  const edited = (ev) => {
    const box = ev.target.closest && ev.target.closest("[data-field]");
    if (box) touched.add(box.dataset.field);
    clearTimeout(debounce);
    if (!refused) debounce = setTimeout(() => preview(true), PREVIEW_DEBOUNCE_MS);
  };
  form.addEventListener("input", edited);
  form.addEventListener("change", edited);
  showKind();

  // The form is filled once; refreshing it would overwrite what is being typed. Reload
  // (after a 412) fills it again from the server.
  async function refresh() {
    if (loaded) return;
    const { data: job } = await api("GET", path);
    if (!isRuntime(job)) {
      replace(main, h("p", {}, h("a", { href: jobHash(ns, name) }, `← ${name}`)),
        h("h1", { tabindex: "-1" }, `${name} cannot be edited`),
        h("p", {}, `${name} is a built-in job: its definition is compiled into the scheduler. Its schedule, timeout and catch-up are set with SCHEDULER_JOB_<NAME>_* variables on the replicas.`));
      loaded = true;
      return;
    }
    version = job.version ?? null;
    clearErrors();
    replace(previewEl);
    update(previewStatus, `Version ${version ?? "?"} as stored. Preview checks your changes; nothing is saved until you save.`);
    fill(job.definition || {});
    loaded = true;
    gate(saveBtn, true, whyEdit, why);
  }
  return { refresh, live: () => false };
}

