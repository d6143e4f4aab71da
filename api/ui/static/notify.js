// A job's notifications: the rules its definition names (notify) and the last messages they
// sent (GET …/notifications), so a team sees that a failure was heard, and where.
//
// A rule's webhook URL may carry a credential in its query or user info, and the job view
// shows the URL as it was written: the page shows its host only. A Slack URL is itself a
// secret's value, which the API never has to show: the rule names the secret.
"use strict";

const DELIVERY_SYMBOL = { sent: "✓", pending: "…", failed: "✗" };
const DELIVERY_CLASS = { sent: "s-succeeded", pending: "s-queued", failed: "s-failed" };
const DELIVERIES_SHOWN = 10;

// hostOf is the host (and port) of a URL, never its path, query or user info.
function hostOf(url) {
  try { return new URL(url).host || "(no host)"; } catch (e) { return "(not a URL)"; }
}

function ruleTarget(r) {
  if (r.webhook) return [h("span", { class: "mono" }, hostOf(r.webhook.url)), r.webhook.signing_secret ? " (signed)" : ""];
  if (r.slack) return ["Slack, its URL in secret ", h("span", { class: "mono" }, r.slack.url_secret)];
  return "—";
}

// destinationText is where a message went, as the API shows it (redacted): its host, or the
// Slack secret's name.
function destinationText(d) {
  if (d.kind === "slack") return d.destination ? d.destination.replace(/^slack:/, "Slack via ") : "Slack";
  return d.destination ? hostOf(d.destination) : d.kind;
}

function notifySection(ns, path) {
  const rulesEl = h("div", { id: "notify-rules" });
  const sentEl = h("div", { id: "deliveries" });
  let data = null;
  let last = 0;

  function render(job) {
    const rules = (job && (job.notify || (job.definition && job.definition.notify))) || [];
    update(rulesEl, !job ? h("p", { class: "muted" }, "…") : rules.length
      ? table("stack notify-rules", ["Events", "Kind", "Sent to"], rules.map((r) => h("tr", {},
        td("Events", (r.on || []).map((e) => e.replace("_", " ")).join(", ")),
        td("Kind", r.slack ? "Slack" : "webhook"),
        td("Sent to", ruleTarget(r)))))
      : h("p", { class: "muted" }, job.kind === "builtin"
        ? "No rules: a built-in job takes them from SCHEDULER_JOB_<NAME>_NOTIFY_* settings."
        : "No rules: nobody is told when a run fails. Edit the job to add notify rules."));
    if (!data) return;
    const waiting = data.waiting || [];
    update(sentEl,
      table("stack deliveries", ["When", "Event", "Runs", "To", "Status", "Attempts", "Last error"], data.notifications.map((d) =>
        h("tr", { "data-key": d.id, "data-delivery": d.id, "data-status": d.status },
          td("When", when(d.sent_at || d.created_at)),
          td("Event", d.event.replace("_", " ")),
          td("Runs", d.runs.length
            ? d.runs.slice(0, 5).map((id, i) => [i ? ", " : "", h("a", { href: hashFor(ns, `runs/${id}`) }, `#${id}`)]).concat(d.runs.length > 5 ? ` and ${d.runs.length - 5} more` : [])
            : h("span", { class: "muted" }, "—")),
          td("To", destinationText(d)),
          td("Status", h("span", { class: `status ${DELIVERY_CLASS[d.status] || ""}` }, `${DELIVERY_SYMBOL[d.status] || ""} ${d.status}`),
            d.next_attempt_at ? h("span", { class: "muted" }, " next ", when(d.next_attempt_at)) : null),
          td("Attempts", String(d.attempts)),
          td("Last error", d.error ? [d.status_code ? `HTTP ${d.status_code}: ` : "", d.error] : h("span", { class: "muted" }, "—")))),
      "No message sent yet."),
      waiting.length ? h("p", { class: "muted", id: "notify-waiting" },
        `${waiting.length} event${waiting.length === 1 ? "" : "s"} wait${waiting.length === 1 ? "s" : ""} for the coalescing interval (SCHEDULER_NOTIFY_INTERVAL) before ${waiting.length === 1 ? "its" : "their"} message goes out.`) : null);
  }

  return {
    el: h("section", { "aria-labelledby": "notify-h" },
      h("h2", { id: "notify-h", tabindex: "-1" }, "Notifications"),
      rulesEl,
      h("h3", {}, "Last messages"), sentEl),
    async refresh(job) {
      if (Date.now() - last >= ACCT_EVERY_MS) {
        data = (await api("GET", `${path}/notifications?limit=${DELIVERIES_SHOWN}`)).data;
        last = Date.now();
      }
      render(job);
    },
  };
}
