// The rule list drawn for people: "if / else if / else" cards, conditions as chips, and per rule
// its training support, class probabilities and held-out accuracy as small bars. This renders the
// stored document; deciding records is the server's job (models.RuleList), never done here.

import { fmt, h, pct } from "./dom.js";
import { PALETTE } from "./charts.js";
import { meter } from "./ui.js";
import { ruleNodes, userText } from "./ruletext.js";

/**
 * A condition chip showing the server's text for it verbatim (`condition_texts` of the version, written by
 * the one renderer the service uses everywhere: original units, `x = 1` for 0/1 columns); the feature's
 * name inside it is emphasised, nothing is rewritten. Names and values are isolated (ruletext.js), so a
 * right-to-left name does not reorder the condition around it.
 */
export function chip(text, feature) {
  return h("span", { class: "chip", dir: "ltr", "data-feature": feature || null }, ruleNodes(text, { featureClass: "chip-feature" }));
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
      return h("div", { class: "class-bar" }, h("span", { class: "class-name" }, "P(", userText(fmt(c)), ")"), bar);
    }),
  );
}

const FEW_ROWS = 10;

function heldoutCell(entry) {
  if (!entry) return h("span", { class: "muted small", text: "no held-out figure yet" });
  if (entry.n === 0 || entry.accuracy === null) return h("span", { class: "muted small", text: `decided no held-out row (${entry.source})` });
  // an accuracy on a handful of rows is mostly chance: say so beside the bar
  const few = entry.n < FEW_ROWS ? " · few rows, read with care" : "";
  return h("span", { title: `from the ${entry.source}` }, meter(entry.accuracy, { label: "held-out accuracy", kind: "ok" }), h("span", { class: "muted small", text: ` n=${entry.n}${few}` }));
}

/**
 * The rule list: doc is the `neurules.rulelist` document; heldout maps rule id (0 = default) to
 * {accuracy, n, source}.
 */
export function ruleListView(doc, texts, heldout = new Map()) {
  if (!Array.isArray(texts) || texts.length !== doc.rules.length) throw new Error("the server sent no condition text for this rule list");
  const totalSupport = [...doc.rules, doc.default].reduce((a, r) => a + r.class_counts.reduce((x, y) => x + y, 0), 0) || 1;
  const card = (ruleId, keyword, rule, conditionTexts = []) => {
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
        ruleId === 0 ? null : h("span", { class: "chips" }, rule.conditions.length ? rule.conditions.map((c, k) => chip(conditionTexts[k], c.feature)) : h("span", { class: "chip", text: "always" })),
        h("span", { class: "kw", text: ruleId === 0 ? "" : "then" }),
        h("span", { class: "decision", dir: "ltr" }, userText(doc.target), " = ", h("strong", {}, userText(fmt(pred)))),
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
    doc.rules.map((r, i) => card(i + 1, i === 0 ? "if" : "else if", r, texts[i])),
    card(0, doc.rules.length ? "else" : "always", doc.default),
  );
}
