// One evaluation: metrics, per-class scores, confusion matrix, calibration, per-rule accuracy and
// coverage against training, and per-group slices. Polls while a large file is still being scored.

import { backoff, get, seg } from "../api.js";
import { fmt, h, mount, pct, when } from "../dom.js";
import { heatTable, reliabilityDiagram, shareBars } from "../charts.js";
import { ruleCode, userText } from "../ruletext.js";
import { beyondChance, chanceShare } from "../overlap.js";
import { sortableTable } from "../sorting.js";
import { badge, errorBox, facts, meter, notice, pageHeader, section, table } from "../ui.js";

function metricFacts(m, classes) {
  const binaryOnly = (v) => (v === null && classes.length > 2 ? h("span", { class: "muted", text: "— (binary targets only)" }) : v);
  return facts([
    ["Accuracy", m.accuracy],
    ["Weighted F1", m.f1_weighted],
    ["Macro F1", m.f1_macro],
    m.roc_auc !== undefined ? ["ROC AUC", binaryOnly(m.roc_auc)] : null,
    m.brier !== undefined ? ["Brier score", binaryOnly(m.brier)] : null,
  ]);
}

function perClass(m) {
  return table(
    [
      { label: "Class", value: (c) => fmt(c.class) },
      { label: "Precision", value: (c) => meter(c.precision, { label: "precision" }) },
      { label: "Recall", value: (c) => meter(c.recall, { label: "recall" }) },
      { label: "F1", value: (c) => fmt(c.f1), num: true },
      { label: "Support", value: (c) => fmt(c.support), num: true },
    ],
    m.per_class || [],
    { caption: "Per class" },
  );
}

function rulesTable(rules) {
  return table(
    [
      { label: "Rule", value: (r) => (r.rule_id === 0 ? "default" : `rule ${r.rule_id}`) },
      { label: "Conditions", value: (r) => ruleCode(r.rule_text, { class: "rule-text" }) },
      { label: "Predicts", value: (r) => fmt(r.prediction) },
      { label: "Rows", value: (r) => fmt(r.n), num: true },
      { label: "Share (training)", value: (r) => `${pct(r.share)} (${pct(r.training_share)})`, num: true },
      { label: "Accuracy on its rows", value: (r) => (r.accuracy === null ? h("span", { class: "muted", text: "no row" }) : meter(r.accuracy, { label: "accuracy", kind: "ok" })) },
      { label: "Class counts", value: (r) => Object.entries(r.class_counts || {}).map(([k, v], i) => [i ? ", " : "", userText(k), `: ${v}`]) },
    ],
    rules,
    { caption: "Each rule on the evaluation rows (list order, then the default rule)" },
  );
}

function sliceValue(g) {
  if (g.pooled) return h("span", { class: "missing", text: "all other values" });
  return g.value === null ? h("span", { class: "missing", text: "missing" }) : g.value;
}

function slicesView(slices) {
  if (!slices) return h("p", { class: "muted", text: "Not sliced: choose a column under “Slice by” when running an evaluation." });
  return sortableTable(
    [
      { label: slices.column, value: sliceValue, sort: (g) => (g.pooled ? null : g.value) },
      { label: "Rows", value: (g) => fmt(g.n_rows), num: true, sort: (g) => g.n_rows },
      { label: "Accuracy", value: (g) => meter(g.metrics.accuracy, { label: "accuracy" }), sort: (g) => g.metrics.accuracy },
      { label: "Weighted F1", value: (g) => fmt(g.metrics.f1_weighted), num: true, sort: (g) => g.metrics.f1_weighted },
      { label: "ROC AUC", value: (g) => fmt(g.metrics.roc_auc), num: true, sort: (g) => g.metrics.roc_auc },
      { label: "Positive rate", value: (g) => pct(g.positive_rate), num: true, sort: (g) => g.positive_rate },
    ],
    slices.groups,
    { caption: `Metrics per group of ${slices.column}` },
  );
}

function excludedView(ev) {
  const ex = ev.excluded || {};
  const lines = [];
  if (ex.missing_target) lines.push(`${ex.missing_target} row(s) without a target value`);
  if (ex.unseen_class) lines.push(`${ex.unseen_class} row(s) with a class the model never saw (${Object.entries(ex.unseen_class_values || {}).map(([k, v]) => `${k}: ${v}`).join(", ")})`);
  const unseen = Object.entries(ev.unseen_categories || {});
  return h(
    "div",
    {},
    lines.length ? notice("warning", `Not scored: ${lines.join("; ")}.`) : null,
    unseen.length ? notice("info", "Categories the model never saw (scored; they are in no rule's set): ", unseen.map(([col, vals]) => `${col}: ${Object.entries(vals).map(([k, v]) => `${k} ×${v}`).join(", ")}`).join("; ")) : null,
  );
}

function trainingFileNotice(onTraining) {
  if (onTraining !== true) return null;
  return notice("warning", h("strong", { text: "Not held out: " }), "this file is the one the version was trained on (same SHA-256), so these figures include rows it learned from and flatter it. Evaluate on a file it never saw.");
}

const UNCHECKED = {
  no_training_file: "not checked: the version was imported, no training file on record",
  training_dataset_deleted: "not checked: the training dataset was deleted before this evaluation",
  training_file_unreadable: "not checked: the training file no longer reads as the model's columns",
};

/** How many scored rows equal a row of the training file (checked by value by the service), with the chance level. */
function overlapFact(o, n) {
  if (!o) return null; // scored before the service checked this
  const label = "Rows equal to a training row";
  if (o.rows === null) return [label, h("span", { class: "muted", text: UNCHECKED[o.unchecked_reason] || "not checked" })];
  const share = n ? `${fmt(o.rows)} of ${fmt(n)} (${pct(o.rows / n)})` : fmt(o.rows);
  return [label, `${share}; new rows from the same source: about ${pct(chanceShare(o))}`];
}

/** A warning when more scored rows equal training rows than chance explains although the file is another one. */
function overlapNotice(o, n, onTraining) {
  if (onTraining === true || !beyondChance(o, n)) return null; // the same file has its own warning
  const all = o.rows >= n;
  const file = o.training_dataset_id ? h("a", { href: `#/datasets/${seg(o.training_dataset_id)}`, text: "the version's training file" }) : "the version's training file";
  const share = all ? `Every scored row (${fmt(n)}) equals a row of ` : `${fmt(o.rows)} of the ${fmt(n)} scored rows (${pct(o.rows / n)}) equal rows of `;
  const effect = all ? "these figures measure fit, not how it does on new data" : "these figures partly measure fit and flatter it";
  return notice("warning", h("strong", { text: all ? "Not held out: " : "Partly not held out: " }), share, file, ` (the same inputs and label), far more than new rows would by chance (about ${pct(chanceShare(o))}): the file looks cut from it, so ${effect}. Evaluate on rows it never saw.`);
}

function body(ev, ds, onTraining) {
  const m = ev.metrics;
  return [
    section("Summary", trainingFileNotice(onTraining), overlapNotice(ev.training_overlap, ev.n_rows, onTraining), facts([["State", badge(ev.state)], ["Dataset", ds ? h("a", { href: `#/datasets/${seg(ds.id)}`, text: ds.name }) : h("span", { class: "muted", text: `${ev.dataset_id} (deleted)` })], ["File SHA-256", ev.dataset_sha256 ? h("code", { class: "hash", text: ev.dataset_sha256 }) : "—"], ["Target", h("code", { text: ev.target })], ["Rows in the file", ev.n_rows_in_file], ["Rows scored", ev.n_rows], overlapFact(ev.training_overlap, ev.n_rows), ["Finished", when(ev.finished_at)]].filter(Boolean)), excludedView(ev)),
    section("Metrics", metricFacts(m, ev.classes || []), perClass(m)),
    section("Confusion matrix and calibration", h("div", { class: "chart-row" }, heatTable({ caption: "Confusion matrix (rows: true class, columns: predicted class; % of the row)", labels: ev.confusion_matrix.labels, matrix: ev.confusion_matrix.matrix, rowTitle: "true", colTitle: "predicted" }), ev.calibration ? reliabilityDiagram(ev.calibration) : null)),
    section("Rules on these rows", shareBars({ title: "Share of rows each rule decided: evaluation against training", items: ev.rules.map((r) => ({ label: r.rule_id === 0 ? "default" : `rule ${r.rule_id}`, title: r.rule_text, a: r.share, b: r.training_share })), aLabel: "evaluation", bLabel: "training" }), rulesTable(ev.rules)),
    section("Slices", slicesView(ev.slices)),
  ];
}

/** #/evaluations/<id> */
export async function evaluationPage(ctx, id) {
  let ev = await get(`/v1/evaluations/${seg(id)}`);
  const mv = ev.model_version;
  const [ds, version] = await Promise.all([get(`/v1/datasets/${seg(ev.dataset_id)}`).catch(() => null), get(`/v1/models/${seg(mv.id)}`).catch(() => null)]);
  const trained = version?.provenance?.dataset_sha256;
  const scored = ev.dataset_sha256 || ds?.sha256; // kept with the evaluation (null before it was): the dataset's otherwise
  const onTraining = scored && trained ? scored === trained : null;
  const content = h("div");
  const pollError = h("div"); // the last poll's failure, until a poll succeeds
  let timer = null;
  let failures = 0;
  const draw = () => {
    if (ev.state === "succeeded") mount(content, body(ev, ds, onTraining));
    else if (ev.state === "failed") mount(content, notice("error", h("strong", { text: "The evaluation failed: " }), ev.error || "no reason recorded", ev.error_code ? h("span", { class: "muted", text: ` (${ev.error_code})` }) : null));
    else mount(content, section("Scoring", h("p", {}, "State: ", badge(ev.state)), meter(ev.progress || 0, { label: "progress" })));
  };
  const poll = async () => {
    try {
      ev = await get(`/v1/evaluations/${seg(id)}`);
      failures = 0;
      mount(pollError);
      draw();
    } catch (err) {
      failures += 1; // the state shown may be out of date: say so, and try again, waiting longer after each failure
      mount(pollError, errorBox(err, "Could not refresh the evaluation"));
    }
    if (ctx.current() && (ev.state === "queued" || ev.state === "running")) timer = setTimeout(poll, backoff(1000, failures));
  };
  ctx.onLeave(() => clearTimeout(timer));
  draw();
  if (ev.state === "queued" || ev.state === "running") timer = setTimeout(poll, 1000);
  const base = `#/models/${seg(mv.name)}`;
  return h("div", {}, pageHeader(`Evaluation of ${mv.name} version ${mv.version}`, h("span", {}, h("a", { href: base, text: mv.name }), " / ", h("a", { href: `${base}/${mv.version}`, text: `version ${mv.version}` }), ` / ${when(ev.created_at)}`)), pollError, content);
}
