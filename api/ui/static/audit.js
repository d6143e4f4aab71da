// The audit log: every action, filtered by job, action, token, namespace and time, with what
// each change of a runtime job's definition changed.
"use strict";

// auditEverywhere outlives the page: a token that reads every namespace may list every
// namespace's actions and the cluster's own (step-downs, tokens, namespaces), which belong
// to none.
let auditEverywhere = false;

// The actions an audit row may name (GET /v1/audit?action=).
const AUDIT_ACTIONS = ["trigger", "cancel", "pause", "resume", "step-down", "refused", "create", "update", "delete",
  "auto-pause", "failover", "namespace", "token-create", "token-revoke", "secret-put", "secret-delete", "rerun",
  "backfill", "backfill-cancel", "oidc-rotate"];

// flatten lists a definition's values by their path (http.url), each as text.
function flatten(v, path, out) {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    for (const k of Object.keys(v)) flatten(v[k], path ? `${path}.${k}` : k, out);
  } else if (path) {
    out.set(path, typeof v === "string" ? v : JSON.stringify(v));
  }
  return out;
}

// diffList says field by field what a definition change changed: the old value struck out,
// the new one after it, each also said in words for a screen reader.
function diffList(before, after) {
  const was = flatten(before, "", new Map());
  const now = flatten(after, "", new Map());
  const keys = [...new Set([...was.keys(), ...now.keys()])].sort().filter((k) => was.get(k) !== now.get(k));
  if (!keys.length) return h("p", { class: "muted" }, "No field changed.");
  const sr = (t) => h("span", { class: "sr-only" }, t);
  return h("ul", { class: "diff" }, keys.map((k) => h("li", {},
    h("code", {}, k), ": ",
    was.has(k) ? h("del", {}, sr("was "), was.get(k)) : null,
    was.has(k) && now.has(k) ? " → " : null,
    now.has(k) ? h("ins", {}, sr("now "), now.get(k)) : null,
    !was.has(k) ? h("span", { class: "muted" }, " (added)") : !now.has(k) ? h("span", { class: "muted" }, " (removed)") : null)));
}

// fieldList shows a whole definition (created, or deleted) field by field.
function fieldList(def) {
  return h("ul", { class: "diff" }, [...flatten(def, "", new Map())].sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => h("li", {}, h("code", {}, k), ": ", v)));
}

// changeView shows an audit row's detail: an update's changed fields; a create's, a delete's
// or another action's detail behind a Show button (open: shown), which the page's click
// handler toggles.
function changeView(a, open) {
  const d = a.detail;
  if (!d) return "—";
  const change = "before" in d && "after" in d;
  if (change && d.before && d.after) return diffList(d.before, d.after);
  const what = !change ? "detail" : d.before ? "definition deleted" : "definition created";
  const id = `detail-${a.id}`;
  return [
    h("button", { type: "button", class: "link", "data-expand": a.id, "aria-expanded": open ? "true" : "false", "aria-controls": id },
      `${open ? "Hide" : "Show"} ${what}`),
    h("div", { id, hidden: !open }, open ? (change ? fieldList(d.before || d.after) : h("pre", { class: "detail" }, JSON.stringify(d, null, 2))) : null),
  ];
}

function auditPage(ns, params) {
  const body = h("div");
  const readsAll = ((session.who && session.who.grants) || []).some((g) => g.namespace === "*");
  const everywhere = () => readsAll && auditEverywhere;
  let cursors = [];
  let cursor = null;
  let nextCursor = null;
  let shown = null; // the page of rows shown, drawn again when a detail opens or closes
  const open = new Set(); // the ids of the rows whose detail is shown
  const pager = newPager({
    newest: () => { cursors = []; cursor = null; },
    older: () => { cursors.push(cursor); cursor = nextCursor; },
  });
  const all = h("input", { type: "checkbox", id: "audit-all", name: "everywhere", checked: everywhere() });
  all.addEventListener("change", () => { auditEverywhere = all.checked; cursors = []; cursor = null; refreshNow(); });

  // The filters, from the address (#/audit?job=NAME) first. Times are UTC, as shown.
  const text = (id, name) => h("input", { type: "text", id, name, value: params.get(name) || "", autocomplete: "off" });
  const jobIn = text("af-job", "job");
  const tokenIn = text("af-token", "token");
  const actionSel = h("select", { id: "af-action", name: "action" }, h("option", { value: "" }, "any"), AUDIT_ACTIONS.map((a) => h("option", { value: a }, a)));
  actionSel.value = params.get("action") || "";
  const utc = (iso) => (iso ? iso.replace(/Z$/, "").slice(0, 19) : "");
  const time = (id, name) => h("input", { type: "datetime-local", id, name, step: "1", value: utc(params.get(name)) });
  const sinceIn = time("af-since", "since");
  const untilIn = time("af-until", "until");
  const fields = { job: jobIn, action: actionSel, token: tokenIn, since: sinceIn, until: untilIn };
  const problems = h("div", { id: "audit-problems" });
  let invalid = false; // the server refused the filters: asking again would only repeat it

  function filters() {
    const q = new URLSearchParams();
    for (const [name, el] of Object.entries(fields)) {
      const v = el.value.trim();
      if (!v) continue;
      q.set(name, el.type === "datetime-local" ? new Date(`${v}Z`).toISOString() : v);
    }
    return q;
  }
  // apply lists the first page of what the filters select, and keeps them in the address.
  function apply() {
    cursors = [];
    cursor = null;
    const q = filters().toString();
    history.replaceState(null, "", hashFor(ns, "audit") + (q ? `?${q}` : ""));
    refreshNow();
  }
  const form = h("form", { class: "filters audit-filters", role: "search", "aria-label": "Filter the audit log", onsubmit: (ev) => { ev.preventDefault(); apply(); } },
    h("label", { for: "af-job" }, "Job", jobIn),
    h("label", { for: "af-action" }, "Action", actionSel),
    h("label", { for: "af-token" }, "Token (id, name or kind)", tokenIn),
    h("label", { for: "af-since" }, "From (UTC)", sinceIn),
    h("label", { for: "af-until" }, "Until (UTC)", untilIn),
    h("button", { type: "submit", class: "primary", id: "af-apply" }, "Filter"),
    h("button", { type: "button", id: "af-clear", onclick: () => { for (const el of Object.values(fields)) el.value = ""; apply(); } }, "Clear"));
  actionSel.addEventListener("change", apply);

  body.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-expand]");
    if (!button) return;
    const id = Number(button.dataset.expand);
    if (open.has(id)) open.delete(id); else open.add(id);
    if (shown) render(shown);
  });

  replace(main, h("h1", { tabindex: "-1" }, ns === DEFAULT_NS ? "Audit" : `Audit of ${ns}`),
    h("p", { class: "muted" }, "Every action taken through the API or this dashboard: runs triggered and cancelled, jobs created, changed, deleted, paused and resumed, leaders stepped down; with the reason given and, for a job's definition, what changed."),
    readsAll ? h("div", { class: "filters" }, h("label", { class: "check", for: "audit-all" }, all,
      ` Every namespace, and the cluster's own actions (step-downs, tokens, namespaces), not only ${ns}`)) : null,
    form, problems, body, pager.el);

  // showProblems marks the filters the server refused, each with its reason.
  function showProblems(errors) {
    for (const el of Object.values(fields)) { el.removeAttribute("aria-invalid"); }
    invalid = errors.length > 0;
    for (const e of errors) if (fields[e.field]) fields[e.field].setAttribute("aria-invalid", "true");
    // Morphed, not replaced: an alert that stays the same is not announced again.
    update(problems, !invalid ? null : h("div", { class: "form-problems", role: "alert" },
      h("h2", {}, errors.length === 1 ? "1 filter is not valid" : `${errors.length} filters are not valid`),
      h("ul", {}, errors.map((e) => h("li", {}, h("strong", {}, e.field), ": ", e.detail)))));
  }

  function render(data) {
    const wide = everywhere();
    const heads = ["When", "Action", wide ? "Namespace" : null, "Job", "Run", "Token", "Reason", "Change", "Request", "Client"].filter(Boolean);
    update(body, table("stack audit", heads, data.actions.map((a) => {
      const ans = a.namespace || ns;
      return h("tr", { "data-key": a.id, "data-action": a.action },
        td("When", when(a.at)),
        td("Action", h("strong", {}, a.action)),
        wide ? td("Namespace", a.namespace || h("span", { class: "muted" }, "the cluster")) : null,
        td("Job", a.job ? h("a", { href: jobHash(ans, a.job) }, a.job) : "—"),
        td("Run", a.run_id ? h("a", { href: hashFor(ans, `runs/${a.run_id}`) }, `#${a.run_id}`) : "—"),
        td("Token", a.token_name ? [a.token_name, h("span", { class: "muted" }, ` (${a.token_kind})`)] : a.token_kind),
        td("Reason", a.reason || "—"),
        td("Change", changeView(a, open.has(a.id))),
        td("Request", h("span", { class: "mono" }, a.request_id)),
        td("Client", h("span", { class: "mono" }, a.remote_addr)));
    }), filters().toString() ? "No action matches these filters." : "No action recorded yet."));
  }

  async function refresh() {
    const q = filters();
    q.set("limit", "50");
    if (!everywhere()) q.set("namespace", ns);
    if (cursor) q.set("cursor", cursor);
    let data;
    try {
      data = (await api("GET", `/v1/audit?${q}`)).data;
    } catch (e) {
      if (e.status !== 400 || !e.body || !e.body.errors) throw e;
      showProblems(e.body.errors);
      shown = null;
      update(body);
      pager.show(false, false);
      return;
    }
    showProblems([]);
    shown = data;
    render(data);
    nextCursor = data.next_cursor;
    pager.show(cursors.length > 0, !!nextCursor);
  }
  return { refresh, live: () => cursors.length === 0 && !invalid };
}
