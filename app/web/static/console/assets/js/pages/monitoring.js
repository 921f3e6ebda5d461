// Monitoring: for each version that decided something in the window, rule shares over time against
// the training shares, the drift score (PSI) with the alert threshold, and missing-value fills.

import { get, qs, seg } from "../api.js";
import { fmt, h, pct } from "../dom.js";
import { PALETTE, lineChart, shareBars } from "../charts.js";
import { badge, errorBox, facts, field, notice, pageHeader, section } from "../ui.js";

function localInput(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function driftGauge(v, threshold) {
  const max = Math.max(threshold * 2, v.drift_psi || 0) || 1;
  const fill = h("span", { class: `meter-fill ${v.alert ? "meter-bad" : "meter-ok"}` });
  fill.style.width = `${Math.min(100, ((v.drift_psi || 0) / max) * 100).toFixed(1)}%`;
  const mark = h("span", { class: "gauge-threshold", title: `alert threshold ${threshold}` });
  mark.style.left = `${((threshold / max) * 100).toFixed(1)}%`;
  return h(
    "div",
    { class: "gauge", role: "img", "aria-label": `drift PSI ${fmt(v.drift_psi, 3)}, alert threshold ${threshold}` },
    h("span", { class: "meter-track gauge-track" }, fill, mark),
    h("span", { class: "gauge-label" }, `PSI ${fmt(v.drift_psi, 3)} `, h("span", { class: "muted", text: v.drift_psi === null ? "(no training counts in the document)" : `(alert at ${threshold})` })),
  );
}

function seriesChart(v) {
  const rules = v.rules.map((r) => String(r.rule_id));
  const series = [];
  v.rules.forEach((r, i) => {
    const color = PALETTE[i % PALETTE.length];
    const name = r.rule_id === 0 ? "default" : `rule ${r.rule_id}`;
    const points = v.series.filter((b) => b.total > 0).map((b) => ({ x: new Date(b.start), y: b.shares[String(r.rule_id)] ?? 0 }));
    if (points.length) {
      series.push({ name, points, color });
      series.push({ name: `${name} (training)`, points: [{ x: points[0].x, y: r.training_share }, { x: points[points.length - 1].x, y: r.training_share }], color, dashed: true });
    }
  });
  if (!series.length || !rules.length) return h("p", { class: "muted", text: "No decision in this window." });
  return lineChart({ title: "Rule shares over time (solid) against training (dashed)", series, xLabel: "time (bucket start)", yLabel: "share of decisions", yDomain: [0, Math.min(1, Math.max(0.1, ...series.flatMap((sr) => sr.points.map((p) => p.y))) * 1.1)], yFormat: (t) => pct(t, 0), width: 680, height: 300 });
}

function versionView(name, v, threshold) {
  return section(
    `Version ${v.version}${v.aliases.length ? ` (${v.aliases.join(", ")})` : ""}`,
    v.alert ? notice("error", h("strong", { text: "Drift alert: " }), `the rule shares of version ${v.version} have moved away from training (PSI ${fmt(v.drift_psi, 3)} ≥ ${threshold}). Check the inputs, or retrain.`) : null,
    h("div", { class: "monitor-head" }, driftGauge(v, threshold), facts([["Decisions", v.total], ["Records with filled missing values", pct(v.missing_filled_share)], ["Status", badge(v.alert ? "alert" : "ok", v.alert ? "failed" : "succeeded")]])),
    h(
      "div",
      { class: "chart-row" },
      seriesChart(v),
      shareBars({ title: "Share of decisions per rule: window against training", items: v.rules.map((r) => ({ label: r.rule_id === 0 ? "default" : `rule ${r.rule_id}`, title: r.rule_text, a: r.share, b: r.training_share })), aLabel: "live", bLabel: "training" }),
    ),
    h("p", {}, h("a", { href: `#/models/${seg(name)}/${v.version}`, text: `Open version ${v.version}` })),
  );
}

/** #/models/<name>/monitoring?since=&until=&buckets= */
export async function monitoringPage(ctx, name) {
  const q = ctx.query;
  const until = q.get("until") ? new Date(q.get("until")) : new Date(Date.now() + 60_000);
  const since = q.get("since") ? new Date(q.get("since")) : new Date(until.getTime() - 7 * 24 * 3600 * 1000);
  const buckets = q.get("buckets") || "24";
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
    body = [
      section("Summary", facts([["Decisions", m.total], ["From", new Date(m.since).toLocaleString()], ["Until", new Date(m.until).toLocaleString()], ["Alert threshold (PSI)", m.alert_threshold]]), m.versions.some((v) => v.alert) ? notice("error", h("strong", { text: "Drift alert" }), ` on version(s) ${m.versions.filter((v) => v.alert).map((v) => v.version).join(", ")}.`) : notice("success", "No version crossed the drift threshold in this window.")),
      m.versions.length ? m.versions.map((v) => versionView(name, v, m.alert_threshold)) : notice("info", "No decision in this window: predictions sent to this model appear here."),
    ];
  } catch (err) {
    body = errorBox(err, "Could not load monitoring");
  }
  return h("div", {}, pageHeader(`Monitoring ${name}`, h("span", {}, h("a", { href: `#/models/${seg(name)}`, text: name }), " / decisions from the audit log")), section("Window", form), body);
}
