// Monitoring: per version, rule shares over time (small multiples, one panel per rule) against the training
// shares, the drift score (PSI) with its verdict, and missing-value fills. A version is judged for drift
// only once it has made enough decisions (the server says how many: `min_decisions`).

import { get, qs, seg } from "../api.js";
import { fmt, h, pct } from "../dom.js";
import { shareBars, shareSmallMultiples } from "../charts.js";
import { badge, errorBox, facts, field, notice, pageHeader, section } from "../ui.js";

const STATE = {
  ok: { label: "ok", badge: "succeeded" },
  alert: { label: "drift alert", badge: "failed" },
  insufficient_data: { label: "insufficient data", badge: "neutral" },
  no_training_counts: { label: "no training counts", badge: "neutral" },
};

function localInput(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

const ruleName = (id) => (id === 0 ? "default" : `rule ${id}`);

/** The verdict: the server's drift_state (older servers: from `alert`). */
function stateOf(v) {
  return v.drift_state || (v.drift_psi === null ? "no_training_counts" : v.alert ? "alert" : "ok");
}

function driftGauge(v, threshold) {
  const state = stateOf(v);
  const max = Math.max(threshold * 2, v.drift_psi || 0) || 1;
  const fill = h("span", { class: `meter-fill ${state === "alert" ? "meter-bad" : "meter-ok"}` });
  fill.style.width = `${Math.min(100, ((v.drift_psi || 0) / max) * 100).toFixed(1)}%`;
  const mark = h("span", { class: "gauge-threshold", title: `alert threshold ${threshold}` });
  mark.style.left = `${((threshold / max) * 100).toFixed(1)}%`;
  const note = {
    alert: `(alert at ${threshold})`,
    ok: `(alert at ${threshold})`,
    insufficient_data: `(not judged: ${fmt(v.total)} of the ${fmt(v.min_decisions)} decisions needed)`,
    no_training_counts: "(no training counts in the document)",
  }[state];
  return h(
    "div",
    { class: `gauge${state === "insufficient_data" || state === "no_training_counts" ? " gauge-muted" : ""}`, role: "img", "aria-label": `drift PSI ${fmt(v.drift_psi, 3)} ${note}` },
    h("span", { class: "meter-track gauge-track" }, fill, mark),
    h("span", { class: "gauge-label" }, `PSI ${fmt(v.drift_psi, 3)} `, h("span", { class: "muted", text: note })),
  );
}

function stateNotice(v, threshold) {
  const state = stateOf(v);
  if (state === "alert") return notice("error", h("strong", { text: "Drift alert: " }), `the rule shares of version ${v.version} have moved away from training (PSI ${fmt(v.drift_psi, 3)} ≥ ${threshold}). Check the inputs, or retrain.`);
  if (state === "insufficient_data") return notice("info", h("strong", { text: "Not enough decisions to judge drift: " }), `${fmt(v.total)} in this window, ${fmt(v.min_decisions)} needed. A PSI on so few decisions is noise; it is shown for information only and raises no alert.`);
  return null;
}

function sharesOverTime(v, since, until) {
  const buckets = v.series.map((b) => ({ start: new Date(b.start), end: new Date(b.end), total: b.total, shares: b.shares }));
  const rules = v.rules.map((r) => ({ id: String(r.rule_id), name: ruleName(r.rule_id), title: r.rule_text, share: r.share, training: r.training_share }));
  return shareSmallMultiples({ title: "Rule shares over time against training", since, until, buckets, rules });
}

function versionView(name, v, m) {
  const state = stateOf(v);
  const since = new Date(m.since);
  const until = new Date(m.until);
  return section(
    `Version ${v.version}${v.aliases.length ? ` (${v.aliases.join(", ")})` : ""}`,
    stateNotice(v, m.alert_threshold),
    h("div", { class: "monitor-head" }, driftGauge(v, m.alert_threshold), facts([["Decisions", v.total], ["Records with filled missing values", pct(v.missing_filled_share)], ["Drift", badge(STATE[state].label, STATE[state].badge)]])),
    sharesOverTime(v, since, until),
    shareBars({ title: "Share of decisions per rule: window against training", items: v.rules.map((r) => ({ label: ruleName(r.rule_id), title: r.rule_text, a: r.share, b: r.training_share })), aLabel: "window", bLabel: "training" }),
    h("p", {}, h("a", { href: `#/models/${seg(name)}/${v.version}`, text: `Open version ${v.version}` })),
  );
}

function summaryNotice(m) {
  const by = (state) => m.versions.filter((v) => stateOf(v) === state).map((v) => v.version);
  const alerts = by("alert");
  const thin = by("insufficient_data");
  if (alerts.length) return notice("error", h("strong", { text: "Drift alert" }), ` on version(s) ${alerts.join(", ")}.`);
  if (!m.versions.length) return null;
  if (thin.length === m.versions.length) return notice("info", `Not enough decisions in this window to judge drift (version(s) ${thin.join(", ")}).`);
  return notice("success", `No version crossed the drift threshold in this window${thin.length ? ` (not judged, too few decisions: version(s) ${thin.join(", ")})` : ""}.`);
}

function summaryView(m) {
  const minimum = m.drift_min_decisions !== undefined ? `${fmt(m.drift_min_decisions)} decisions and ${fmt(m.drift_min_decisions_per_rule)} per rule` : null;
  return section(
    "Summary",
    facts([["Decisions", m.total], ["From", new Date(m.since).toLocaleString()], ["Until", new Date(m.until).toLocaleString()], ["Alert threshold (PSI)", m.alert_threshold], minimum ? ["Judged from", minimum] : null]),
    summaryNotice(m),
  );
}

/** #/models/<name>/monitoring?since=&until=&buckets= */
export async function monitoringPage(ctx, name) {
  const q = ctx.query;
  const asked = (key) => (q.get(key) ? new Date(q.get(key)) : null);
  const bad = ["since", "until"].filter((k) => asked(k) && Number.isNaN(asked(k).getTime()));
  const until = !bad.length && asked("until") ? asked("until") : new Date(Date.now() + 60_000);
  const since = !bad.length && asked("since") ? asked("since") : new Date(until.getTime() - 7 * 24 * 3600 * 1000);
  const buckets = q.get("buckets") || "24";
  const badNote = bad.length ? notice("warning", `The address holds a time that is not a date (${bad.join(", ")}); showing the 7 days up to now.`) : null;
  const sinceIn = h("input", { type: "datetime-local", name: "since", value: localInput(since), required: true });
  const untilIn = h("input", { type: "datetime-local", name: "until", value: localInput(until), required: true });
  const bucketsIn = h("input", { type: "number", name: "buckets", min: 1, max: 200, value: buckets, required: true });
  const form = h("form", { class: "monitor-form" }, h("div", { class: "form-row" }, field("From", sinceIn), field("Until", untilIn), field("Time buckets", bucketsIn)), h("div", { class: "form-actions" }, h("button", { type: "submit", class: "btn btn-primary", text: "Show" })));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/models/${seg(name)}/monitoring${qs({ since: new Date(sinceIn.value).toISOString(), until: new Date(untilIn.value).toISOString(), buckets: bucketsIn.value })}`;
  });
  let body;
  try {
    const m = await get(`/v1/models/${seg(`${name}@latest`)}/monitoring${qs({ since: since.toISOString(), until: until.toISOString(), buckets })}`);
    body = [summaryView(m), m.versions.length ? m.versions.map((v) => versionView(name, v, m)) : notice("info", "No decision in this window: predictions sent to this model appear here.")];
  } catch (err) {
    body = errorBox(err, "Could not load monitoring");
  }
  return h("div", {}, pageHeader(`Monitoring ${name}`, h("span", {}, h("a", { href: `#/models/${seg(name)}`, text: name }), " / decisions from the audit log")), badNote, section("Window", form), body);
}
