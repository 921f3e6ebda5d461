// The rule list drawn for people: "if / else if / else" cards, conditions as chips, and per rule
// its training support, class probabilities and held-out accuracy as small bars. This renders the
// stored document; deciding records is the server's job (models.RuleList), never done here.

import { fmt, h, pct } from "./dom.js";
import { PALETTE } from "./charts.js";
import { meter } from "./ui.js";

const MISSING = "<missing>";

/** A threshold as the document's text renders it (integers plain, else 6 significant digits). */
export function formatNumber(x) {
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return String(x);
  return String(Number(Number(x).toPrecision(6)));
}

function values(list) {
  return `{${list.map((v) => (v === null ? MISSING : v)).join(", ")}}`;
}

/** A condition as [feature, operator, value] text parts. */
export function conditionParts(c) {
  if (c.op === "between") {
    if (c.low !== null && c.low !== undefined && c.high !== null && c.high !== undefined)
      return [c.feature, "between", `${formatNumber(c.low)} and ${formatNumber(c.high)}`];
    if (c.low !== null && c.low !== undefined) return [c.feature, "≥", formatNumber(c.low)];
    return [c.feature, "≤", formatNumber(c.high)];
  }
  return [c.feature, c.op === "in" ? "is one of" : "is none of", values(c.values)];
}

/** A condition as one line of text. */
export function conditionText(c) {
  return conditionParts(c).join(" ");
}

/** A condition chip; state "holds" / "fails" marks it for explanations. */
export function chip(c, { state, extra } = {}) {
  const [feature, op, value] = conditionParts(c);
  const mark = state === "holds" ? "✓ " : state === "fails" ? "✗ " : "";
  return h(
    "span",
    { class: `chip${state ? ` chip-${state}` : ""}`, title: conditionText(c) },
    mark ? h("span", { class: "chip-mark", "aria-label": state === "holds" ? "holds:" : "fails:", text: mark }) : null,
    h("span", { class: "chip-feature", text: feature }),
    " ",
    h("span", { class: "chip-op", text: op }),
    " ",
    h("span", { class: "chip-value", text: value }),
    extra || null,
  );
}

/** The predicted class of a rule: arg max of its probabilities, first class on ties. */
export function predictionOf(doc, probabilities) {
  let best = 0;
  probabilities.forEach((p, i) => {
    if (p > probabilities[best]) best = i;
  });
  return doc.classes[best];
}

/** Class probabilities as one small bar per class. */
export function classBars(classes, probabilities) {
  return h(
    "div",
    { class: "class-bars" },
    classes.map((c, i) => {
      const bar = meter(probabilities[i], { label: `P(${c})` });
      bar.querySelector(".meter-fill").style.backgroundColor = PALETTE[i % PALETTE.length];
      return h("div", { class: "class-bar" }, h("span", { class: "class-name", text: `P(${fmt(c)})` }), bar);
    }),
  );
}

function heldoutCell(entry) {
  if (!entry) return h("span", { class: "muted small", text: "no held-out figure yet" });
  if (entry.n === 0 || entry.accuracy === null) return h("span", { class: "muted small", text: `decided no held-out row (${entry.source})` });
  return h("span", { title: `from the ${entry.source}` }, meter(entry.accuracy, { label: "held-out accuracy", kind: "ok" }), h("span", { class: "muted small", text: ` n=${entry.n}` }));
}

/**
 * The rule list: doc is the `neurules.rulelist` document; heldout maps rule id (0 = default) to
 * {accuracy, n, source}.
 */
export function ruleListView(doc, heldout = new Map()) {
  const totalSupport = [...doc.rules, doc.default].reduce((a, r) => a + r.class_counts.reduce((x, y) => x + y, 0), 0) || 1;
  const card = (ruleId, keyword, rule) => {
    const support = rule.class_counts.reduce((a, b) => a + b, 0);
    const pred = predictionOf(doc, rule.probabilities);
    return h(
      "li",
      { class: `rule${ruleId === 0 ? " rule-default" : ""}`, "data-rule-id": ruleId },
      h(
        "div",
        { class: "rule-logic" },
        h("span", { class: "rule-id", text: ruleId === 0 ? "default" : `rule ${ruleId}` }),
        h("span", { class: "kw", text: keyword }),
        ruleId === 0 ? null : h("span", { class: "chips" }, rule.conditions.length ? rule.conditions.map((c) => chip(c)) : h("span", { class: "chip", text: "always" })),
        h("span", { class: "kw", text: ruleId === 0 ? "" : "then" }),
        h("span", { class: "decision" }, `${doc.target} = `, h("strong", { text: fmt(pred) })),
      ),
      h(
        "div",
        { class: "rule-stats" },
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "training support" }), meter(support / totalSupport, { label: "training support", text: `${support} rows (${pct(support / totalSupport)})` })),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "class probabilities" }), classBars(doc.classes, rule.probabilities)),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "held-out accuracy" }), heldoutCell(heldout.get(ruleId))),
      ),
    );
  };
  return h(
    "ol",
    { class: "rule-list", "aria-label": "rule list, first matching rule decides" },
    doc.rules.map((r, i) => card(i + 1, i === 0 ? "if" : "else if", r)),
    card(0, doc.rules.length ? "else" : "always", doc.default),
  );
}
